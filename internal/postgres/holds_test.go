package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// The hold store's tests (captures, voids, the holds' leases), part of
// the store's conformance suite: both engines run them.

// authorizedOrder makes an order with capture manual and takes it through
// the store's own charge path to AUTHORIZED, holding 1250 until
// captureBefore.
func authorizedOrder(t *testing.T, s *postgres.Store, ref string, captureBefore time.Time) order.Order {
	t.Helper()
	ctx := context.Background()
	n := newOrder(ref)
	n.Capture = order.CaptureManual
	o, err := s.CreateOrder(ctx, n)
	if err != nil || o.Capture != order.CaptureManual {
		t.Fatalf("create: %+v, %v", o, err)
	}
	c, err := s.Claim(ctx, claimOf(o, ref+"-charge"))
	if err != nil || !c.Claimed || c.Order.Capture != order.CaptureManual {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	got, ok, err := s.Settle(ctx, order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: c.Attempt.ID,
		Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_" + ref,
			Hold: &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250, CaptureBefore: captureBefore}},
		Event: order.EventAuthorize, To: order.StateAuthorized, Actor: "test"})
	if err != nil || !ok || got.State != order.StateAuthorized {
		t.Fatalf("settle: %+v %v, %v", got, ok, err)
	}
	o, err = s.Order(ctx, order.ForMerchant(o.MerchantID), o.ID)
	if err != nil || o.AuthorizedMinor != 1250 || !o.CaptureBefore.Equal(captureBefore) {
		t.Fatalf("authorized order: %+v, %v", o, err)
	}
	return o
}

func captureClaimOf(o order.Order, requestID string, amount int64, final bool) order.CaptureClaim {
	return order.CaptureClaim{MerchantID: o.MerchantID, OrderID: o.ID, RequestID: requestID,
		CaptureID: order.CaptureID(o.MerchantID, o.ID, requestID), AmountMinor: amount, Final: final, Actor: "test",
		Lease: 15 * time.Second}
}

func voidClaimOf(o order.Order, requestID string) order.VoidClaim {
	return order.VoidClaim{MerchantID: o.MerchantID, OrderID: o.ID, RequestID: requestID,
		VoidID: order.VoidID(o.MerchantID, o.ID, requestID), Actor: "test", Lease: 15 * time.Second}
}

// testCaptureClaimsKeepWithinTheHold: twenty concurrent claims of 100
// against a hold of 1250 admit exactly twelve, and the order's totals say
// so; the rest see what is left.
func testCaptureClaimsKeepWithinTheHold(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o := authorizedOrder(t, s, "hold-race", time.Now().Add(time.Hour).Truncate(time.Microsecond))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for i := range 20 {
		wg.Go(func() {
			r, err := s.ClaimCapture(ctx, captureClaimOf(o, fmt.Sprintf("cap-%02d", i), 100, false))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if r.Claimed {
				claimed++
			} else if r.Capture != nil || r.Order.AuthorizedMinor-r.Order.CapturedMinor-r.Order.CapturingMinor >= 100 {
				t.Errorf("refused with room left: %+v", r)
			}
		})
	}
	wg.Wait()
	got, err := s.Order(ctx, order.ForMerchant(o.MerchantID), o.ID)
	if err != nil || claimed != 12 || got.CapturingMinor != 1200 {
		t.Fatalf("claimed %d, capturing %d (%v); want 12, 1200", claimed, got.CapturingMinor, err)
	}
}

