package order_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

const merchant = order.DefaultMerchant

// gatewayTimeout is the gateway deadline of the tests' charge path and
// reconciler. On Citus every statement goes through the coordinator to a
// worker and three servers share the machine's cores, so calls take longer
// there; the tests that wait for a timeout wait in proportion. A test that
// makes many calls at once and waits for no timeout (the 3-D Secure race)
// gives them a deadline of its own, far past what any needs.
var gatewayTimeout = func() time.Duration {
	if postgrestest.Citus() {
		return 2 * time.Second
	}
	return 500 * time.Millisecond
}()

// fixture is the charge path as it runs: order.Service on a fresh database,
// charging through the simulator over HTTP, and a reconciler beside it.
type fixture struct {
	svc   *order.Service
	store *postgres.Store
	pool  *pgxpool.Pool
	sim   *sim.Sim
	// simURL is the simulator's address.
	simURL string
	rec    *reconcile.Reconciler
	logs   logtest.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureTimeout(t, gatewayTimeout)
}

// newFixtureTimeout is newFixture with a gateway timeout of its own, for a
// test that makes many calls at once and waits for no timeout.
func newFixtureTimeout(t *testing.T, timeout time.Duration) *fixture {
	t.Helper()
	f := &fixture{pool: postgrestest.Pool(t), sim: sim.New(sim.Options{ClientTimeout: 2 * timeout})}
	f.store = postgres.NewStore(f.pool)
	hs := httptest.NewServer(f.sim)
	t.Cleanup(hs.Close)
	f.simURL = hs.URL
	gw, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_test", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	gateways := map[string]order.Gateway{"sim": gw}
	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "sim", GatewayTimeout: timeout, Grace: time.Second, FirstRecheck: time.Minute,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	f.rec, err = reconcile.New(f.store, gateways, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: timeout, NoShowHorizon: time.Hour,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newOrder(ref, token string) order.NewOrder {
	return order.NewOrder{MerchantReference: ref, Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token}
}

func (f *fixture) create(t *testing.T, ref, token string) order.Order {
	t.Helper()
	o, err := f.svc.Create(context.Background(), merchant, newOrder(ref, token))
	if err != nil {
		t.Fatalf("Create(%s): %v", ref, err)
	}
	return o
}

func (f *fixture) charge(t *testing.T, orderID, requestID string) (order.Order, *order.Attempt) {
	t.Helper()
	o, a, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: orderID, RequestID: requestID})
	if err != nil {
		t.Fatalf("Charge(%s, %s): %v", orderID, requestID, err)
	}
	return o, a
}

// history returns an order's events and attempts.
func (f *fixture) history(t *testing.T, orderID string) ([]order.Event, []order.Attempt) {
	t.Helper()
	o, err := f.store.Order(context.Background(), order.AnyMerchant, orderID)
	if err != nil {
		t.Fatal(err)
	}
	events, attempts, err := f.store.History(context.Background(), o.MerchantID, orderID)
	if err != nil {
		t.Fatal(err)
	}
	return events, attempts
}

