package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// chargingOrder makes a CHARGING order and returns it with its attempt id.
func chargingOrder(t *testing.T, s *postgres.Store, ref string) (order.Order, string) {
	t.Helper()
	ctx := context.Background()
	o, err := s.CreateOrder(ctx, newOrder(ref))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, claimOf(o, "req-"+ref))
	if err != nil || !c.Claimed {
		t.Fatalf("claim %s: %v %+v", ref, err, c)
	}
	return c.Order, c.Attempt.ID
}

func testSettleMany(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)

	paid, paidAtt := chargingOrder(t, s, "ref-paid")
	failed, failedAtt := chargingOrder(t, s, "ref-failed")
	recheck, recheckAtt := chargingOrder(t, s, "ref-recheck")
	review, reviewAtt := chargingOrder(t, s, "ref-review")
	wrong, _ := chargingOrder(t, s, "ref-wrong-attempt")
	done, doneAtt := chargingOrder(t, s, "ref-already-paid")
	if _, ok, err := s.Settle(ctx, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: done.ID, AttemptID: doneAtt, Event: order.EventSucceed,
		To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_first"}, Actor: "test"}); !ok || err != nil {
		t.Fatalf("settle %s: %v %v", done.ID, ok, err)
	}

	longErr := strings.Repeat("x", 2000)
	sts := []order.Settlement{
		{MerchantID: order.DefaultMerchant, OrderID: paid.ID, AttemptID: paidAtt, Event: order.EventSucceed, To: order.StatePaid, Checked: true,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, Actor: "reconciler", Reason: "found"},
		{MerchantID: order.DefaultMerchant, OrderID: failed.ID, AttemptID: failedAtt, Event: order.EventFail, To: order.StatePending, Checked: true,
			Result: order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "card_declined"}, Actor: "reconciler"},
		{MerchantID: order.DefaultMerchant, OrderID: recheck.ID, AttemptID: recheckAtt, RecheckIn: time.Hour, Checked: true, LastError: longErr,
			Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "reconciler"},
		{MerchantID: order.DefaultMerchant, OrderID: review.ID, AttemptID: reviewAtt, Event: order.EventEscalate, To: order.StateNeedsReview, Checked: true,
			LastError: "still unknown", Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "reconciler"},
		{MerchantID: order.DefaultMerchant, OrderID: wrong.ID, AttemptID: order.NewID(), Event: order.EventSucceed, To: order.StatePaid,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_wrong"}, Actor: "reconciler"},
		{MerchantID: order.DefaultMerchant, OrderID: done.ID, AttemptID: doneAtt, Event: order.EventFail, To: order.StatePending,
			Result: order.Result{Outcome: order.OutcomeDeclined}, Actor: "reconciler"},
		{MerchantID: order.DefaultMerchant, OrderID: order.NewID(), AttemptID: order.NewID(), Event: order.EventSucceed, To: order.StatePaid,
			Result: order.Result{Outcome: order.OutcomeSucceeded}, Actor: "reconciler"},
	}
	_, applied, err := s.SettleMany(ctx, sts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, true, false, false, false}; fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("applied %v, want %v", applied, want)
	}

	get := func(id string) order.Order {
		o, err := s.Order(ctx, order.AnyMerchant, id)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	attempt := func(id string) order.Attempt {
		a, err := s.Attempt(ctx, order.DefaultMerchant, id)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if o, a := get(paid.ID), attempt(paidAtt); o.State != order.StatePaid || !o.ReconcileAt.IsZero() ||
		o.ReconcileCount != 1 || a.Outcome != order.OutcomeSucceeded || a.GatewayChargeID != "ch_1" {
		t.Errorf("succeed: order %+v, attempt %+v", o, a)
	}
	if o, a := get(failed.ID), attempt(failedAtt); o.State != order.StatePending || !o.ReconcileAt.IsZero() ||
		a.Outcome != order.OutcomeDeclined || a.DeclineCode != "card_declined" {
		t.Errorf("fail: order %+v, attempt %+v", o, a)
	}
	o := get(recheck.ID)
	if wait := time.Until(o.ReconcileAt); o.State != order.StateCharging || o.ReconcileCount != 1 ||
		wait < 50*time.Minute || wait > 70*time.Minute || len(o.LastError) != 1000 || !o.UpdatedAt.Equal(recheck.UpdatedAt) {
		t.Errorf("recheck: order %+v (next check in %s, last error of %d bytes), want CHARGING checked once in an hour",
			o, wait, len(o.LastError))
	}
	if a := attempt(recheckAtt); a.Outcome != order.OutcomeUnknown {
		t.Errorf("recheck: attempt %+v", a)
	}
	if o, a := get(review.ID), attempt(reviewAtt); o.State != order.StateNeedsReview || o.LastError != "still unknown" ||
		a.Outcome != order.OutcomeUnknown {
		t.Errorf("escalate: order %+v, attempt %+v", o, a)
	}
	// Refused rows are untouched.
	if o := get(wrong.ID); o.State != order.StateCharging || o.ReconcileCount != 0 || !o.UpdatedAt.Equal(wrong.UpdatedAt) {
		t.Errorf("wrong attempt: order %+v, want it untouched", o)
	}
	if a := attempt(wrong.CurrentAttempt); a.Outcome != "" {
		t.Errorf("wrong attempt: its current attempt became %+v", a)
	}
	if o, a := get(done.ID), attempt(doneAtt); o.State != order.StatePaid || a.Outcome != order.OutcomeSucceeded ||
		a.GatewayChargeID != "ch_first" {
		t.Errorf("already paid: order %+v, attempt %+v", o, a)
	}

	rows, err := pool.Query(ctx, `SELECT order_id::text, event, from_state, to_state, attempt_id::text FROM order_events
		WHERE event NOT IN ('create', 'charge') ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	events := map[string][]string{}
	for rows.Next() {
		var id, ev, from, to, att string
		if err := rows.Scan(&id, &ev, &from, &to, &att); err != nil {
			t.Fatal(err)
		}
		events[id] = append(events[id], fmt.Sprintf("%s %s→%s %s", ev, from, to, att))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		paid.ID:   {"succeed CHARGING→PAID " + paidAtt},
		failed.ID: {"fail CHARGING→PENDING " + failedAtt},
		review.ID: {"escalate CHARGING→NEEDS_REVIEW " + reviewAtt},
		done.ID:   {"succeed CHARGING→PAID " + doneAtt}, // Settle's, before SettleMany
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events %v\nwant %v", events, want)
	}

	// An order twice in one call is refused as a whole.
	o2, att2 := chargingOrder(t, s, "ref-twice")
	twice := order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o2.ID, AttemptID: att2, RecheckIn: time.Hour, Checked: true,
		Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "reconciler"}
	if _, _, err := s.SettleMany(ctx, []order.Settlement{twice, twice}); err == nil {
		t.Error("an order twice in one call: no error")
	}
	if o := get(o2.ID); o.ReconcileCount != 0 {
		t.Errorf("an order twice in one call: order %+v, want it untouched", o)
	}
}

// testSettleManyOverlapping: two calls that settle the same orders, listed
// in opposite orders, wait for each other rather than deadlock.
func testSettleManyOverlapping(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	const n, rounds = 40, 20
	var sts []order.Settlement
	for i := range n {
		o, att := chargingOrder(t, s, fmt.Sprintf("ref-overlap-%d", i))
		sts = append(sts, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o.ID, AttemptID: att, RecheckIn: time.Hour, Checked: true,
			Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "reconciler"})
	}
	reversed := make([]order.Settlement, n)
	for i, st := range sts {
		reversed[n-1-i] = st
	}
	var wg sync.WaitGroup
	for _, batch := range [][]order.Settlement{sts, reversed} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if _, _, err := s.SettleMany(ctx, batch); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var checks int
	if err := pool.QueryRow(ctx, `SELECT sum(reconcile_count) FROM orders`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if checks != 2*rounds*n {
		t.Errorf("%d checks counted, want %d", checks, 2*rounds*n)
	}
	if db.citus {
		// There a deadlock would be counted on a worker, whose statistics
		// this test does not read; the checks counted above still show
		// every settlement applied once.
		return
	}
	// SettleMany retries a deadlock, so count them in the statistics, which
	// a backend is sure to report only when it exits.
	pool.Reset()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var others int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", others)
		}
	}
	var deadlocks int
	if err := pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocks); err != nil {
		t.Fatal(err)
	}
	if deadlocks != 0 {
		t.Errorf("%d deadlocks", deadlocks)
	}
}

// testSettleManyWaitingForSettle: a call that waits for another settle of
// its orders checks its guard on what that settle committed.
func testSettleManyWaitingForSettle(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	paid, paidAtt := chargingOrder(t, s, "ref-wait-paid")
	rechecked, recheckedAtt := chargingOrder(t, s, "ref-wait-recheck")
	// Hold both rows in settles that have not committed yet: one pays its
	// order, the other counts a check and leaves it CHARGING.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE orders SET state = 'PAID', reconcile_at = NULL WHERE id = $1`, paid.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET reconcile_count = reconcile_count + 1 WHERE id = $1`, rechecked.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		applied []bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, applied, err := s.SettleMany(ctx, []order.Settlement{
			{MerchantID: order.DefaultMerchant, OrderID: paid.ID, AttemptID: paidAtt, Event: order.EventFail, To: order.StatePending, Checked: true,
				Result: order.Result{Outcome: order.OutcomeDeclined}, Actor: "reconciler"},
			{MerchantID: order.DefaultMerchant, OrderID: rechecked.ID, AttemptID: recheckedAtt, RecheckIn: time.Hour, Checked: true,
				Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "reconciler"},
		})
		done <- result{applied, err}
	}()
	waitForLockWaiters(t, pool, 1) // the call is waiting for the rows
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || fmt.Sprint(res.applied) != "[false true]" {
		t.Fatalf("applied %v, %v; want [false true]", res.applied, res.err)
	}
	var state string
	var checks, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT state FROM orders WHERE id = $1), (SELECT reconcile_count FROM orders WHERE id = $2),
		(SELECT count(*) FROM order_events WHERE event = 'fail')`, paid.ID, rechecked.ID).Scan(&state, &checks, &events); err != nil {
		t.Fatal(err)
	}
	if state != "PAID" || checks != 2 || events != 0 {
		t.Fatalf("paid order %s, rechecked order checked %d times, %d fail events; want PAID, 2, 0", state, checks, events)
	}
}

// statementCounter counts the settle statements a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	// settles.sql, or on Citus the call that does its work.
	if strings.Contains(d.SQL, "UPDATE charge_attempts") || strings.Contains(d.SQL, "settle_settle_orders(") {
		c.n.Add(1)
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// groupedSettles runs one Settle per settlement, concurrently, while another
// transaction holds the first order's row lock: the first call leads a
// statement that waits for the lock, and the others queue behind it. It
// returns each call's results and how many settle statements were sent.
func groupedSettles(t *testing.T, s *postgres.Store, pool *pgxpool.Pool, counter *statementCounter, sts []order.Settlement) ([]order.Order, []bool, []error, int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Named by its merchant: on Citus a lock is taken on one shard only.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM orders WHERE merchant_id = $1 AND id = $2 FOR UPDATE`,
		sts[0].MerchantID, sts[0].OrderID); err != nil {
		t.Fatal(err)
	}
	before := counter.n.Load()
	var (
		wg      sync.WaitGroup
		orders  = make([]order.Order, len(sts))
		applied = make([]bool, len(sts))
		errs    = make([]error, len(sts))
	)
	settle := func(i int) {
		defer wg.Done()
		orders[i], applied[i], errs[i] = s.Settle(ctx, sts[i])
	}
	wg.Add(len(sts))
	go settle(0)
	// The leader is waiting for the lock once its backend is.
	waitForLockWaiters(t, pool, 1)
	for i := 1; i < len(sts); i++ {
		go settle(i)
	}
	// Let the others queue; any that come late only make more statements,
	// which the callers' assertions allow for.
	time.Sleep(200 * time.Millisecond)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return orders, applied, errs, counter.n.Load() - before
}

func countingStore(t *testing.T) (*postgres.Store, *pgxpool.Pool, *statementCounter) {
	counter := &statementCounter{}
	pool := tracedPool(t, counter, 16)
	return postgres.NewStore(pool), pool, counter
}

// testSettleGroups: concurrent settles share statements, and each caller
// gets its own order back.
func testSettleGroups(t *testing.T, db storeDB) {
	s, pool, counter := countingStore(t)
	const n = 40
	var sts []order.Settlement
	for i := range n {
		o, att := chargingOrder(t, s, fmt.Sprintf("ref-group-%d", i))
		sts = append(sts, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o.ID, AttemptID: att, Event: order.EventSucceed, To: order.StatePaid,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: fmt.Sprintf("ch_%d", i)}, Actor: "api"})
	}
	orders, applied, errs, statements := groupedSettles(t, s, pool, counter, sts)
	for i := range sts {
		if errs[i] != nil || !applied[i] || orders[i].ID != sts[i].OrderID || orders[i].State != order.StatePaid {
			t.Errorf("settle %d: %v, applied %v, order %s %s; want its own order PAID", i, errs[i], applied[i], orders[i].ID, orders[i].State)
		}
	}
	if statements > 3 {
		t.Errorf("%d orders settled with %d statements, want them to share (at most 3)", n, statements)
	}
	var events int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM order_events WHERE event = 'succeed'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != n {
		t.Errorf("%d succeed events, want %d", events, n)
	}
}

// testSettleGroupPoisoned: a settlement that makes its group's statement
// fail fails alone; the others of its group are settled.
func testSettleGroupPoisoned(t *testing.T, db storeDB) {
	s, pool, counter := countingStore(t)
	var sts []order.Settlement
	for i := range 5 {
		o, att := chargingOrder(t, s, fmt.Sprintf("ref-poison-%d", i))
		sts = append(sts, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o.ID, AttemptID: att, Event: order.EventSucceed, To: order.StatePaid,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_ok"}, Actor: "api"})
	}
	sts[3].AttemptID = "not-a-uuid"
	_, applied, errs, _ := groupedSettles(t, s, pool, counter, sts)
	for i := range sts {
		if i == 3 {
			if errs[i] == nil {
				t.Errorf("settle with a malformed attempt id: no error")
			}
			continue
		}
		if errs[i] != nil || !applied[i] {
			t.Errorf("settle %d: %v, applied %v; want it settled despite its group's bad settlement", i, errs[i], applied[i])
		}
	}
}

// testSettleTruncatesToValidUTF8: a long error text cut in the middle of a
// character, or invalid UTF-8 from a gateway, must not fail the settle.
func testSettleTruncatesToValidUTF8(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o, att := chargingOrder(t, s, "ref-utf8")
	_, ok, err := s.Settle(ctx, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o.ID, AttemptID: att, RecheckIn: time.Minute,
		LastError: "x" + strings.Repeat("€", 600) + "\xff", Result: order.Result{Outcome: order.OutcomeUnknown,
			DeclineCode: strings.Repeat("é", 200)}, Actor: "api"})
	if err != nil || !ok {
		t.Fatalf("settle: %v, applied %v", err, ok)
	}
	got, err := s.Order(ctx, order.AnyMerchant, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(got.LastError) || len(got.LastError) > 1000 || !strings.HasPrefix(got.LastError, "x€€") {
		t.Errorf("last error %q (%d bytes), want valid UTF-8 within 1000 bytes", got.LastError, len(got.LastError))
	}
}

// waitForLockWaiters waits until n backends of the test's database are
// waiting for a lock: a call started in a goroutine has reached the rows
// another transaction holds, however long a loaded machine took to get it
// there.
func waitForLockWaiters(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	// On Citus the statement waits on the worker that holds the order's
	// shard, which citus_stat_activity shows from the coordinator.
	activity := "pg_stat_activity"
	var citus bool
	if err := pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		t.Fatal(err)
	}
	if citus {
		activity = "citus_stat_activity"
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+activity+`
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends waiting for a lock after 30s, want %d", waiting, n)
		}
	}
}

