package order_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

// stripeFixture is the charge path and the reconciler charging through the
// Stripe adapter, over HTTP, against the stateful Stripe fake.
type stripeFixture struct {
	svc   *order.Service
	store *postgres.Store
	pool  *pgxpool.Pool
	fake  *stripetest.Server
	rec   *reconcile.Reconciler
	logs  logtest.Buffer
	// failCancels, while set, answers every cancel 500 without passing it
	// to the fake: Stripe could not say whether it canceled.
	failCancels atomic.Bool
}

// newStripeFixture uses key as Settle's Stripe key; the fake accepts only
// sk_test_settle.
func newStripeFixture(t *testing.T, key string) *stripeFixture {
	t.Helper()
	return newStripeFixtureExpiring(t, key, time.Hour, gatewayTimeout)
}

// newStripeFixtureExpiring gives customers expiry to act, and each call to
// Stripe timeout.
func newStripeFixtureExpiring(t *testing.T, key string, expiry, timeout time.Duration) *stripeFixture {
	t.Helper()
	f := &stripeFixture{pool: postgrestest.Pool(t), fake: stripetest.New(stripetest.Options{SecretKey: "sk_test_settle"})}
	f.store = postgres.NewStore(f.pool)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.failCancels.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"An unknown error occurred"}}`))
			return
		}
		f.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	gw, err := stripe.New(stripe.Config{SecretKey: key, BaseURL: hs.URL, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	gateways := map[string]order.Gateway{"stripe": gw}
	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "stripe", GatewayTimeout: timeout, Grace: time.Second, FirstRecheck: time.Minute,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	f.rec, err = reconcile.New(f.store, gateways, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute, time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: timeout, NoShowHorizon: time.Hour, ActionExpiry: expiry,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// charge creates an order paid with token and charges it once.
func (f *stripeFixture) charge(t *testing.T, token string) (order.Order, *order.Attempt, error) {
	t.Helper()
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, newOrder(uniqueRef(), token))
	if err != nil {
		t.Fatal(err)
	}
	charged, a, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "req-" + strings.ReplaceAll(o.ID, "-", "x")})
	if err != nil {
		return o, nil, err
	}
	return charged, a, nil
}

// check runs one reconciler check of the order now, and returns the order
// and its attempt as they then stand.
func (f *stripeFixture) check(t *testing.T, o order.Order) (order.Order, order.Attempt) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := f.rec.CheckNow(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	return f.load(t, o.ID)
}

func (f *stripeFixture) load(t *testing.T, id string) (order.Order, order.Attempt) {
	t.Helper()
	ctx := context.Background()
	o, err := f.store.Order(ctx, order.AnyMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.store.Attempt(ctx, o.MerchantID, o.CurrentAttempt)
	if err != nil {
		t.Fatal(err)
	}
	return o, a
}

// TestStripeCrashBetweenCreateAndConfirm: the create executed at Stripe but
// its answer never came back (as when the process stops between the create
// and the confirm), so no confirm was sent and no PaymentIntent id was
// recorded. The reconciler learns the id from the replayed create, cancels
// the PaymentIntent, and the order returns to PENDING. Nothing is ever
// charged, however long the reconciler runs.
func TestStripeCrashBetweenCreateAndConfirm(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	o, a, err := f.charge(t, stripetest.TokenCreateDropped)
	if err != nil || o.State != order.StateCharging || a.GatewayChargeID != "" {
		t.Fatalf("Charge = %+v, %+v, %v; want CHARGING with no PaymentIntent id", o, a, err)
	}
	pis := f.fake.Intents(a.ID)
	if len(pis) != 1 || pis[0].Status != "requires_confirmation" {
		t.Fatalf("PaymentIntents = %+v; want one, unconfirmed", pis)
	}

	got, att := f.check(t, o)
	if got.State != order.StatePending || att.Outcome != order.OutcomeDeclined || att.DeclineCode != "canceled_unconfirmed" ||
		att.GatewayChargeID != pis[0].ID {
		t.Fatalf("after a check: order %s, attempt %+v; want PENDING, declined canceled_unconfirmed, %s recorded", got.State, att, pis[0].ID)
	}
	// However long the reconciler runs, nothing is charged.
	for range 5 {
		if _, err := f.rec.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.check(t, o)
	}
	for _, pi := range f.fake.Ledger() {
		if pi.Status == "succeeded" || pi.Confirmations > 0 {
			t.Errorf("the fake charged %+v", pi)
		}
	}
	if n := f.fake.Count(http.MethodPost, "/confirm"); n != 0 {
		t.Errorf("the fake saw %d confirms, want none", n)
	}
	if pis := f.fake.Intents(a.ID); len(pis) != 1 || pis[0].Status != "canceled" {
		t.Errorf("PaymentIntents = %+v; want the one, canceled", pis)
	}
	// The customer can pay again, with a new attempt and a new intent.
	paid, a2, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: "again-" + o.ID,
		PaymentMethod: stripetest.TokenVisa})
	if err != nil || paid.State != order.StatePaid || a2.ID == a.ID {
		t.Errorf("a new charge = %+v, %+v, %v; want PAID by a new attempt", paid, a2, err)
	}
}

// TestStripeUnknownsSettleOnceStripeKnows: a confirm answered with a saved
// 500, and an intent still processing, are PAID at the first check after
// Stripe has the payment (the fake's ledger says when: its status changes),
// read by the PaymentIntent id the charge path recorded with its settle.
// While the intent is processing, checks leave the order CHARGING and never
// cancel it.
func TestStripeUnknownsSettleOnceStripeKnows(t *testing.T) {
	t.Parallel()
	t.Run("saved 500", func(t *testing.T) {
		t.Parallel()
		f := newStripeFixture(t, "sk_test_settle")
		o, a, err := f.charge(t, stripetest.TokenServerErrorAfterCreate)
		if err != nil || o.State != order.StateCharging || !strings.HasPrefix(a.GatewayChargeID, "pi_") {
			t.Fatalf("Charge = %+v, %+v, %v; want CHARGING with the PaymentIntent id recorded", o, a, err)
		}
		// Stripe had the payment when it answered the confirm with its 500.
		if got := intentStatuses(t, f.fake, a.GatewayChargeID); !slices.Equal(got, []string{"requires_confirmation", "succeeded"}) {
			t.Fatalf("the fake's ledger: %v; want requires_confirmation, then succeeded", got)
		}
		if got, att := f.check(t, o); got.State != order.StatePaid || att.GatewayChargeID != a.GatewayChargeID {
			t.Fatalf("after a check: %s, %+v; want PAID with %s", got.State, att, a.GatewayChargeID)
		}
		if n := f.fake.Count(http.MethodPost, "/confirm"); n != 1 {
			t.Errorf("the fake saw %d confirms, want the charge's one", n)
		}
	})
	t.Run("processing", func(t *testing.T) {
		t.Parallel()
		f := newStripeFixture(t, "sk_test_settle")
		o, a, err := f.charge(t, stripetest.TokenProcessing)
		if err != nil || o.State != order.StateCharging || a.GatewayChargeID == "" {
			t.Fatalf("Charge = %+v, %+v, %v; want CHARGING with the PaymentIntent id recorded", o, a, err)
		}
		for range 3 {
			got, att := f.check(t, o)
			if got.State != order.StateCharging || att.GatewayChargeID != a.GatewayChargeID {
				t.Fatalf("while processing: %s, %+v; want CHARGING, the id kept", got.State, att)
			}
		}
		if got := intentStatuses(t, f.fake, a.GatewayChargeID); !slices.Equal(got, []string{"requires_confirmation", "processing"}) {
			t.Fatalf("the fake's ledger while processing: %v; want requires_confirmation, processing", got)
		}
		if !f.fake.Succeed(a.GatewayChargeID) {
			t.Fatal("the fake's intent is not processing")
		}
		if got := intentStatuses(t, f.fake, a.GatewayChargeID); !slices.Equal(got, []string{"requires_confirmation", "processing", "succeeded"}) {
			t.Fatalf("the fake's ledger once succeeded: %v; want requires_confirmation, processing, succeeded", got)
		}
		// The first check after the change settles it.
		if got, att := f.check(t, o); got.State != order.StatePaid || att.Outcome != order.OutcomeSucceeded {
			t.Fatalf("once succeeded: %s, %+v; want PAID", got.State, att)
		}
		if n, c := f.fake.Count(http.MethodPost, "/confirm"), f.fake.Count(http.MethodPost, "/cancel"); n != 1 || c != 0 {
			t.Errorf("the fake saw %d confirms and %d cancels; want the charge's one confirm and no cancel", n, c)
		}
	})
}

// intentStatuses lists the statuses the fake's PaymentIntent id took, in
// order.
func intentStatuses(t *testing.T, fake *stripetest.Server, id string) []string {
	t.Helper()
	pi, ok := fake.Intent(id)
	if !ok {
		t.Fatalf("the fake has no PaymentIntent %s", id)
	}
	var out []string
	for _, c := range pi.Changes {
		out = append(out, c.Status)
	}
	return out
}

// TestStripeRateLimitedIsNotSent: a 429 to the only confirm sent is
// provably not executed: the order is PENDING at once, with nothing to
// reconcile.
func TestStripeRateLimitedIsNotSent(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	o, a, err := f.charge(t, stripetest.TokenRateLimited)
	if err != nil || o.State != order.StatePending || a.Outcome != order.OutcomeNotSent {
		t.Fatalf("Charge = %+v, %+v, %v; want PENDING, not sent", o, a, err)
	}
}

// TestStripeRefusedKey: Stripe refuses Settle's key. The checkout is told
// it is a configuration error (ErrGatewayRefused), not a decline; the order
// is PENDING, the attempt refused, the refusal logged at ERROR; a retry of
// the same request gets the same answer.
func TestStripeRefusedKey(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_revoked")
	o, _, err := f.charge(t, stripetest.TokenVisa)
	if !errors.Is(err, order.ErrGatewayRefused) {
		t.Fatalf("Charge error = %v; want ErrGatewayRefused", err)
	}
	got, att := f.load(t, o.ID)
	if got.State != order.StatePending || att.Outcome != order.OutcomeRefused {
		t.Fatalf("order %s, attempt %+v; want PENDING, refused", got.State, att)
	}
	if !strings.Contains(f.logs.String(), "level=ERROR") {
		t.Errorf("no ERROR log line:\n%s", f.logs.String())
	}
	_, _, err = f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: "req-" + strings.ReplaceAll(o.ID, "-", "x")})
	if !errors.Is(err, order.ErrGatewayRefused) {
		t.Errorf("retried Charge error = %v; want ErrGatewayRefused again", err)
	}
	if n := len(f.fake.Ledger()); n != 0 {
		t.Errorf("the fake holds %d PaymentIntents, want none", n)
	}
}

// TestStripeAmountsCheckedAtCreate: an amount Stripe cannot carry is
// refused when the order is created.
func TestStripeAmountsCheckedAtCreate(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	n := newOrder("inv-kwd", stripetest.TokenVisa)
	n.Amount = order.Money{Currency: "KWD", AmountMinor: 1255}
	var verr *order.ValidationError
	if _, err := f.svc.Create(context.Background(), merchant, n); !errors.As(err, &verr) || verr.Field != "amount.amount_minor" {
		t.Fatalf("Create(1.255 KWD) error = %v; want a validation error of amount.amount_minor", err)
	}
	n.Amount.AmountMinor = 1250
	if _, err := f.svc.Create(context.Background(), merchant, n); err != nil {
		t.Fatalf("Create(1.250 KWD) = %v", err)
	}
}

var uniqueRefs atomic.Int64

// uniqueRef is a merchant reference of its own (an id could read as a card
// number, which the API refuses), for the tests of every gateway.
func uniqueRef() string { return fmt.Sprintf("stripe-inv-%d", uniqueRefs.Add(1)) }

// chargePresent creates an order paid with token and charges it with the
// customer at the checkout.
func (f *stripeFixture) chargePresent(t *testing.T, token string) (order.Order, *order.Attempt, order.ChargeInput) {
	t.Helper()
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, newOrder(uniqueRef(), token))
	if err != nil {
		t.Fatal(err)
	}
	in := order.ChargeInput{OrderID: o.ID, RequestID: "req-" + strings.ReplaceAll(o.ID, "-", "x"), CustomerPresent: true, ReturnURL: "https://checkout.example/return"}
	charged, a, err := f.svc.Charge(ctx, merchant, in)
	if err != nil {
		t.Fatal(err)
	}
	return charged, a, in
}

// TestStripeThreeDSecure: a card that Stripe challenges moves the order to
// REQUIRES_ACTION with the redirect; the customer's return settles it at
// once, through ChargeOrder with the same request_id or GetOrder.
func TestStripeThreeDSecure(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()

	o, a, in := f.chargePresent(t, stripetest.TokenRequiresAction)
	if o.State != order.StateRequiresAction || a.Outcome != order.OutcomeRequiresAction || a.NextAction.RedirectURL == "" ||
		a.NextAction.ClientSecret == "" || a.GatewayChargeID == "" {
		t.Fatalf("Charge = %s, %+v; want REQUIRES_ACTION with the next action", o.State, a)
	}
	// Asked again before the customer is back: still waiting, same action.
	again, a2, err := f.svc.Charge(ctx, merchant, in)
	if err != nil || again.State != order.StateRequiresAction || a2.NextAction != a.NextAction {
		t.Fatalf("Charge again = %s, %+v, %v; want REQUIRES_ACTION with the same next action", again.State, a2, err)
	}
	// The customer completes the challenge and comes back.
	resp, err := http.Get(a.NextAction.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	paid, a3, err := f.svc.Charge(ctx, merchant, in)
	if err != nil || paid.State != order.StatePaid || a3.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge after the challenge = %s, %+v, %v; want PAID", paid.State, a3, err)
	}
	events, _, err := f.store.History(ctx, o.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, e := range events {
		path = append(path, string(e.To))
	}
	if got := strings.Join(path, " "); got != "PENDING CHARGING REQUIRES_ACTION PAID" {
		t.Errorf("history = %s; want PENDING CHARGING REQUIRES_ACTION PAID", got)
	}

	// A failed challenge, seen by GetOrder: PENDING with the decline.
	o, a, _ = f.chargePresent(t, stripetest.TokenRequiresAction)
	if o.State != order.StateRequiresAction {
		t.Fatalf("Charge = %s; want REQUIRES_ACTION", o.State)
	}
	f.fake.Authenticate(a.GatewayChargeID, false)
	got, err := f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || got.State != order.StatePending {
		t.Fatalf("GetOrder after a failed challenge = %s, %v; want PENDING", got.State, err)
	}
	if _, att := f.load(t, o.ID); att.Outcome != order.OutcomeDeclined || att.DeclineCode != "payment_intent_authentication_failure" {
		t.Errorf("attempt = %+v; want declined payment_intent_authentication_failure", att)
	}
}

// TestStripeThreeDSecureExpires: a customer who never completes the
// challenge: before the expiry the reconciler only reads; after it, it
// cancels the PaymentIntent and the order is PENDING, with nothing charged.
func TestStripeThreeDSecureExpires(t *testing.T) {
	t.Parallel()
	// The check before the expiry has to come within it, after the charge
	// is presented: long enough for a loaded machine.
	const expiry = 2 * time.Second
	f := newStripeFixtureExpiring(t, "sk_test_settle", expiry, gatewayTimeout)
	o, a, _ := f.chargePresent(t, stripetest.TokenRequiresAction)
	if got, _ := f.check(t, o); got.State != order.StateRequiresAction {
		t.Fatalf("checked before the expiry: %s; want REQUIRES_ACTION", got.State)
	}
	if n := f.fake.Count(http.MethodPost, "/cancel"); n != 0 {
		t.Fatalf("%d cancels before the expiry", n)
	}
	time.Sleep(expiry + 50*time.Millisecond)
	got, att := f.check(t, o)
	if got.State != order.StatePending || att.Outcome != order.OutcomeDeclined {
		t.Fatalf("checked after the expiry: %s, %+v; want PENDING, declined", got.State, att)
	}
	if pi, _ := f.fake.Intent(a.GatewayChargeID); pi.Status != "canceled" {
		t.Errorf("PaymentIntent = %+v; want canceled", pi)
	}
	events, _, err := f.store.History(context.Background(), o.MerchantID, o.ID)
	if last := events[len(events)-1]; err != nil || last.Name != string(order.EventFail) || !strings.HasPrefix(last.Reason, "expired") {
		t.Errorf("last event = %+v, %v; want a fail that says it expired", last, err)
	}
}

// TestStripeThreeDSecureRace: the customer completes the challenge while
// the reconciler's expiry cancels it, many times over. Whoever wins at
// Stripe wins in Settle: the order ends PAID exactly when the intent
// succeeded, and never PENDING with the customer charged.
func TestStripeThreeDSecureRace(t *testing.T) {
	t.Parallel()
	const expiry = 100 * time.Millisecond
	// Sixty calls at once, each a round trip to the fake and statements on
	// the test pool's eight connections: on a loaded machine, under -race,
	// one can take seconds. A call cut short by its deadline proves nothing
	// about the race (its outcome is unknown, and the order waits), so the
	// deadline is far past what any of them needs; the race is the calls'
	// timing, which it leaves alone.
	const timeout = 15 * time.Second
	f := newStripeFixtureExpiring(t, "sk_test_settle", expiry, timeout)
	ctx := context.Background()
	type run struct {
		o  order.Order
		pi string
		in order.ChargeInput
	}
	var runs []run
	for range 20 {
		o, a, in := f.chargePresent(t, stripetest.TokenRequiresAction)
		runs = append(runs, run{o, a.GatewayChargeID, in})
	}
	time.Sleep(expiry + 50*time.Millisecond)
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(3)
		go func() { // the customer, a little sooner or later each time
			defer wg.Done()
			time.Sleep(time.Duration(i%4) * 10 * time.Millisecond)
			f.fake.Authenticate(r.pi, true)
			if _, _, err := f.svc.Charge(ctx, merchant, r.in); err != nil {
				t.Error(err)
			}
		}()
		go func() { // the expiry
			defer wg.Done()
			if _, _, err := f.rec.CheckNow(ctx, r.o.ID); err != nil {
				t.Error(err)
			}
		}()
		go func() { // the checkout polling
			defer wg.Done()
			if _, err := f.svc.Get(ctx, order.ForMerchant(merchant), r.o.ID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	paid, pending := 0, 0
	for _, r := range runs {
		// Whatever is left undecided, a last check settles.
		got, _ := f.load(t, r.o.ID)
		if got.State.AwaitsGateway() {
			got, _ = f.check(t, r.o)
		}
		pi, _ := f.fake.Intent(r.pi)
		switch {
		case pi.Status == "succeeded" && got.State == order.StatePaid:
			paid++
		case pi.Status == "canceled" && got.State == order.StatePending:
			pending++
		default:
			t.Errorf("order %s is %s while its PaymentIntent is %s", r.o.ID, got.State, pi.Status)
		}
	}
	t.Logf("%d paid, %d expired", paid, pending)
}

// TestStripeSavedCardCustomer: a charge of a saved card names its Stripe
// Customer. The customer is sent with the create and kept with the
// attempt, so that when the create's answer is lost the reconciler's
// replay of it carries the same parameters: Stripe finds the PaymentIntent
// (no idempotency_error), the reconciler cancels it, and the order is
// PENDING. The same request_id with another customer is a conflict, and
// the id is never logged.
func TestStripeSavedCardCustomer(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, newOrder(uniqueRef(), stripetest.TokenCreateDropped))
	if err != nil {
		t.Fatal(err)
	}
	const customer = "cus_SavedCard4242"
	in := order.ChargeInput{OrderID: o.ID, RequestID: "saved-" + o.ID, Customer: customer}
	charged, a, err := f.svc.Charge(ctx, merchant, in)
	if err != nil || charged.State != order.StateCharging || a.GatewayChargeID != "" || a.Customer != customer {
		t.Fatalf("Charge = %+v, %+v, %v; want CHARGING with no PaymentIntent id, for %s", charged, a, err, customer)
	}
	pis := f.fake.Intents(a.ID)
	if len(pis) != 1 || pis[0].Customer != customer {
		t.Fatalf("PaymentIntents = %+v; want one, for %s", pis, customer)
	}
	if _, att := f.load(t, o.ID); att.Customer != customer {
		t.Fatalf("stored attempt %+v; want customer %s", att, customer)
	}

	got, att := f.check(t, o)
	if got.State != order.StatePending || att.Outcome != order.OutcomeDeclined || att.DeclineCode != "canceled_unconfirmed" ||
		att.GatewayChargeID != pis[0].ID {
		t.Fatalf("after a check: order %s, attempt %+v; want PENDING, declined canceled_unconfirmed, %s recorded", got.State, att, pis[0].ID)
	}
	if n := len(f.fake.Ledger()); n != 1 {
		t.Errorf("the fake created %d PaymentIntents, want the one", n)
	}

	other := in
	other.Customer = "cus_SomeoneElse"
	var conflict *order.ConflictError
	if _, _, err := f.svc.Charge(ctx, merchant, other); !errors.As(err, &conflict) {
		t.Errorf("the same request_id with another customer: err = %v; want a ConflictError", err)
	}
	if strings.Contains(f.logs.String(), customer) {
		t.Errorf("the logs quote the customer:\n%s", f.logs.String())
	}

	// A new attempt of the order with its saved card is charged, for the customer.
	paid, a2, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "saved-again-" + o.ID,
		PaymentMethod: stripetest.TokenVisa, Customer: customer})
	if err != nil || paid.State != order.StatePaid || a2.Customer != customer {
		t.Fatalf("a new charge = %+v, %+v, %v; want PAID for %s", paid, a2, err, customer)
	}
	if pis := f.fake.Intents(a2.ID); len(pis) != 1 || pis[0].Customer != customer {
		t.Errorf("PaymentIntents of the new attempt = %+v; want one, for %s", pis, customer)
	}
}

// TestChargeCustomerValidated: a customer that is not a Stripe Customer
// id is refused before anything is claimed, naming the field and not the
// value.
func TestChargeCustomerValidated(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, newOrder(uniqueRef(), stripetest.TokenVisa))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"cus_", "cust_42", "42", "cus_4242 4242", "cus_42/../x", "cus_" + strings.Repeat("a", 252), "pm_card_visa"} {
		_, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "bad-customer-" + o.ID, Customer: bad})
		var verr *order.ValidationError
		if !errors.As(err, &verr) || verr.Field != "customer" || (bad != "cus_" && strings.Contains(verr.Error(), bad)) {
			t.Errorf("customer %q: err = %v; want a ValidationError of customer that does not repeat it", bad, err)
		}
	}
	if got, err := f.store.Order(ctx, order.AnyMerchant, o.ID); err != nil || got.State != order.StatePending {
		t.Errorf("order = %+v, %v; want it PENDING, nothing claimed", got, err)
	}
	if n := len(f.fake.Ledger()); n != 0 {
		t.Errorf("the fake holds %d PaymentIntents, want none", n)
	}
}