// charges counts the simulator's successful charges for an order's attempts.
func (f *fixture) charges(t *testing.T, orderID string) int {
	t.Helper()
	_, attempts := f.history(t, orderID)
	var refs []string
	for _, a := range attempts {
		refs = append(refs, a.ID)
	}
	return f.sim.Succeeded(refs...)
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantValidation(t *testing.T, err error, field string) {
	t.Helper()
	var v *order.ValidationError
	if !errors.As(err, &v) || v.Field != field {
		t.Fatalf("got %v, want a *ValidationError for %s", err, field)
	}
}

func wantConflict(t *testing.T, err error) *order.ConflictError {
	t.Helper()
	var c *order.ConflictError
	if !errors.As(err, &c) {
		t.Fatalf("got %v, want a *ConflictError", err)
	}
	return c
}

func TestCreateThenGet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	created := f.create(t, "order-1", "tok_ok")
	if created.State != order.StatePending || created.ID == "" || created.Gateway != "sim" || created.MerchantID != merchant {
		t.Fatalf("created %+v", created)
	}
	ctx := context.Background()
	byID, err := f.svc.Get(ctx, order.ForMerchant(merchant), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	byRef, err := f.svc.GetByReference(ctx, merchant, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []order.Order{byID, byRef} {
		if got.ID != created.ID || got.Amount != created.Amount || got.PaymentMethod != "tok_ok" || got.CreatedAt.IsZero() {
			t.Fatalf("got %+v, want %+v", got, created)
		}
	}
}

func TestCreateIdempotentOnReference(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.create(t, "order-idem", "tok_ok")
	if again := f.create(t, "order-idem", "tok_ok"); again.ID != first.ID {
		t.Fatalf("the same Create twice made two orders")
	}
	for name, n := range map[string]order.NewOrder{
		"amount":         {MerchantReference: "order-idem", Amount: order.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok"},
		"currency":       {MerchantReference: "order-idem", Amount: order.Money{Currency: "EUR", AmountMinor: 1250}, PaymentMethod: "tok_ok"},
		"payment_method": {MerchantReference: "order-idem", Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_other"},
	} {
		_, err := f.svc.Create(context.Background(), merchant, n)
		// The message names the field, not the client's reference: error
		// messages are logged.
		if c := wantConflict(t, err); !strings.Contains(c.Msg, "merchant_reference") || strings.Contains(c.Msg, "order-idem") {
			t.Errorf("%s: message %q does not name the field, or echoes the reference", name, c.Msg)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

func TestCreateBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name  string
		edit  func(n *order.NewOrder)
		field string
	}{
		{"zero amount", func(n *order.NewOrder) { n.Amount.AmountMinor = 0 }, "amount.amount_minor"},
		{"negative amount", func(n *order.NewOrder) { n.Amount.AmountMinor = -5 }, "amount.amount_minor"},
		{"absurd amount", func(n *order.NewOrder) { n.Amount.AmountMinor = 1 << 62 }, "amount.amount_minor"},
		{"no currency", func(n *order.NewOrder) { n.Amount.Currency = "" }, "amount.currency"},
		{"currency lower case", func(n *order.NewOrder) { n.Amount.Currency = "gbp" }, "amount.currency"},
		{"currency unknown", func(n *order.NewOrder) { n.Amount.Currency = "ABC" }, "amount.currency"},
		{"empty reference", func(n *order.NewOrder) { n.MerchantReference = "" }, "merchant_reference"},
		{"long reference", func(n *order.NewOrder) { n.MerchantReference = strings.Repeat("r", 256) }, "merchant_reference"},
		{"empty token", func(n *order.NewOrder) { n.PaymentMethod = "" }, "payment_method"},
		{"long token", func(n *order.NewOrder) { n.PaymentMethod = "tok_" + strings.Repeat("x", 300) }, "payment_method"},
		{"control character", func(n *order.NewOrder) { n.MerchantReference = "order\x00bad" }, "merchant_reference"},
		{"newline", func(n *order.NewOrder) { n.PaymentMethod = "tok_ok\n" }, "payment_method"},
		{"card number as token", func(n *order.NewOrder) { n.PaymentMethod = "4242424242424242" }, "payment_method"},
		{"spaced card number in reference", func(n *order.NewOrder) { n.MerchantReference = "order 4111 1111 1111 1111" }, "merchant_reference"},
		{"unknown gateway", func(n *order.NewOrder) { n.Gateway = "paypal" }, "gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newOrder("order-bad", "tok_ok")
			tt.edit(&n)
			_, err := f.svc.Create(context.Background(), merchant, n)
			wantValidation(t, err, tt.field)
			if msg := err.Error(); strings.Contains(msg, "4242424242424242") || strings.Contains(msg, "4111") {
				t.Errorf("error %q echoes the card number", msg)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("bad input left %d orders behind", n)
	}
}

func TestGetNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Get(ctx, order.ForMerchant(merchant), order.NewID()); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("Get of no order: %v, want ErrNotFound", err)
	}
	if _, err := f.svc.GetByReference(ctx, merchant, "nope"); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("GetByReference of no order: %v, want ErrNotFound", err)
	}
	_, err := f.svc.Get(ctx, order.ForMerchant(merchant), "not-a-uuid")
	wantValidation(t, err, "id")
	// Another merchant's order is not found either.
	o := f.create(t, "order-mine", "tok_ok")
	if _, err := f.svc.Get(ctx, order.ForMerchant("another-merchant"), o.ID); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("Get of another merchant's order: %v, want ErrNotFound", err)
	}
}

func TestChargeReplaySameRequestChargesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "order-replay", "tok_ok")
	first, fa := f.charge(t, o.ID, "checkout-replay-1")
	if first.State != order.StatePaid || fa == nil || fa.Outcome != order.OutcomeSucceeded || fa.GatewayChargeID == "" {
		t.Fatalf("first charge: %+v %+v", first, fa)
	}
	again, aa := f.charge(t, o.ID, "checkout-replay-1")
	if aa == nil || aa.ID != fa.ID || again.State != order.StatePaid || aa.GatewayChargeID != fa.GatewayChargeID {
		t.Fatalf("replay returned %+v, want the first attempt's result %+v", aa, fa)
	}
	// A new click on a PAID order charges nothing either.
	if newClick, na := f.charge(t, o.ID, "checkout-replay-2"); newClick.State != order.StatePaid || na != nil {
		t.Fatalf("new request on PAID order: %+v %+v", newClick, na)
	}
	if n := f.charges(t, o.ID); n != 1 {
		t.Fatalf("gateway charged %d times, want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM charge_attempts`); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

func TestChargeConcurrentCallsChargeOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The winner's claim may wait behind the other 49 on a loaded machine:
	// a deadline far past that, since this test waits for no timeout.
	svc := f.service(t, order.Config{GatewayTimeout: 15 * time.Second})
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same_request_id=%v", same), func(t *testing.T) {
			o := f.create(t, fmt.Sprintf("order-50-%v", same), "tok_slow_50")
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := fmt.Sprintf("req-%v-%d", same, i)
					if same {
						req = fmt.Sprintf("req-%v-shared", same)
					}
					if _, _, err := svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: req}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if n := f.charges(t, o.ID); n != 1 {
				t.Fatalf("gateway charged %d times, want 1", n)
			}
			if got, _ := f.charge(t, o.ID, "req-after"); got.State != order.StatePaid {
				t.Fatalf("order ended %s, want PAID", got.State)
			}
		})
	}
}

