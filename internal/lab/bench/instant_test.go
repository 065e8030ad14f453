package bench

import (
	"context"
	"testing"

	"github.com/settlepay/settle/internal/order"
)

// The instant gateway keeps an authorization's rules as a gateway does: a
// capture-manual charge holds its amount, captures fit within the hold and
// replay under their reference, a final one closes it, and a void releases
// only a hold of which nothing was captured.
func TestInstantHolds(t *testing.T) {
	ctx := context.Background()
	g := NewInstant()
	var _ order.Capturer = g
	charge := order.ChargeRequest{AttemptID: "att-1", Amount: order.Money{Currency: "GBP", AmountMinor: 10},
		Capture: order.CaptureManual}
	res, err := g.Charge(ctx, charge)
	if err != nil || res.Hold == nil || res.Hold.State != order.HoldOpen || res.Hold.AuthorizedMinor != 10 {
		t.Fatalf("authorize: %+v, %v", res, err)
	}
	capture := func(id string, amount int64, final bool) order.Result {
		t.Helper()
		res, err := g.Capture(ctx, order.CaptureRequest{CaptureID: id, ChargeAttemptID: "att-1",
			Amount: order.Money{Currency: "GBP", AmountMinor: amount}, Final: final})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := capture("cap-1", 6, false); res.Outcome != order.OutcomeSucceeded || res.Hold.CapturedMinor != 6 {
		t.Fatalf("capture of 6: %+v", res)
	}
	if res := capture("cap-1", 6, false); res.Outcome != order.OutcomeSucceeded || res.Hold.CapturedMinor != 6 {
		t.Fatalf("replay of the capture: %+v; want the same capture, not another", res)
	}
	if res := capture("cap-2", 5, false); res.Outcome != order.OutcomeDeclined {
		t.Fatalf("capture beyond the hold: %+v", res)
	}
	if res, _ := g.Void(ctx, order.VoidRequest{VoidID: "void-1", ChargeAttemptID: "att-1"}); res.Outcome != order.OutcomeDeclined {
		t.Fatalf("void after a capture: %+v", res)
	}
	if res := capture("cap-3", 4, true); res.Outcome != order.OutcomeSucceeded || res.Hold.State != order.HoldCaptured {
		t.Fatalf("final capture: %+v", res)
	}
	if res := capture("cap-4", 0, false); res.Outcome != order.OutcomeDeclined {
		t.Fatalf("capture after the final one: %+v", res)
	}
	if res, err := g.LookupCapture(ctx, order.CaptureRequest{CaptureID: "cap-3", ChargeAttemptID: "att-1"}); err != nil ||
		res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("lookup of a capture: %+v, %v", res, err)
	}

	if _, err := g.Charge(ctx, order.ChargeRequest{AttemptID: "att-2", Amount: order.Money{Currency: "GBP", AmountMinor: 10},
		Capture: order.CaptureManual}); err != nil {
		t.Fatal(err)
	}
	if res, _ := g.Void(ctx, order.VoidRequest{VoidID: "void-2", ChargeAttemptID: "att-2"}); res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("void: %+v", res)
	}
	if res, _ := g.LookupVoid(ctx, order.VoidRequest{VoidID: "void-2"}); res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("lookup of the void: %+v", res)
	}
	if res, _ := g.Lookup(ctx, order.ChargeRequest{AttemptID: "att-2"}); res.Hold == nil || res.Hold.State != order.HoldVoided {
		t.Fatalf("lookup of the voided charge: %+v", res)
	}
}
