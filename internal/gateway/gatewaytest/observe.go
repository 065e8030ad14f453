package gatewaytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// observed is one call as an Observer was told of it.
type observed struct {
	call    gateway.Call
	outcome order.Outcome
	err     error
	// ended counts the calls of the function Start returned.
	ended int
}

// recorder is a gateway.Observer that keeps what it is told.
type recorder struct {
	mu    sync.Mutex
	calls []*observed
}

func (r *recorder) Start(ctx context.Context, call gateway.Call) (context.Context, func(order.Result, error)) {
	o := &observed{call: call}
	r.mu.Lock()
	r.calls = append(r.calls, o)
	r.mu.Unlock()
	return ctx, func(res order.Result, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		o.outcome, o.err, o.ended = res.Outcome, err, o.ended+1
	}
}

// testObserved: the adapter reports each of its calls (charge and lookup,
// a refunder's refund and refund lookup, a capturer's capture, void and
// their lookups, and a lister's pages) to its observer once, with
// the order's and the attempt's (or the refund's) ids and what the call
// returned, so that telemetry needs no wrapper around it.
func testObserved(t *testing.T, h Harness) {
	if h.Observed == nil {
		t.Fatal("gatewaytest: the harness must set Observed")
	}
	var rec recorder
	gw := h.Observed(&rec)
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	var want []observed
	req := request(h.OK)
	res, err := gw.Charge(ctx, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
	}
	want = append(want, observed{gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID}, res.Outcome, err, 1})
	lres, err := gw.Lookup(ctx, req)
	want = append(want, observed{gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID}, lres.Outcome, err, 1})
	if r, ok := gw.(order.Refunder); ok {
		rreq := order.RefundRequest{RefundID: order.NewID(), OrderID: req.OrderID, ChargeAttemptID: req.AttemptID,
			ChargeID: res.ChargeID, Amount: order.Money{Currency: req.Amount.Currency, AmountMinor: 500}, CreatedAt: time.Now()}
		rres, err := r.Refund(ctx, rreq)
		want = append(want, observed{gateway.Call{Op: gateway.OpRefund, OrderID: req.OrderID, AttemptID: rreq.RefundID}, rres.Outcome, err, 1})
		rres, err = r.LookupRefund(ctx, rreq)
		want = append(want, observed{gateway.Call{Op: gateway.OpLookupRefund, OrderID: req.OrderID, AttemptID: rreq.RefundID}, rres.Outcome, err, 1})
	}
	if c, ok := gw.(order.Capturer); ok && h.Captures {
		areq := request(h.OK)
		areq.Capture = order.CaptureManual
		ares, err := gw.Charge(ctx, areq)
		if err != nil || ares.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge with manual capture = %+v, %v; want succeeded", ares, err)
		}
		want = append(want, observed{gateway.Call{Op: gateway.OpCharge, OrderID: areq.OrderID, AttemptID: areq.AttemptID}, ares.Outcome, err, 1})
		creq := order.CaptureRequest{CaptureID: order.NewID(), OrderID: areq.OrderID, ChargeAttemptID: areq.AttemptID,
			ChargeID: ares.ChargeID, Amount: areq.Amount, Final: true, CreatedAt: time.Now()}
		cres, err := c.Capture(ctx, creq)
		want = append(want, observed{gateway.Call{Op: gateway.OpCapture, OrderID: areq.OrderID, AttemptID: creq.CaptureID}, cres.Outcome, err, 1})
		cres, err = c.LookupCapture(ctx, creq)
		want = append(want, observed{gateway.Call{Op: gateway.OpLookupCapture, OrderID: areq.OrderID, AttemptID: creq.CaptureID}, cres.Outcome, err, 1})
		vreq := order.VoidRequest{VoidID: order.NewID(), OrderID: areq.OrderID, ChargeAttemptID: areq.AttemptID,
			ChargeID: ares.ChargeID, CreatedAt: time.Now()}
		vres, err := c.Void(ctx, vreq)
		want = append(want, observed{gateway.Call{Op: gateway.OpVoid, OrderID: areq.OrderID, AttemptID: vreq.VoidID}, vres.Outcome, err, 1})
		vres, err = c.LookupVoid(ctx, vreq)
		want = append(want, observed{gateway.Call{Op: gateway.OpLookupVoid, OrderID: areq.OrderID, AttemptID: vreq.VoidID}, vres.Outcome, err, 1})
	}
	if l, ok := gw.(order.ChargeLister); ok {
		// A listing of a few records is one page, one call.
		from, to := time.Now().Add(-time.Minute), time.Now().Add(time.Minute)
		err := l.ListCharges(ctx, from, to, func(order.GatewayCharge) error { return nil })
		want = append(want, observed{gateway.Call{Op: gateway.OpListCharges}, order.OutcomeSucceeded, err, 1})
		err = l.ListRefunds(ctx, from, to, func(order.GatewayRefund) error { return nil })
		want = append(want, observed{gateway.Call{Op: gateway.OpListRefunds}, order.OutcomeSucceeded, err, 1})
	}
	// A call refused before anything is sent is observed too.
	bad := request(h.OK)
	bad.AttemptID = ""
	bres, err := gw.Charge(ctx, bad)
	want = append(want, observed{gateway.Call{Op: gateway.OpCharge, OrderID: bad.OrderID}, bres.Outcome, err, 1})

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) != len(want) {
		t.Fatalf("the observer was told of %d calls, want %d", len(rec.calls), len(want))
	}
	for i, got := range rec.calls {
		if got.call != want[i].call || got.outcome != want[i].outcome || !errors.Is(got.err, want[i].err) || got.ended != 1 {
			t.Errorf("call %d observed as %+v, want %+v", i, *got, want[i])
		}
	}
}