func TestChargeUnknownOutcomeStaysCharging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, token := range []string{"tok_timeout", "tok_5xx_after_charge", "tok_drop_after_charge"} {
		t.Run(token, func(t *testing.T) {
			o := f.create(t, "order-"+token, token)
			got, a := f.charge(t, o.ID, "checkout-"+token)
			if got.State != order.StateCharging || got.ReconcileAt.IsZero() {
				t.Fatalf("order %s with next check %v, want CHARGING with a next check", got.State, got.ReconcileAt)
			}
			if a == nil || a.Outcome != order.OutcomeUnknown {
				t.Fatalf("attempt %+v, want outcome unknown", a)
			}
			// A retry with the same key and a new click both leave it to the reconciler.
			for _, req := range []string{"checkout-" + token, "checkout-" + token + "-again"} {
				if again, _ := f.charge(t, o.ID, req); again.State != order.StateCharging {
					t.Fatalf("charge %s: %s, want CHARGING", req, again.State)
				}
			}
			if n := f.charges(t, o.ID); n != 1 {
				t.Fatalf("gateway charged %d times, want 1", n)
			}
			if n := f.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND reconcile_at IS NOT NULL`, o.ID); n != 1 {
				t.Fatalf("no reconcile_at on the CHARGING order")
			}
			// The reconciler finds the charge.
			checked, ok, err := f.rec.CheckNow(context.Background(), o.ID)
			if err != nil || !ok {
				t.Fatalf("CheckNow: %v %v", ok, err)
			}
			if checked.State != order.StatePaid {
				t.Fatalf("after reconcile: %s, want PAID", checked.State)
			}
		})
	}
}

func TestChargeDeclineThenNewAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o := f.create(t, "order-decline", "tok_decline")
	declined, da := f.charge(t, o.ID, "checkout-decline-1")
	if declined.State != order.StatePending || da == nil || da.Outcome != order.OutcomeDeclined || da.DeclineCode == "" {
		t.Fatalf("declined charge: %+v %+v", declined, da)
	}
	// The same request again is the same declined attempt, not a new try.
	if again, aa := f.charge(t, o.ID, "checkout-decline-1"); aa == nil || aa.ID != da.ID || again.State != order.StatePending {
		t.Fatalf("replay of declined request: %+v %+v", again, aa)
	}
	// Reusing the request id with another card is a conflict.
	_, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "checkout-decline-1", PaymentMethod: "tok_ok"})
	_ = wantConflict(t, err)
	// A new click with a good card succeeds.
	ok, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "checkout-decline-2", PaymentMethod: "tok_ok"})
	if err != nil || ok.State != order.StatePaid {
		t.Fatalf("second attempt: %+v %v", ok, err)
	}
	events, attempts := f.history(t, o.ID)
	if len(attempts) != 2 {
		t.Fatalf("%d attempts in history, want 2", len(attempts))
	}
	var path []string
	for _, e := range events {
		path = append(path, e.Name+"→"+string(e.To)+" by "+string(e.Actor))
	}
	want := "[create→PENDING by api charge→CHARGING by api fail→PENDING by api charge→CHARGING by api succeed→PAID by api]"
	if fmt.Sprint(path) != want {
		t.Fatalf("history %v, want %s", path, want)
	}
	// A request id of this order used on another order is a conflict.
	other := f.create(t, "order-decline-other", "tok_ok")
	_, _, err = f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: other.ID, RequestID: "checkout-decline-2"})
	_ = wantConflict(t, err)
	if n := f.charges(t, other.ID); n != 0 {
		t.Fatalf("conflicting request charged %d times", n)
	}
}

func TestChargeBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "order-charge-bad", "tok_ok")
	ctx := context.Background()
	for name, tt := range map[string]struct {
		in    order.ChargeInput
		field string
	}{
		"no request id":      {order.ChargeInput{OrderID: o.ID}, "request_id"},
		"short request id":   {order.ChargeInput{OrderID: o.ID, RequestID: "abc"}, "request_id"},
		"bad order id":       {order.ChargeInput{OrderID: "123", RequestID: "checkout-bad-1"}, "order_id"},
		"card number pm":     {order.ChargeInput{OrderID: o.ID, RequestID: "checkout-bad-1", PaymentMethod: "4000056655665556"}, "payment_method"},
		"unprintable req id": {order.ChargeInput{OrderID: o.ID, RequestID: "checkout\tbad"}, "request_id"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := f.svc.Charge(ctx, merchant, tt.in)
			wantValidation(t, err, tt.field)
		})
	}
	_, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: "0190d9a0-0000-7000-8000-000000000000", RequestID: "checkout-bad-2"})
	if !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("charge of no order: %v, want ErrNotFound", err)
	}
	if n := f.count(t, `SELECT count(*) FROM charge_attempts`); n != 0 {
		t.Fatalf("bad input left %d attempts", n)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o := f.create(t, "order-cancel", "tok_ok")
	c, err := f.svc.Cancel(ctx, merchant, o.ID, "customer left")
	if err != nil || c.State != order.StateCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	// Charging a canceled order charges nothing.
	if got, a := f.charge(t, o.ID, "checkout-cancel-1"); got.State != order.StateCanceled || a != nil {
		t.Fatalf("charge after cancel: %+v %+v", got, a)
	}
	_, err = f.svc.Cancel(ctx, merchant, o.ID, "")
	var se *order.StateError
	if !errors.As(err, &se) || se.Current != order.StateCanceled || se.Event != order.EventCancel {
		t.Fatalf("cancel of a CANCELED order: %v, want a *StateError naming the state", err)
	}
	p := f.create(t, "order-cancel-paid", "tok_ok")
	f.charge(t, p.ID, "checkout-cancel-2")
	if _, err = f.svc.Cancel(ctx, merchant, p.ID, ""); !errors.As(err, &se) || se.Current != order.StatePaid {
		t.Fatalf("cancel of a PAID order: %v, want a *StateError", err)
	}
	// The reason is the client's text: it is in the history, never in the logs.
	events, _ := f.history(t, o.ID)
	if last := events[len(events)-1]; last.Name != string(order.EventCancel) || last.Reason != "customer left" || last.Actor != order.ActorAPI {
		t.Fatalf("cancel event %+v", last)
	}
	if strings.Contains(f.logs.String(), "customer left") {
		t.Fatalf("the cancel reason reached the logs:\n%s", f.logs.String())
	}
}

func TestCreateAndChargeInOneCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	n := order.NewOrder{MerchantReference: "one-call-1", Amount: order.Money{Currency: "GBP", AmountMinor: 990}, PaymentMethod: "tok_ok"}
	first, fa, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "one-call-req-1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.State != order.StatePaid || fa == nil || fa.Outcome != order.OutcomeSucceeded {
		t.Fatalf("one call: %+v %+v", first, fa)
	}
	// A retry of the same call replays; a new request id on the same order charges nothing.
	again, aa, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "one-call-req-1"})
	if err != nil || again.ID != first.ID || aa == nil || aa.ID != fa.ID {
		t.Fatalf("retry: %+v %+v %v", again, aa, err)
	}
	if got, a, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "one-call-req-2"}); err != nil || got.State != order.StatePaid || a != nil {
		t.Fatalf("new request id on a PAID order: %+v %+v %v", got, a, err)
	}
	if n := f.charges(t, first.ID); n != 1 {
		t.Fatalf("gateway charged %d times, want 1", n)
	}
	// Other parameters under the same reference, and a request id of another order, are conflicts.
	_, _, err = f.svc.CreateAndCharge(ctx, merchant, order.NewOrder{MerchantReference: "one-call-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok"}, order.ChargeInput{RequestID: "one-call-req-3"})
	_ = wantConflict(t, err)
	_, _, err = f.svc.CreateAndCharge(ctx, merchant, order.NewOrder{MerchantReference: "one-call-2",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok"}, order.ChargeInput{RequestID: "one-call-req-1"})
	_ = wantConflict(t, err)
	// The failed call created nothing: no order under the new reference.
	if _, err := f.svc.GetByReference(ctx, merchant, "one-call-2"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("the conflicting call left an order behind: %v", err)
	}
	if n := f.count(t, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders after the conflicts, want 1", n)
	}
	// The history is a path of the table: create, charge, succeed.
	events, _ := f.history(t, first.ID)
	var path []string
	for _, e := range events {
		path = append(path, e.Name)
	}
	if fmt.Sprint(path) != "[create charge succeed]" {
		t.Fatalf("history %v", path)
	}
	// An unknown outcome leaves it to the reconciler, as Charge does.
	timeout, _, err := f.svc.CreateAndCharge(ctx, merchant, order.NewOrder{MerchantReference: "one-call-3",
		Amount: order.Money{Currency: "GBP", AmountMinor: 5}, PaymentMethod: "tok_timeout"}, order.ChargeInput{RequestID: "one-call-req-4"})
	if err != nil || timeout.State != order.StateCharging || timeout.ReconcileAt.IsZero() {
		t.Fatalf("timeout: %+v %v", timeout, err)
	}
}

// TestHistoryNamesEachActor: the charge path, the reconciler and the
// operator who resolves an order each sign their moves in its history.
func TestHistoryNamesEachActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	o := f.create(t, "order-actors", "tok_timeout")
	f.charge(t, o.ID, "checkout-actors-1") // unknown: CHARGING
	// A reconciler that cannot reach the gateway exhausts its schedule.
	dead, err := refpsp.New(refpsp.Config{BaseURL: "http://" + gatewaytest.ClosedAddr(t), APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(f.store, map[string]order.Gateway{"sim": dead}, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: gatewayTimeout, NoShowHorizon: time.Hour,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	// The schedule's own checks (an operator's CheckNow uses none of it),
	// each made due at once.
	for range 2 {
		if _, err := f.pool.Exec(ctx, "UPDATE orders SET reconcile_at = now() WHERE id = $1", o.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := rec.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	resolved, err := f.svc.Resolve(ctx, order.AnyMerchant, o.ID, order.EventResolvePaid, "ch_sim_000001", "found in the gateway's dashboard", order.Operator("a-ops"))
	if err != nil || resolved.State != order.StatePaid {
		t.Fatalf("resolve: %+v %v", resolved, err)
	}
	events, _ := f.history(t, o.ID)
	var path []string
	for _, e := range events {
		path = append(path, e.Name+" by "+string(e.Actor))
	}
	want := "[create by api charge by api escalate by reconciler resolve_paid by ops:a-ops]"
	if fmt.Sprint(path) != want {
		t.Fatalf("history %v, want %s", path, want)
	}
}

// TestResolveUnpaidAsksTheGateway: an operator's resolution of an order in
// NEEDS_REVIEW as unpaid (PENDING or CANCELED) first asks the gateway about
// every attempt that might have charged, and is refused, naming the
// charge, when one did; PAID is still accepted. An order whose gateway has
// no charge is resolved as asked.
func TestResolveUnpaidAsksTheGateway(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	review := func(ref, token string) order.Order {
		o := f.create(t, ref, token)
		f.charge(t, o.ID, ref+"-request-1") // unknown: CHARGING
		// As the reconciler leaves an order whose schedule ran out.
		if _, err := f.pool.Exec(ctx, "UPDATE orders SET state = 'NEEDS_REVIEW', reconcile_at = NULL WHERE id = $1", o.ID); err != nil {
			t.Fatal(err)
		}
		return o
	}
	charged := review("order-review-charged", "tok_timeout")
	for _, ev := range []order.EventName{order.EventResolvePending, order.EventResolveCanceled} {
		_, err := f.svc.Resolve(ctx, order.AnyMerchant, charged.ID, ev, "", "customer says no charge", order.Operator("a-ops"))
		var found *order.ChargeFoundError
		if !errors.As(err, &found) || found.ChargeID == "" {
			t.Fatalf("%s of a charged order: %v, want a ChargeFoundError naming the charge", ev, err)
		}
		if got, _ := f.store.Order(ctx, order.AnyMerchant, charged.ID); got.State != order.StateNeedsReview {
			t.Fatalf("refused %s moved the order to %s", ev, got.State)
		}
	}
	if o, err := f.svc.Resolve(ctx, order.AnyMerchant, charged.ID, order.EventResolvePaid, "ch_sim_000001", "found it", order.Operator("a-ops")); err != nil || o.State != order.StatePaid {
		t.Fatalf("resolve PAID: %v %v", o.State, err)
	}

	unseen := review("order-review-unseen", "tok_slow_60000") // the gateway shows no charge
	if o, err := f.svc.Resolve(ctx, order.AnyMerchant, unseen.ID, order.EventResolveCanceled, "", "no charge at the gateway", order.Operator("a-ops")); err != nil || o.State != order.StateCanceled {
		t.Fatalf("resolve CANCELED with no charge at the gateway: %v %v", o.State, err)
	}
}