// testCaptureClaimReplaysAndSettles: a replay of a request id returns the
// same capture without reserving again; a succeeded capture makes the
// order PAID with its captured total, a final one closes the hold, and a
// failed one releases its reservation.
func testCaptureClaimReplaysAndSettles(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o := authorizedOrder(t, s, "hold-settle", time.Now().Add(time.Hour).Truncate(time.Microsecond))

	first, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-a", 400, false))
	if err != nil || !first.Claimed || first.ChargeID != "ch_hold-settle" || first.Capture.State != order.CaptureCapturing {
		t.Fatalf("claim: %+v, %v", first, err)
	}
	again, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-a", 400, false))
	if err != nil || again.Claimed || again.Capture == nil || again.Capture.ID != first.Capture.ID || again.Order.CapturingMinor != 400 {
		t.Fatalf("replay: %+v, %v", again, err)
	}

	st := order.CaptureSettlementFor(o.MerchantID, first.Capture.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "cap_1"}, time.Minute)
	got, c, ok, err := s.SettleCapture(ctx, st)
	if err != nil || !ok || got.State != order.StatePaid || got.CapturedMinor != 400 || got.CapturingMinor != 0 ||
		c.State != order.CaptureSucceeded || c.GatewayCaptureID != "cap_1" {
		t.Fatalf("settle: %+v %+v %v, %v", got, c, ok, err)
	}
	if _, _, ok, err := s.SettleCapture(ctx, st); err != nil || ok {
		t.Fatalf("a second settle of the capture: %v, %v; want the guard to refuse it", ok, err)
	}

	failed, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-b", 300, false))
	if err != nil || !failed.Claimed || failed.Order.State != order.StatePaid {
		t.Fatalf("claim after the first capture: %+v, %v", failed, err)
	}
	got, _, _, err = s.SettleCapture(ctx, order.CaptureSettlementFor(o.MerchantID, failed.Capture.ID,
		order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "hold_lapsed"}, time.Minute))
	if err != nil || got.CapturingMinor != 0 || got.CapturedMinor != 400 {
		t.Fatalf("failed capture: %+v, %v", got, err)
	}

	final, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-c", 100, true))
	if err != nil || !final.Claimed {
		t.Fatalf("final claim: %+v, %v", final, err)
	}
	got, _, _, err = s.SettleCapture(ctx, order.CaptureSettlementFor(o.MerchantID, final.Capture.ID,
		order.Result{Outcome: order.OutcomeSucceeded}, time.Minute))
	if err != nil || !got.HoldClosed || got.CapturedMinor != 500 {
		t.Fatalf("final capture: %+v, %v", got, err)
	}
	after, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-d", 100, false))
	if err != nil || after.Claimed || after.Capture != nil {
		t.Fatalf("a capture after the final one was admitted: %+v, %v", after, err)
	}

	// The order's history has one row per settled capture: the merchant's
	// capture.succeeded and capture.failed events.
	evs, _, err := s.History(ctx, o.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	want := fmt.Sprint([]string{"create", "charge", "authorize", "capture", "capture_failed", "captured"})
	if fmt.Sprint(names) != want {
		t.Fatalf("history %v, want %v", names, want)
	}
}

