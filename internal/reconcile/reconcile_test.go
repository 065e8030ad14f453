package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type fixture struct {
	pool    *pgxpool.Pool
	store   *postgres.Store
	sim     *sim.Sim
	gw      *refpsp.Client
	mu      sync.Mutex
	lookups map[string]int // reference → lookups the simulator answered
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := postgrestest.Pool(t)
	f := &fixture{pool: pool, store: postgres.NewStore(pool), sim: sim.New(sim.Options{}), lookups: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			f.mu.Lock()
			f.lookups[r.URL.Query().Get("reference")]++
			f.mu.Unlock()
		}
		f.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	var err error
	if f.gw, err = refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim", Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) reconciler(t *testing.T, gw order.Gateway, cfg reconcile.Config) *reconcile.Reconciler {
	t.Helper()
	return f.reconcilerOn(t, f.store, gw, cfg)
}

// reconcilerOn is reconciler on a store that wraps the fixture's.
func (f *fixture) reconcilerOn(t *testing.T, store reconcile.Store, gw order.Gateway, cfg reconcile.Config) *reconcile.Reconciler {
	t.Helper()
	if cfg.Schedule == nil {
		cfg.Schedule = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	}
	if cfg.NoShowHorizon == 0 {
		cfg.NoShowHorizon = time.Hour
	}
	cfg.BatchSize, cfg.Concurrency, cfg.PollInterval, cfg.LookupTimeout = 50, 4, 10*time.Millisecond, time.Second
	r, err := reconcile.New(store, map[string]order.Gateway{"sim": gw}, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// charging makes a CHARGING order whose attempt is due now, as a crash
// after the claim leaves it. With charge, the simulator charges the attempt
// (an answer that was lost); the token decides how.
func (f *fixture) charging(t *testing.T, token string, charge bool) (orderID, attemptID string) {
	t.Helper()
	ctx := context.Background()
	o, err := f.store.CreateOrder(ctx, order.Order{ID: order.NewID(), MerchantID: order.DefaultMerchant,
		MerchantReference: "ref-" + order.NewID(), Amount: order.Money{Currency: "GBP", AmountMinor: 700},
		PaymentMethod: token, Gateway: "sim", State: order.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.store.Claim(ctx, order.Claim{MerchantID: o.MerchantID, OrderID: o.ID, RequestID: "req-" + o.ID,
		AttemptID: order.NewID(), From: order.StatePending, To: order.StateCharging, Event: order.EventCharge, Actor: "test"})
	if err != nil || !c.Claimed {
		t.Fatalf("claim: %v %+v", err, c)
	}
	if charge {
		_, _ = f.gw.Charge(ctx, order.ChargeRequest{AttemptID: c.Attempt.ID, OrderID: o.ID, MerchantReference: o.MerchantReference,
			Amount: o.Amount, PaymentMethod: token})
	}
	return o.ID, c.Attempt.ID
}

func (f *fixture) order(t *testing.T, id string) order.Order {
	t.Helper()
	o, err := f.store.Order(context.Background(), order.AnyMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *fixture) attempt(t *testing.T, id string) order.Attempt {
	t.Helper()
	a, err := f.store.Attempt(context.Background(), order.DefaultMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// drain runs the reconciler until the order leaves CHARGING.
func drain(t *testing.T, f *fixture, r *reconcile.Reconciler, id string) order.Order {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		o := f.order(t, id)
		if o.State != order.StateCharging {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s still CHARGING", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFoundSucceededIsPaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, att := f.charging(t, "tok_ok", true)
	o := drain(t, f, f.reconciler(t, f.gw, reconcile.Config{}), id)
	a := f.attempt(t, att)
	if o.State != order.StatePaid || a.Outcome != order.OutcomeSucceeded || a.GatewayChargeID == "" {
		t.Fatalf("order %s, attempt %+v; want PAID with the gateway's charge id", o.State, a)
	}
}

func TestFoundDeclinedIsPending(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, att := f.charging(t, "tok_decline", true)
	o := drain(t, f, f.reconciler(t, f.gw, reconcile.Config{}), id)
	if a := f.attempt(t, att); o.State != order.StatePending || a.Outcome != order.OutcomeDeclined {
		t.Fatalf("order %s, attempt outcome %s; want PENDING, declined", o.State, a.Outcome)
	}
}

func TestNotFoundWaitsForTheHorizon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, att := f.charging(t, "tok_ok", false)
	// The first check and the look at its next one must come within half
	// the horizon of the charge: long enough for a loaded machine.
	horizon := 3 * time.Second
	r := f.reconciler(t, f.gw, reconcile.Config{NoShowHorizon: horizon, Schedule: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}})
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := f.order(t, id)
	if o.State != order.StateCharging {
		t.Fatalf("not found before the horizon: %s, want CHARGING (the request may still arrive)", o.State)
	}
	if wait := time.Until(o.ReconcileAt); wait < horizon/2 {
		t.Fatalf("next check in %s; want no sooner than the horizon can settle it", wait)
	}
	// Within the horizon the charge request arrives after all: the reconciler must see it.
	_, _ = f.gw.Charge(context.Background(), order.ChargeRequest{AttemptID: att, OrderID: id, MerchantReference: o.MerchantReference,
		Amount: o.Amount, PaymentMethod: "tok_ok"})
	if o := drain(t, f, r, id); o.State != order.StatePaid {
		t.Fatalf("late charge: %s, want PAID", o.State)
	}

	// Past the horizon, not found means not charged.
	id2, att2 := f.charging(t, "tok_ok", false)
	time.Sleep(horizon)
	o2 := drain(t, f, r, id2)
	if a := f.attempt(t, att2); o2.State != order.StatePending || a.Outcome != order.OutcomeNotFound {
		t.Fatalf("after the horizon: %s / %s, want PENDING / not_found", o2.State, a.Outcome)
	}
}

func TestGatewayErrorsBackOffThenNeedReview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A gateway that cannot be reached at all.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	dead, err := refpsp.New(refpsp.Config{BaseURL: "http://" + addr, APIKey: "sk_sim", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := f.charging(t, "tok_ok", true) // charged: a timer must never turn it into a failure
	schedule := []time.Duration{time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	r := f.reconciler(t, dead, reconcile.Config{Schedule: schedule})
	var seen []int
	for i := 0; ; i++ {
		o := f.order(t, id)
		if o.State != order.StateCharging {
			if o.State != order.StateNeedsReview || o.LastError == "" {
				t.Fatalf("after exhausting the schedule: %s (last error %q), want NEEDS_REVIEW with the error", o.State, o.LastError)
			}
			break
		}
		if len(seen) == 0 || seen[len(seen)-1] != o.ReconcileCount {
			seen = append(seen, o.ReconcileCount)
		}
		if i > 2000 {
			t.Fatal("never escalated")
		}
		_, _ = r.RunOnce(context.Background()) // racing the settle; its errors are not the point
		time.Sleep(2 * time.Millisecond)
	}
	if fmt.Sprint(seen) != "[0 1 2 3]" {
		t.Fatalf("checks counted %v, want one per step of the schedule", seen)
	}
}

func TestTwoReconcilersSettleEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 60
	ids := map[string]string{}
	for range n {
		id, att := f.charging(t, "tok_ok", true)
		ids[id] = att
	}
	var wg sync.WaitGroup
	for range 2 {
		r := f.reconciler(t, f.gw, reconcile.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := r.RunOnce(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for id, att := range ids {
		if o := f.order(t, id); o.State != order.StatePaid {
			t.Fatalf("order %s is %s, want PAID", id, o.State)
		}
		if f.lookups[att] != 1 {
			t.Fatalf("attempt %s looked up %d times, want 1", att, f.lookups[att])
		}
	}
	var events int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM order_events WHERE event = 'succeed'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != n {
		t.Fatalf("%d succeed events for %d orders", events, n)
	}
}

// slowStore holds every settle until hold returns, as a slow commit would.
type slowStore struct {
	*postgres.Store
	hold func()
}

func (s *slowStore) Settle(ctx context.Context, st order.Settlement) (order.Order, bool, error) {
	s.hold()
	return s.Store.Settle(ctx, st)
}

// TestSettlesHoldNoLookupSlot: a lookup's slot is free once the gateway has
// answered, so slow settles do not hold the next lookups back (and the
// settles of a backlog wait together, to share the store's statements).
func TestSettlesHoldNoLookupSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const paid, declined, unseen = 20, 10, 10
	want := map[string]order.State{}
	for range paid {
		id, _ := f.charging(t, "tok_ok", true)
		want[id] = order.StatePaid
	}
	for range declined {
		id, _ := f.charging(t, "tok_decline", true)
		want[id] = order.StatePending
	}
	for range unseen {
		id, _ := f.charging(t, "tok_ok", false) // not found, within the horizon: check again
		want[id] = order.StateCharging
	}
	n := len(want)
	var timedOut atomic.Bool
	store := &slowStore{Store: f.store, hold: func() {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			f.mu.Lock()
			looked := len(f.lookups)
			f.mu.Unlock()
			if looked == n {
				return
			}
			if time.Now().After(deadline) {
				timedOut.Store(true)
				return
			}
		}
	}}
	var (
		mu      sync.Mutex
		results = map[string]int{}
	)
	r := f.reconcilerOn(t, store, f.gw, reconcile.Config{OnCheck: func(res string) {
		mu.Lock()
		results[res]++
		mu.Unlock()
	}})
	if got, err := r.RunOnce(context.Background()); err != nil || got != n {
		t.Fatalf("RunOnce: %d, %v; want %d orders", got, err, n)
	}
	if timedOut.Load() {
		t.Errorf("settles waiting for every lookup held the lookups back: lookups came to a stop")
	}
	if fmt.Sprint(results) != fmt.Sprint(map[string]int{"succeed": paid, "fail": declined, "recheck": unseen}) {
		t.Errorf("checks came to %v", results)
	}
	for id, state := range want {
		// A "not found" while the request may still arrive is not a
		// failed check: it uses up none of the schedule.
		o, checks := f.order(t, id), 1
		if state == order.StateCharging {
			checks = 0
		}
		if o.State != state || o.ReconcileCount != checks {
			t.Errorf("order %s is %s checked %d times, want %s checked %d times", id, o.State, o.ReconcileCount, state, checks)
		}
	}
}

// gatedGateway holds the lookups of one attempt until gate is closed; the
// refpsp client under it does the rest (refunds included).
type gatedGateway struct {
	*refpsp.Client
	attemptID string
	gate      chan struct{}
}

func (g *gatedGateway) Lookup(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	if req.AttemptID == g.attemptID {
		<-g.gate
	}
	return g.Client.Lookup(ctx, req)
}

// TestSlowLookupHoldsBackNoOtherOrder: grouping settlements does not make
// one order wait for another's lookup.
func TestSlowLookupHoldsBackNoOtherOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	slow, slowAtt := f.charging(t, "tok_ok", true)
	var others []string
	for range 5 {
		id, _ := f.charging(t, "tok_ok", true)
		others = append(others, id)
	}
	gw := &gatedGateway{Client: f.gw, attemptID: slowAtt, gate: make(chan struct{})}
	r := f.reconciler(t, gw, reconcile.Config{})
	done := make(chan error, 1)
	go func() {
		_, err := r.RunOnce(context.Background())
		done <- err
	}()
	for _, id := range others {
		for deadline := time.Now().Add(5 * time.Second); f.order(t, id).State != order.StatePaid; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(gw.gate)
				t.Fatalf("order %s not settled while another order's lookup is slow", id)
			}
		}
	}
	if o := f.order(t, slow); o.State != order.StateCharging {
		t.Fatalf("the slow order is %s before its lookup answered", o.State)
	}
	close(gw.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if o := f.order(t, slow); o.State != order.StatePaid {
		t.Fatalf("the slow order is %s, want PAID", o.State)
	}
}

// TestOperatorChecksUseUpNoSchedule: an operator's ReconcileOrder (CheckNow)
// asks the gateway but is not one of the schedule's checks. Found as an
// operator would: 13 calls within a second sent an order whose charge was
// still in flight to NEEDS_REVIEW. Neither "not found yet" nor a gateway
// that cannot answer, asked any number of times, may do that.
func TestOperatorChecksUseUpNoSchedule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	dead, err := refpsp.New(refpsp.Config{BaseURL: "http://" + addr, APIKey: "sk_sim", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	inFlight, _ := f.charging(t, "tok_ok", false) // not found yet: the request may still arrive
	unreachable, _ := f.charging(t, "tok_ok", true)
	for _, c := range []struct {
		id string
		gw order.Gateway
	}{{inFlight, f.gw}, {unreachable, dead}} {
		r := f.reconciler(t, c.gw, reconcile.Config{Schedule: []time.Duration{time.Hour, time.Hour, time.Hour}})
		for range 13 {
			if _, ok, err := r.CheckNow(context.Background(), c.id); !ok || err != nil {
				t.Fatalf("CheckNow: %v %v", ok, err)
			}
		}
		if o := f.order(t, c.id); o.State != order.StateCharging || o.ReconcileCount != 0 {
			t.Errorf("after 13 operator checks the order is %s with %d checks counted, want CHARGING with none", o.State, o.ReconcileCount)
		}
	}
}

// settlingGateway settles an attempt as charged, as a late answer to its
// charge would, while the reconciler's lookup of it is in flight.
type settlingGateway struct {
	order.Gateway
	store *postgres.Store
}

func (g *settlingGateway) Lookup(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	st := order.Settlement{MerchantID: order.DefaultMerchant, OrderID: req.OrderID, AttemptID: req.AttemptID,
		Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_late"}, Event: order.EventSucceed,
		To: order.StatePaid, Actor: order.ActorAPI}
	if _, ok, err := g.store.Settle(ctx, st); err != nil || !ok {
		return order.Result{}, fmt.Errorf("the late settle: ok=%v, %w", ok, err)
	}
	return g.Gateway.Lookup(ctx, req)
}

// TestOperatorCheckThatLosesItsSettle: an operator's check (CheckNow)
// whose settle loses to a late answer of the charge reports that it has
// no order to show, so that ReconcileOrder reads the order as the winner
// left it. It used to return an empty order as the checked one.
func TestOperatorCheckThatLosesItsSettle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.charging(t, "tok_ok", true)
	r := f.reconciler(t, &settlingGateway{Gateway: f.gw, store: f.store}, reconcile.Config{})
	o, ok, err := r.CheckNow(context.Background(), id)
	if err != nil || ok {
		t.Fatalf("CheckNow = %+v, %v, %v; want no order (its settle lost)", o, ok, err)
	}
	if o := f.order(t, id); o.State != order.StatePaid {
		t.Fatalf("order is %s, want PAID by the late answer", o.State)
	}
}

// TestReviewRecheckFindsLateCharge: an order in NEEDS_REVIEW is looked up
// again at the review cadence; a charge the gateway shows then moves it to
// PAID with an event by the reconciler, and an order the gateway still has
// no charge for stays in review until the next look.
func TestReviewRecheckFindsLateCharge(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	charged, _ := f.charging(t, "tok_ok", true)
	unseen, _ := f.charging(t, "tok_ok", false)
	recent, _ := f.charging(t, "tok_ok", true)
	for id, since := range map[string]string{charged: "2 hours", unseen: "2 hours", recent: "1 minute"} {
		if _, err := f.pool.Exec(ctx, `UPDATE orders SET state = 'NEEDS_REVIEW', reconcile_at = NULL,
			updated_at = now() - $2::interval WHERE id = $1`, id, since); err != nil {
			t.Fatal(err)
		}
	}
	r := f.reconciler(t, f.gw, reconcile.Config{ReviewCadence: time.Hour})
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if o := f.order(t, charged); o.State != order.StatePaid {
		t.Fatalf("charged order in review is %s, want PAID", o.State)
	}
	events, _, err := f.store.History(ctx, order.DefaultMerchant, charged)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if last.From != order.StateNeedsReview || last.To != order.StatePaid || last.Name != string(order.EventSucceed) || last.Actor != order.ActorReconciler {
		t.Fatalf("last event %+v, want succeed NEEDS_REVIEW → PAID by the reconciler", last)
	}
	if o := f.order(t, unseen); o.State != order.StateNeedsReview || !o.ReconcileAt.After(time.Now().Add(50*time.Minute)) {
		t.Fatalf("order with no charge is %s, next look at %v; want NEEDS_REVIEW, looked at again in an hour", o.State, o.ReconcileAt)
	}
	if o := f.order(t, recent); o.State != order.StateNeedsReview {
		t.Fatalf("order in review for a minute is %s: looked up before its cadence", o.State)
	}
}

// TestWokenCheckUsesUpNoSchedule: a check that a gateway's event asked
// for (Wake) is not one of the schedule's, even when the gateway cannot
// answer it; the schedule's own next check counts again.
func TestWokenCheckUsesUpNoSchedule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	dead, err := refpsp.New(refpsp.Config{BaseURL: "http://" + addr, APIKey: "sk_sim", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := f.charging(t, "tok_ok", true)
	r := f.reconciler(t, dead, reconcile.Config{Schedule: []time.Duration{time.Hour, time.Hour, time.Hour}})
	for i, wake := range []bool{true, false} {
		if _, err := f.pool.Exec(ctx, "UPDATE orders SET reconcile_at = now() WHERE id = $1", id); err != nil {
			t.Fatal(err)
		}
		if wake {
			r.Wake(id)
		}
		if n, _ := r.RunOnce(ctx); n != 1 {
			t.Fatalf("RunOnce checked %d orders, want 1", n)
		}
		if o := f.order(t, id); o.ReconcileCount != i {
			t.Fatalf("after a check (woken %v) %d checks counted, want %d", wake, o.ReconcileCount, i)
		}
	}
}

// wakingGateway records a gateway event about the attempt during its first
// lookup, as a notification that arrives while the lookup is in flight
// would (Adyen's CAPTURE_FAILED while the lookup replays the capture).
type wakingGateway struct {
	order.Gateway
	store   *postgres.Store
	lookups atomic.Int32
}

func (g *wakingGateway) Lookup(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	if g.lookups.Add(1) == 1 {
		r, err := g.store.RecordGatewayEvent(ctx, order.GatewayEvent{Gateway: "sim", ID: "evt_" + req.AttemptID,
			Type: "charge.failed", AttemptID: req.AttemptID})
		if err != nil || r.Result != order.EventWoken {
			return order.Result{}, fmt.Errorf("the event during the lookup: %+v, %w", r, err)
		}
	}
	return g.Gateway.Lookup(ctx, req)
}

// TestEventDuringLookupVoidsItsVerdict: a gateway event recorded while a
// lookup is in flight may say what the lookup did not read, so the
// lookup's settle loses (its lease was moved by the event) and the order
// is looked up again, with the event on record, before it settles.
func TestEventDuringLookupVoidsItsVerdict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, _ := f.charging(t, "tok_ok", true)
	gw := &wakingGateway{Gateway: f.gw, store: f.store}
	r := f.reconciler(t, gw, reconcile.Config{})
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := f.order(t, id); o.State != order.StateCharging || gw.lookups.Load() != 1 {
		t.Fatalf("after the lookup an event overtook: order %s after %d lookups; want CHARGING after 1", o.State, gw.lookups.Load())
	}
	if o := drain(t, f, r, id); o.State != order.StatePaid || gw.lookups.Load() != 2 {
		t.Fatalf("order %s after %d lookups; want PAID after 2", o.State, gw.lookups.Load())
	}
}