// testSettleLeaseGuard: a reconciler's settlement applies only under the
// lease its verdict was formed in. A gateway event recorded during the
// lookup (Adyen's CAPTURE_FAILED while the lookup replayed the capture)
// wakes the order, and the lookup's settle to PAID then loses: the order
// stays CHARGING, due at once, for a lookup that reads the event. So does a
// settle under a lease another reconciler has since taken over.
func testSettleLeaseGuard(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	paid := func(d order.Due) order.Settlement {
		return order.Settlement{MerchantID: d.Order.MerchantID, OrderID: d.Order.ID, AttemptID: d.Attempt.ID,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "psp"}, Event: order.EventSucceed,
			To: order.StatePaid, Actor: order.ActorReconciler, Lease: d.Order.ReconcileAt}
	}
	lease := func(id string) order.Due {
		t.Helper()
		d, ok, err := s.ClaimOrder(ctx, id, time.Minute)
		if err != nil || !ok || d.Order.ReconcileAt.IsZero() {
			t.Fatalf("lease %s: %+v, %v, %v", id, d, ok, err)
		}
		return d
	}

	o, a := chargingOrder(t, s, "lease-woken")
	d := lease(o.ID)
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "lease-cf", Type: "CAPTURE_FAILED", ObjectID: "PSPL",
		AttemptID: a, Outcome: order.OutcomeDeclined, DeclineCode: "capture_failed"}, order.EventWoken)
	if got, ok, err := s.Settle(ctx, paid(d)); err != nil || ok {
		t.Fatalf("settle under a lease an event woke: %+v, %v, %v; want lost", got, ok, err)
	}
	if got, err := s.Order(ctx, order.ForMerchant(o.MerchantID), o.ID); err != nil || got.State != order.StateCharging {
		t.Fatalf("order after the lost settle: %+v, %v; want CHARGING", got, err)
	}
	if !due(t, pool, "orders", o.MerchantID, o.ID) {
		t.Error("order not due after the event woke it and the settle lost")
	}
	// A settle with no move (a recheck) keeps the wake too.
	d2 := lease(o.ID)
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "lease-cf-2", Type: "CAPTURE_FAILED", ObjectID: "PSPL",
		AttemptID: a, Outcome: order.OutcomeDeclined, DeclineCode: "capture_failed"}, order.EventWoken)
	recheck := order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: a, RecheckIn: time.Hour,
		Checked: true, Actor: order.ActorReconciler, Lease: d2.Order.ReconcileAt}
	if _, ok, err := s.Settle(ctx, recheck); err != nil || ok {
		t.Fatalf("recheck under a lease an event woke: %v, %v; want lost", ok, err)
	}
	if !due(t, pool, "orders", o.MerchantID, o.ID) {
		t.Error("the wake was lost to a recheck formed before it")
	}
	// The next lease's verdict settles.
	if got, ok, err := s.Settle(ctx, paid(lease(o.ID))); err != nil || !ok || got.State != order.StatePaid {
		t.Fatalf("settle under a fresh lease: %+v, %v, %v; want PAID", got, ok, err)
	}

	// A lease taken over by another reconciler: the first one's settle loses.
	o2, _ := chargingOrder(t, s, "lease-taken-over")
	first := lease(o2.ID)
	second := lease(o2.ID)
	if _, ok, err := s.Settle(ctx, paid(first)); err != nil || ok {
		t.Fatalf("settle under a lease taken over: %v, %v; want lost", ok, err)
	}
	if _, ok, err := s.Settle(ctx, paid(second)); err != nil || !ok {
		t.Fatalf("settle under the current lease: %v, %v; want applied", ok, err)
	}

	// Grouped: one settlement's stale lease fails only its own row.
	o3, _ := chargingOrder(t, s, "lease-group-stale")
	o4, _ := chargingOrder(t, s, "lease-group-fresh")
	stale, fresh := lease(o3.ID), lease(o4.ID)
	lease(o3.ID)
	_, applied, err := s.SettleMany(ctx, []order.Settlement{paid(stale), paid(fresh)})
	if err != nil || len(applied) != 2 || applied[0] || !applied[1] {
		t.Fatalf("grouped settle with one stale lease: %v, %v; want [false true]", applied, err)
	}
}
