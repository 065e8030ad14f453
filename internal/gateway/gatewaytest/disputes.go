package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// What the suite holds every gateway whose disputes can be read and
// accepted (an order.DisputeGateway) to, with disputes the harness opens
// at its fake (Harness.OpenDispute) of a succeeded charge:
//
//   - GetDispute reads an open chargeback as NEEDS_RESPONSE at stage
//     CHARGEBACK, with its id, amount and the amount withdrawn;
//   - AcceptDispute concedes it (LOST, the amount still withdrawn and
//     nothing reinstated), a second accept is no error and changes
//     nothing, and the read then agrees;
//   - a dispute the network decided for the merchant reads WON with what
//     was withdrawn reinstated, and accepting it then leaves it WON;
//   - a read of a dispute the gateway does not have is an error.

// disputeCallBound bounds a dispute call of the suite's.
const disputeCallBound = 30 * time.Second

// disputeTests are the dispute tests of Run.
var disputeTests = []struct {
	name string
	run  func(t *testing.T, h Harness, g order.DisputeGateway)
}{
	{"dispute read and accepted", testDisputeAccepted},
	{"dispute won", testDisputeWon},
	{"read of an unknown dispute", testUnknownDispute},
}

// disputed charges h.OK and opens a dispute of amount of it at the fake.
func disputed(t *testing.T, h Harness, amount int64) (string, order.ChargeRequest) {
	t.Helper()
	req := request(h.OK)
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
	}
	return h.OpenDispute(t, res.ChargeID, amount), req
}

func getDispute(t *testing.T, g order.DisputeGateway, id string) order.GatewayDispute {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), disputeCallBound)
	defer cancel()
	d, err := g.GetDispute(ctx, id)
	if err != nil {
		t.Fatalf("GetDispute(%s): %v", id, err)
	}
	return d
}

func testDisputeAccepted(t *testing.T, h Harness, g order.DisputeGateway) {
	id, req := disputed(t, h, 1000)
	d := getDispute(t, g, id)
	if d.ID != id || d.Status != order.DisputeNeedsResponse || d.Stage != order.DisputeChargeback ||
		d.Amount != (order.Money{Currency: req.Amount.Currency, AmountMinor: 1000}) || d.Withdrawn != 1000 || d.Reinstated != 0 {
		t.Fatalf("GetDispute = %+v; want an open chargeback of 1000 %s, withdrawn", d, req.Amount.Currency)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), disputeCallBound)
		a, err := g.AcceptDispute(ctx, id)
		cancel()
		if err != nil || a.ID != id || a.Status != order.DisputeLost || a.Withdrawn != 1000 || a.Reinstated != 0 {
			t.Fatalf("AcceptDispute #%d = %+v, %v; want LOST with 1000 withdrawn", i+1, a, err)
		}
	}
	if d := getDispute(t, g, id); d.Status != order.DisputeLost {
		t.Errorf("GetDispute after the accept = %+v; want LOST", d)
	}
}

func testDisputeWon(t *testing.T, h Harness, g order.DisputeGateway) {
	id, _ := disputed(t, h, 0)
	h.DecideDispute(t, id, true)
	d := getDispute(t, g, id)
	if d.Status != order.DisputeWon || d.Withdrawn == 0 || d.Reinstated != d.Withdrawn {
		t.Fatalf("GetDispute of a won dispute = %+v; want WON with what was withdrawn reinstated", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), disputeCallBound)
	defer cancel()
	if a, err := g.AcceptDispute(ctx, id); err != nil || a.Status != order.DisputeWon {
		t.Errorf("AcceptDispute of a won dispute = %+v, %v; want it WON as it stands", a, err)
	}
}

func testUnknownDispute(t *testing.T, h Harness, g order.DisputeGateway) {
	ctx, cancel := context.WithTimeout(t.Context(), disputeCallBound)
	defer cancel()
	if d, err := g.GetDispute(ctx, h.UnknownDispute); err == nil {
		t.Errorf("GetDispute(%q) = %+v; want an error", h.UnknownDispute, d)
	}
}
