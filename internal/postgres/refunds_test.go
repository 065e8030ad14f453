package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

func refundClaimOf(o order.Order, requestID string, amount int64) order.RefundClaim {
	return order.RefundClaim{MerchantID: o.MerchantID, OrderID: o.ID, RequestID: requestID, RefundID: order.NewID(),
		AmountMinor: amount, Actor: "test", Lease: 15 * time.Second}
}

// testSettleRefundAfterConcurrentClaim: a refund's settle whose statement
// began before another refund of the same amount was claimed, and waited
// for that claim's lock, still releases its own reservation and keeps the
// other's. (The order's version in the settle's snapshot then looked
// already settled; a guard on it skipped the update.)
func testSettleRefundAfterConcurrentClaim(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("refund-race"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE orders SET state = 'PAID' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	a, err := s.ClaimRefund(ctx, refundClaimOf(o, "refund-a", 300))
	if err != nil || !a.Claimed || a.Order.Refunding != 300 {
		t.Fatalf("claim A: %+v, %v", a, err)
	}

	// A second claim of 300 in progress, holding the order's row.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE orders SET refunding_minor = refunding_minor + 300 WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	settled := make(chan error, 1)
	go func() {
		st := order.RefundSettlementFor(o.MerchantID, a.Refund.ID, order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "x"}, time.Minute)
		st.Actor = order.ActorAPI
		_, _, ok, err := s.SettleRefund(ctx, st)
		if err == nil && !ok {
			t.Error("the settle's guard did not hold")
		}
		settled <- err
	}()
	// Let the settle begin (and take its snapshot) and wait for the lock.
	// On Citus the settle waits on the worker that holds the order's
	// shard, which citus_stat_activity shows from the coordinator.
	activity := "pg_stat_activity"
	if db.citus {
		activity = "citus_stat_activity"
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+activity+`
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the settle never waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	got, err := s.Order(ctx, order.ForMerchant(o.MerchantID), o.ID)
	if err != nil || got.Refunding != 300 || got.Refunded != 0 || got.State != order.StatePaid {
		t.Fatalf("order after the settle: refunding %d refunded %d %s, %v; want 300 (the other claim's), 0, PAID",
			got.Refunding, got.Refunded, got.State, err)
	}
}

// testRefundLeaseGuard: a reconciler's refund settle applies only under
// the lease its verdict was formed in, as an order's does
// (testSettleLeaseGuard): REFUND_FAILED recorded while the lookup that read
// the REFUND was under way wakes the refund, and the settle to SUCCEEDED
// loses, for a lookup that reads both.
func testRefundLeaseGuard(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	paid, _ := paidOrder(t, s, "refund-lease")
	rc, err := s.ClaimRefund(ctx, refundClaimOf(paid, "refund-lease", 500))
	if err != nil || !rc.Claimed {
		t.Fatalf("claim refund: %+v, %v", rc, err)
	}
	lease := func() order.DueRefund {
		t.Helper()
		if _, err := pool.Exec(ctx, "UPDATE refunds SET reconcile_at = now() - interval '1 second' WHERE id = $1",
			rc.Refund.ID); err != nil {
			t.Fatal(err)
		}
		due, err := s.ClaimDueRefunds(ctx, 10, time.Minute)
		if err != nil || len(due) != 1 || due[0].Refund.ID != rc.Refund.ID || due[0].Refund.ReconcileAt.IsZero() {
			t.Fatalf("lease the refund: %+v, %v", due, err)
		}
		return due[0]
	}
	succeeded := func(d order.DueRefund) order.RefundSettlement {
		st := order.RefundSettlementFor(paid.MerchantID, d.Refund.ID,
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "PSPR"}, time.Minute)
		st.Actor, st.Lease = order.ActorReconciler, d.Refund.ReconcileAt
		return st
	}

	d := lease()
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "rl-1", Type: "REFUND_FAILED", ObjectID: "PSPR",
		AttemptID: rc.Refund.ID, About: order.EventAboutRefund, Outcome: order.OutcomeDeclined}, order.EventWoken)
	if _, r, ok, err := s.SettleRefund(ctx, succeeded(d)); err != nil || ok {
		t.Fatalf("settle under a lease an event woke: %+v, %v, %v; want lost", r, ok, err)
	}
	if !due(t, pool, "refunds", paid.MerchantID, rc.Refund.ID) {
		t.Error("refund not due after the event woke it and the settle lost")
	}
	if got, err := s.Order(ctx, order.ForMerchant(paid.MerchantID), paid.ID); err != nil || got.Refunded != 0 {
		t.Errorf("order after the lost settle: %+v, %v; want nothing refunded", got, err)
	}
	if _, r, ok, err := s.SettleRefund(ctx, succeeded(lease())); err != nil || !ok || r.State != order.RefundSucceeded {
		t.Fatalf("settle under a fresh lease: %+v, %v, %v; want SUCCEEDED", r, ok, err)
	}
}

// testCaptureLeaseGuard: as testRefundLeaseGuard, for a MANUAL order's
// capture: CAPTURE_FAILED recorded while the lookup that read the CAPTURE
// was under way makes that lookup's settle to SUCCEEDED lose.
func testCaptureLeaseGuard(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	held := authorizedOrder(t, s, "capture-lease", time.Now().Add(time.Hour).Truncate(time.Microsecond))
	cc, err := s.ClaimCapture(ctx, captureClaimOf(held, "capture-lease", 400, false))
	if err != nil || !cc.Claimed {
		t.Fatalf("claim capture: %+v, %v", cc, err)
	}
	lease := func() order.DueCapture {
		t.Helper()
		if _, err := pool.Exec(ctx, "UPDATE captures SET reconcile_at = now() - interval '1 second' WHERE id = $1",
			cc.Capture.ID); err != nil {
			t.Fatal(err)
		}
		due, err := s.ClaimDueCaptures(ctx, 10, time.Minute)
		if err != nil || len(due) != 1 || due[0].Capture.ID != cc.Capture.ID || due[0].Capture.ReconcileAt.IsZero() {
			t.Fatalf("lease the capture: %+v, %v", due, err)
		}
		return due[0]
	}
	succeeded := func(d order.DueCapture) order.CaptureSettlement {
		st := order.CaptureSettlementFor(held.MerchantID, d.Capture.ID,
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "PSPC"}, time.Minute)
		st.Actor, st.Lease = order.ActorReconciler, d.Capture.ReconcileAt
		return st
	}

	d := lease()
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "cl-1", Type: "CAPTURE_FAILED", ObjectID: "PSPC",
		AttemptID: cc.Capture.ID, About: order.EventAboutCapture, Outcome: order.OutcomeDeclined}, order.EventWoken)
	if _, c, ok, err := s.SettleCapture(ctx, succeeded(d)); err != nil || ok {
		t.Fatalf("settle under a lease an event woke: %+v, %v, %v; want lost", c, ok, err)
	}
	if !due(t, pool, "captures", held.MerchantID, cc.Capture.ID) {
		t.Error("capture not due after the event woke it and the settle lost")
	}
	if _, c, ok, err := s.SettleCapture(ctx, succeeded(lease())); err != nil || !ok || c.State != order.CaptureSucceeded {
		t.Fatalf("settle under a fresh lease: %+v, %v, %v; want SUCCEEDED", c, ok, err)
	}
}
