package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/reconcile"
)

// TestCaptureAndVoidLookupsThatFailNeedReview: a capture and a void whose
// answers came too late and whose every lookup fails
// (tok_capture_lookup_fails, tok_void_lookup_fails: the simulator made
// them) go to NEEDS_REVIEW once the schedule is spent, never FAILED by a
// timer: the capture keeps its amount reserved, the void keeps every
// capture out, as the gateway's ledger requires.
func TestCaptureAndVoidLookupsThatFailNeedReview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	svc, err := order.NewService(f.store, map[string]order.Gateway{"sim": f.gw}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: time.Second, Grace: time.Second, FirstRecheck: time.Millisecond,
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	scope := order.ForMerchant(order.DefaultMerchant)
	authorize := func(ref, token string) (order.Order, string) {
		n := order.NewOrder{MerchantReference: ref, Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token,
			Capture: order.CaptureManual}
		o, a, err := svc.CreateAndCharge(ctx, order.DefaultMerchant, n, order.ChargeInput{RequestID: "charge-" + ref})
		if err != nil || o.State != order.StateAuthorized {
			t.Fatalf("authorize %s: %+v, %v", ref, o, err)
		}
		return o, a.ID
	}
	co, cAuth := authorize("review-capture", "tok_capture_lookup_fails")
	_, c, err := svc.Capture(ctx, scope, order.ActorAPI, order.CaptureInput{OrderID: co.ID, RequestID: "review-capture-1", AmountMinor: 600})
	if err != nil || c.State != order.CaptureCapturing {
		t.Fatalf("capture answered late: %+v, %v; want CAPTURING", c, err)
	}
	vo, vAuth := authorize("review-void", "tok_void_lookup_fails")
	_, v, err := svc.Void(ctx, scope, order.ActorAPI, order.VoidInput{OrderID: vo.ID, RequestID: "review-void-1"})
	if err != nil || v.State != order.VoidVoiding {
		t.Fatalf("void answered late: %+v, %v; want VOIDING", v, err)
	}

	r := f.reconciler(t, f.gw, reconcile.Config{})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		co, c, err = f.store.OrderCapture(ctx, order.DefaultMerchant, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		vo, v, err = f.store.OrderVoid(ctx, order.DefaultMerchant, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != order.CaptureCapturing && v.State != order.VoidVoiding {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capture %s, void %s after 30s of checks", c.State, v.State)
		}
	}
	if c.State != order.CaptureNeedsReview || c.LastError == "" || co.CapturingMinor != 600 || co.CapturedMinor != 0 ||
		co.State != order.StateAuthorized {
		t.Fatalf("capture %s (last error %q), order %s capturing %d captured %d; want NEEDS_REVIEW with 600 reserved on an AUTHORIZED order",
			c.State, c.LastError, co.State, co.CapturingMinor, co.CapturedMinor)
	}
	if got := f.sim.Captured(cAuth); got != 600 {
		t.Fatalf("the gateway captured %d, want 600", got)
	}
	if v.State != order.VoidNeedsReview || !vo.Voiding || vo.State != order.StateAuthorized {
		t.Fatalf("void %s, order %s voiding %v; want NEEDS_REVIEW, the order AUTHORIZED and voiding", v.State, vo.State, vo.Voiding)
	}
	var voided bool
	for _, gv := range f.sim.Voids() {
		voided = voided || (gv.ChargeReference == vAuth && gv.Status == refpsp.OpSucceeded)
	}
	if !voided {
		t.Fatal("the gateway has no void of the authorization")
	}
	// The void in review keeps a capture from the hold it may have released.
	_, _, err = svc.Capture(ctx, scope, order.ActorAPI, order.CaptureInput{OrderID: vo.ID, RequestID: "review-void-capture"})
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("capture beside a void in review: %v, want a *HoldError", err)
	}
}