// testVoidAndCaptureExcludeEachOther: a void is refused while a capture is
// in flight, a capture while a void is, and a void after a capture
// succeeded; a void that succeeds makes the order VOIDED.
func testVoidAndCaptureExcludeEachOther(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	before := time.Now().Add(time.Hour).Truncate(time.Microsecond)

	o := authorizedOrder(t, s, "void-a", before)
	c, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap", 0, true))
	if err != nil || !c.Claimed || c.Capture.Amount.AmountMinor != 1250 {
		t.Fatalf("capture of all: %+v, %v", c, err)
	}
	if v, err := s.ClaimVoid(ctx, voidClaimOf(o, "void")); err != nil || v.Claimed || v.Void != nil {
		t.Fatalf("a void beside a capture in flight: %+v, %v", v, err)
	}
	if _, _, _, err := s.SettleCapture(ctx, order.CaptureSettlementFor(o.MerchantID, c.Capture.ID,
		order.Result{Outcome: order.OutcomeSucceeded}, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if v, err := s.ClaimVoid(ctx, voidClaimOf(o, "void-after")); err != nil || v.Claimed || v.Order.CapturedMinor != 1250 {
		t.Fatalf("a void after a capture: %+v, %v", v, err)
	}

	o = authorizedOrder(t, s, "void-b", before)
	v, err := s.ClaimVoid(ctx, voidClaimOf(o, "void"))
	if err != nil || !v.Claimed || !v.Order.Voiding || v.Void.State != order.VoidVoiding {
		t.Fatalf("void: %+v, %v", v, err)
	}
	if c, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap-beside-void", 100, false)); err != nil || c.Claimed || c.Capture != nil {
		t.Fatalf("a capture beside a void in flight: %+v, %v", c, err)
	}
	got, vd, ok, err := s.SettleVoid(ctx, order.VoidSettlementFor(o.MerchantID, v.Void.ID,
		order.Result{Outcome: order.OutcomeSucceeded}, time.Minute))
	if err != nil || !ok || got.State != order.StateVoided || got.Voiding || vd.State != order.VoidSucceeded {
		t.Fatalf("settled void: %+v %+v, %v", got, vd, err)
	}
}

// testRefundOfWhatWasCaptured: refunds apply to what was captured, never
// to the hold: a refund of all after a capture of 400 from a hold of 1250
// is of 400, and it refunds the order fully.
func testRefundOfWhatWasCaptured(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o := authorizedOrder(t, s, "refund-captured", time.Now().Add(time.Hour).Truncate(time.Microsecond))
	c, err := s.ClaimCapture(ctx, captureClaimOf(o, "cap", 400, true))
	if err != nil || !c.Claimed {
		t.Fatalf("capture: %+v, %v", c, err)
	}
	if _, _, ok, err := s.SettleCapture(ctx, order.CaptureSettlementFor(o.MerchantID, c.Capture.ID,
		order.Result{Outcome: order.OutcomeSucceeded}, time.Minute)); err != nil || !ok {
		t.Fatalf("settle capture: %v, %v", ok, err)
	}
	if r, err := s.ClaimRefund(ctx, refundClaimOf(o, "too-much", 401)); err != nil || r.Claimed {
		t.Fatalf("a refund beyond what was captured: %+v, %v", r, err)
	}
	r, err := s.ClaimRefund(ctx, refundClaimOf(o, "all", 0))
	if err != nil || !r.Claimed || r.Refund.Amount.AmountMinor != 400 {
		t.Fatalf("refund of all: %+v, %v; want 400", r, err)
	}
	got, _, ok, err := s.SettleRefund(ctx, order.RefundSettlementFor(o.MerchantID, r.Refund.OrderID, r.Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re"}, time.Minute))
	if err != nil || !ok || got.State != order.StateRefunded || got.Refunded != 400 {
		t.Fatalf("settled refund: %+v %v, %v; want REFUNDED with 400", got, ok, err)
	}
}

// testHoldLeases: the reconciler leases due captures, due voids and holds
// past capture_before once each, with what their lookups need, and a hold
// the gateway says has lapsed expires only while nothing is captured.
func testHoldLeases(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	due := -time.Second // a lease that has already run out: due now

	captured := authorizedOrder(t, s, "lease-capture", later)
	cc := captureClaimOf(captured, "cap", 100, false)
	cc.Lease = due
	if c, err := s.ClaimCapture(ctx, cc); err != nil || !c.Claimed {
		t.Fatalf("capture: %+v, %v", c, err)
	}
	caps, err := s.ClaimDueCaptures(ctx, 10, time.Minute)
	if err != nil || len(caps) != 1 || caps[0].Capture.ID != cc.CaptureID || caps[0].ChargeID != "ch_lease-capture" ||
		caps[0].Gateway != "sim" || caps[0].ChargeAttemptID != captured.CurrentAttempt {
		t.Fatalf("due captures: %+v, %v", caps, err)
	}
	if caps, err := s.ClaimDueCaptures(ctx, 10, time.Minute); err != nil || len(caps) != 0 {
		t.Fatalf("a leased capture was leased again: %+v, %v", caps, err)
	}

	voided := authorizedOrder(t, s, "lease-void", later)
	vc := voidClaimOf(voided, "void")
	vc.Lease = due
	if v, err := s.ClaimVoid(ctx, vc); err != nil || !v.Claimed {
		t.Fatalf("void: %+v, %v", v, err)
	}
	voids, err := s.ClaimDueVoids(ctx, 10, time.Minute)
	if err != nil || len(voids) != 1 || voids[0].Void.ID != vc.VoidID || voids[0].ChargeID != "ch_lease-void" {
		t.Fatalf("due voids: %+v, %v", voids, err)
	}
	if voids, err := s.ClaimDueVoids(ctx, 10, time.Minute); err != nil || len(voids) != 0 {
		t.Fatalf("a leased void was leased again: %+v, %v", voids, err)
	}

	lapsed := authorizedOrder(t, s, "lease-hold", time.Now().Add(-time.Hour).Truncate(time.Microsecond))
	holds, err := s.ClaimDueHolds(ctx, 10, time.Minute)
	if err != nil || len(holds) != 1 || holds[0].Order.ID != lapsed.ID || holds[0].Attempt.ID != lapsed.CurrentAttempt {
		t.Fatalf("due holds: %+v, %v; want only %s", holds, err, lapsed.ID)
	}
	if holds, err := s.ClaimDueHolds(ctx, 10, time.Minute); err != nil || len(holds) != 0 {
		t.Fatalf("a leased hold was leased again: %+v, %v", holds, err)
	}

	if ok, err := s.ExpireHold(ctx, captured.MerchantID, captured.ID, captured.CurrentAttempt, "test", "lapsed"); err != nil || ok {
		t.Fatalf("a hold with a capture in flight expired: %v, %v", ok, err)
	}
	if ok, err := s.ExpireHold(ctx, lapsed.MerchantID, lapsed.ID, lapsed.CurrentAttempt, "test", "lapsed"); err != nil || !ok {
		t.Fatalf("expire: %v, %v", ok, err)
	}
	if ok, err := s.ExpireHold(ctx, lapsed.MerchantID, lapsed.ID, lapsed.CurrentAttempt, "test", "lapsed"); err != nil || ok {
		t.Fatalf("a second expiry: %v, %v; want the guard to refuse it", ok, err)
	}
	got, err := s.Order(ctx, order.ForMerchant(lapsed.MerchantID), lapsed.ID)
	if err != nil || got.State != order.StateExpired {
		t.Fatalf("expired order: %+v, %v", got, err)
	}
	evs, _, err := s.History(ctx, lapsed.MerchantID, lapsed.ID)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].To != order.StateExpired {
		t.Fatalf("history: %+v, %v; want it to end EXPIRED", evs, err)
	}
}
