package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
		st := order.RefundSettlementFor(o.MerchantID, a.Refund.OrderID, a.Refund.ID, order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "x"}, time.Minute)
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
		st := order.RefundSettlementFor(paid.MerchantID, d.Refund.OrderID, d.Refund.ID,
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

// testRefundGroup: one grouped refund claim admits each row under its own
// guard (an amount that fits, "what is left", one past what is left, a
// gateway that cannot refund, a request id another row took first, an
// order that does not exist), and one grouped settle applies each row
// under its own (a success, a failure, a settlement naming another order).
func testRefundGroup(t *testing.T, db storeDB) {
	if db.citus {
		t.Skip("Citus claims and settles each refund alone")
	}
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	var os []order.Order
	for i := range 5 {
		o, _ := paidOrder(t, s, fmt.Sprintf("group-%d", i))
		os = append(os, o)
	}
	claim := func(o order.Order, req string, amount int64, gateways ...string) order.RefundClaim {
		c := refundClaimOf(o, req, amount)
		c.Gateways = gateways
		return c
	}
	missing := newOrder("group-missing")
	cs := []order.RefundClaim{
		claim(os[0], "g-0", 300, "sim"),
		claim(os[1], "g-1", 0, "refpsp", "sim"),
		claim(os[2], "g-2", 1251, "sim"),
		claim(os[3], "g-3", 100, "stripe"),
		claim(os[4], "g-0", 100, "sim"), // os[0]'s request id
		claim(missing, "g-5", 100),
	}
	res, errs, err := s.ClaimRefundsGrouped(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		claimed   bool
		refunding int64
		err       error
	}{{true, 300, nil}, {true, 1250, nil}, {false, 0, nil}, {false, 0, nil}, {false, 0, nil}, {false, 0, order.ErrNotFound}} {
		r := res[i]
		if r.Claimed != want.claimed || !errors.Is(errs[i], want.err) || (want.err == nil && r.Order.Refunding != want.refunding) {
			t.Errorf("claim %d: claimed %t, refunding %d, %v; want %t, %d, %v", i, r.Claimed, r.Order.Refunding, errs[i],
				want.claimed, want.refunding, want.err)
		}
	}
	if r := res[4].Refund; r == nil || r.OrderID != os[0].ID {
		t.Errorf("a claim whose request id another row took names %+v, want that row's refund", r)
	}
	if r := res[0].Refund; r == nil || r.State != order.RefundRefunding || r.Amount.AmountMinor != 300 || res[0].ChargeID != "psp_group-0" {
		t.Errorf("claim 0: refund %+v, charge %q", r, res[0].ChargeID)
	}

	ok := order.RefundSettlementFor(os[0].MerchantID, os[0].ID, res[0].Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_0"}, time.Minute)
	failed := order.RefundSettlementFor(os[1].MerchantID, os[1].ID, res[1].Refund.ID,
		order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "x"}, time.Minute)
	other := order.RefundSettlementFor(os[2].MerchantID, os[2].ID, res[0].Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_0"}, time.Minute) // os[0]'s refund
	refunds, applied, err := s.SettleRefundsGrouped(ctx, []order.RefundSettlement{ok, failed, other})
	if err != nil {
		t.Fatal(err)
	}
	if !applied[0] || refunds[0].State != order.RefundSucceeded || !applied[1] || refunds[1].State != order.RefundFailed || applied[2] {
		t.Errorf("settles: applied %v, refunds %s %s", applied, refunds[0].State, refunds[1].State)
	}
	for i, want := range []struct {
		state               order.State
		refunded, refunding int64
	}{{order.MustNext(order.StatePaid, order.EventRefundPartial), 300, 0}, {order.StatePaid, 0, 0}, {order.StatePaid, 0, 0}} {
		o, err := s.Order(ctx, order.ForMerchant(os[i].MerchantID), os[i].ID)
		if err != nil || o.State != want.state || o.Refunded != want.refunded || o.Refunding != want.refunding {
			t.Errorf("order %d: %s, refunded %d, refunding %d, %v; want %s, %d, %d", i, o.State, o.Refunded, o.Refunding, err,
				want.state, want.refunded, want.refunding)
		}
	}
}

// testConcurrentRefundsGrouped: many concurrent refund claims and settles
// of several orders, grouped by the store's batchers while a statement is
// in flight, keep each order's totals: each admits what fits, each refund
// ends as its settle said, and each order's refunded total is what its
// succeeded refunds add up to.
func testConcurrentRefundsGrouped(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	const orders, claims, amount = 6, 8, 200 // 6 of 8 claims of 200 fit in 1250
	var os []order.Order
	for i := range orders {
		o, _ := paidOrder(t, s, fmt.Sprintf("concurrent-%d", i))
		os = append(os, o)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed = map[string][]order.Refund{} // by order id
	)
	for i := range orders * claims {
		wg.Go(func() {
			o := os[i%orders]
			c := refundClaimOf(o, fmt.Sprintf("concurrent-req-%d", i), amount)
			c.Gateways = []string{"sim"}
			r, err := s.ClaimRefund(ctx, c)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Claimed {
				mu.Lock()
				claimed[o.ID] = append(claimed[o.ID], *r.Refund)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every third refund of an order fails; the others succeed.
	want := map[string]order.RefundState{}
	for _, o := range os {
		if n := len(claimed[o.ID]); n != 6 {
			t.Errorf("order %s: %d refunds of %d admitted, want 6", o.MerchantReference, n, amount)
		}
		for k, r := range claimed[o.ID] {
			res := order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_" + r.ID}
			want[r.ID] = order.RefundSucceeded
			if k%3 == 2 {
				res, want[r.ID] = order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "x"}, order.RefundFailed
			}
			wg.Go(func() {
				st := order.RefundSettlementFor(r.MerchantID, r.OrderID, r.ID, res, time.Minute)
				st.Actor = "test"
				_, got, ok, err := s.SettleRefund(ctx, st)
				if err != nil || !ok || got.State != want[r.ID] {
					t.Errorf("settle refund %s: %s, %t, %v; want %s", r.ID, got.State, ok, err, want[r.ID])
				}
			})
		}
	}
	wg.Wait()
	for _, o := range os {
		got, err := s.Order(ctx, order.ForMerchant(o.MerchantID), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		refunds, _, err := s.Refunds(ctx, o.MerchantID, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		var refunded int64
		for _, r := range refunds {
			if r.State != want[r.ID] {
				t.Errorf("refund %s of order %s: %s, want %s", r.ID, o.MerchantReference, r.State, want[r.ID])
			}
			if r.State == order.RefundSucceeded {
				refunded += r.Amount.AmountMinor
			}
		}
		if got.Refunded != refunded || got.Refunded != 4*amount || got.Refunding != 0 ||
			got.State != order.MustNext(order.StatePaid, order.EventRefundPartial) {
			t.Errorf("order %s: %s, refunded %d, refunding %d; want refunded %d (its succeeded refunds), none in flight",
				o.MerchantReference, got.State, got.Refunded, got.Refunding, refunded)
		}
	}
}
