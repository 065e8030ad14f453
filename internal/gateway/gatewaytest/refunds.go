package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// What the suite holds every gateway that refunds (an order.Refunder) to:
//
//   - a refund of a charge reports succeeded with the gateway's refund id,
//     and the gateway's refund ledger agrees;
//   - LookupRefund of a refund says what became of it and refunds nothing
//     more; of a refund never sent it says not found;
//   - a refund that outlives its timeout reports unknown, and LookupRefund
//     then finds the one refund made;
//   - a refund the gateway answers as pending and fails later is unknown
//     (never succeeded), and LookupRefund reports it failed once it has.

// refundTests are the refund tests of Run.
var refundTests = []struct {
	name string
	run  func(t *testing.T, h Harness, r order.Refunder)
}{
	{"refund succeeds", testRefundSucceeds},
	{"lookup of a refund never sent", testLookupRefundNeverSent},
	{"refund past the timeout is unknown, then found", testRefundTimeout},
	{"refund that fails later", testRefundFailsLater},
}

// refundable charges h.OK (or token) and returns a refund request for
// amount of it.
func refundable(t *testing.T, h Harness, token string, amount int64) order.RefundRequest {
	t.Helper()
	req := request(token)
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
	}
	return order.RefundRequest{RefundID: order.NewID(), OrderID: req.OrderID, ChargeAttemptID: req.AttemptID,
		ChargeID: res.ChargeID, Amount: order.Money{Currency: req.Amount.Currency, AmountMinor: amount},
		CreatedAt: time.Now()}
}

func testRefundSucceeds(t *testing.T, h Harness, r order.Refunder) {
	req := refundable(t, h, h.OK, 500)
	res, err := refund(t, h, r, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID == "" {
		t.Fatalf("Refund = %+v, %v; want succeeded with a refund id", res, err)
	}
	again, err := lookupRefund(t, h, r, req)
	if err != nil || again.Outcome != order.OutcomeSucceeded || again.ChargeID != res.ChargeID {
		t.Fatalf("LookupRefund = %+v, %v; want succeeded with refund %s", again, err, res.ChargeID)
	}
	checkRefunds(t, h, req, Entry{ChargeID: res.ChargeID, Succeeded: true})
	// The rest of the charge can be refunded too.
	rest := refundable(t, h, h.OK, 1250)
	if res, err := refund(t, h, r, rest); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Refund of the whole charge = %+v, %v; want succeeded", res, err)
	}
}

func testLookupRefundNeverSent(t *testing.T, h Harness, r order.Refunder) {
	req := refundable(t, h, h.OK, 500)
	if h.Notified {
		// Silence proves nothing: it cannot say.
		if res, err := r.LookupRefund(t.Context(), req); err == nil || definite(res) {
			t.Fatalf("LookupRefund = %+v, %v; want an error", res, err)
		}
		checkRefunds(t, h, req)
		return
	}
	res, err := lookupRefund(t, h, r, req)
	if err != nil || res.Outcome != order.OutcomeNotFound {
		t.Fatalf("LookupRefund = %+v, %v; want not found", res, err)
	}
	checkRefunds(t, h, req)
}

func testRefundTimeout(t *testing.T, h Harness, r order.Refunder) {
	if h.RefundTimeout == "" {
		t.Skip("the harness names no payment method whose refunds outlive the timeout")
	}
	req := refundable(t, h, h.RefundTimeout, 700)
	start := time.Now()
	res, err := refundOnce(t, h, r, req)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Refund = %+v, %v; want unknown with an error", res, err)
	}
	if took, limit := time.Since(start), h.CallTimeout+2*time.Second; took > limit {
		t.Errorf("Refund took %s, more than its timeout %s allows", took, h.CallTimeout)
	}
	found := poll(t, h, r, req)
	if found.Outcome != order.OutcomeSucceeded || found.ChargeID == "" {
		t.Fatalf("LookupRefund = %+v; want succeeded with a refund id", found)
	}
	checkRefunds(t, h, req, Entry{ChargeID: found.ChargeID, Succeeded: true})
}

func testRefundFailsLater(t *testing.T, h Harness, r order.Refunder) {
	req := refundable(t, h, h.RefundFailLater, 1250)
	res, err := refundOnce(t, h, r, req)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Refund = %+v, %v; want unknown (pending) with an error", res, err)
	}
	found := poll(t, h, r, req)
	if h.Notified {
		// A notification that the refund was made may come first; the
		// failure's follows.
		deadline := time.Now().Add(h.CallTimeout + 15*time.Second)
		for found.Outcome == order.OutcomeSucceeded && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			found = poll(t, h, r, req)
		}
	}
	if found.Outcome != order.OutcomeDeclined || found.DeclineCode == "" {
		t.Fatalf("LookupRefund = %+v; want declined (failed) with a code", found)
	}
	for _, e := range h.RefundLedger(req.RefundID) {
		if e.Succeeded {
			t.Fatalf("refund ledger holds a successful refund %s", e.ChargeID)
		}
	}
}

// poll calls LookupRefund until the gateway can say.
func poll(t *testing.T, h Harness, r order.Refunder, req order.RefundRequest) order.Result {
	t.Helper()
	deadline := time.Now().Add(h.CallTimeout + 15*time.Second)
	for {
		res, err := lookupRefund(t, h, r, req)
		if err == nil && res.Outcome != order.OutcomeNotFound {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("LookupRefund still cannot say: %+v, %v", res, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refund calls Refund and checks the interface's promise about errors;
// a refund a Notified gateway received is settled by its lookup.
func refund(t *testing.T, h Harness, r order.Refunder, req order.RefundRequest) (order.Result, error) {
	t.Helper()
	res, err := refundOnce(t, h, r, req)
	if received(h, res) {
		return settled(t, "Refund", res, func() (order.Result, error) { return lookupRefund(t, h, r, req) })
	}
	return res, err
}

// refundOnce calls Refund and checks the interface's promise about
// errors.
func refundOnce(t *testing.T, h Harness, r order.Refunder, req order.RefundRequest) (order.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	res, err := r.Refund(ctx, req)
	if err != nil && res.Outcome == order.OutcomeSucceeded {
		t.Errorf("Refund = %+v with error %v: an error must not come with a success", res, err)
	}
	switch res.Outcome {
	case order.OutcomeSucceeded, order.OutcomeDeclined, order.OutcomeUnknown, order.OutcomeNotSent:
	default:
		t.Errorf("Refund outcome %q is not one a refund can have", res.Outcome)
	}
	return res, err
}

// lookupRefund calls LookupRefund and checks the interface's promise.
func lookupRefund(t *testing.T, h Harness, r order.Refunder, req order.RefundRequest) (order.Result, error) {
	t.Helper()
	return notified(t, h, func() (order.Result, error) {
		ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
		defer cancel()
		res, err := r.LookupRefund(ctx, req)
		checkLookup(t, "LookupRefund", res, err)
		return res, err
	})
}

// checkRefunds checks that the fake recorded exactly want for req.
func checkRefunds(t *testing.T, h Harness, req order.RefundRequest, want ...Entry) {
	t.Helper()
	got := h.RefundLedger(req.RefundID)
	if len(got) != len(want) {
		t.Fatalf("refund ledger for %s = %+v, want %+v", req.RefundID, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("refund ledger for %s = %+v, want %+v", req.RefundID, got, want)
		}
	}
}
