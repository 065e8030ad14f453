package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
	"github.com/settlepay/settle/internal/webhook"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

const (
	refpspSecret    = "whsec_refpsp_current_0123456789abcdef"
	refpspOldSecret = "whsec_refpsp_old_0123456789abcdefghij"
	stripeSecret    = "whsec_stripeCurrent0123456789abcdefghi"
	stripeOldSecret = "whsec_stripeOld0123456789abcdefghijklm"
	merchant        = order.DefaultMerchant
)

// fixture is Settle's charge path on a fresh database, charging through the
// simulator over HTTP, with the webhook listener on a real HTTP server and
// a reconciler whose only trigger (its schedule and poll being an hour
// away) is a gateway's event.
type fixture struct {
	pool    *pgxpool.Pool
	store   *postgres.Store
	sim     *sim.Sim
	svc     *order.Service
	rec     *reconcile.Reconciler
	hooks   *httptest.Server
	logs    logtest.Buffer
	timeout time.Duration
}

type fixtureOptions struct {
	// events makes the simulator push its events to the webhook listener.
	events sim.Events
	// gatewayTimeout is Settle's deadline of a charge; simHold how long
	// the simulator holds a tok_timeout answer.
	gatewayTimeout, simHold time.Duration
	schedule                []time.Duration
	// poll is the reconciler's poll interval; zero is an hour, so that
	// only an event wakes it.
	poll time.Duration
}

func newFixture(t testing.TB, fo fixtureOptions) *fixture {
	t.Helper()
	if fo.gatewayTimeout == 0 {
		// Counted from before the claim, and the reconciler's lookups'
		// too: long enough for a loaded machine's waits.
		fo.gatewayTimeout = 2 * time.Second
	}
	if fo.simHold == 0 {
		fo.simHold = 2 * fo.gatewayTimeout
	}
	if fo.schedule == nil {
		fo.schedule = []time.Duration{time.Hour, time.Hour}
	}
	if fo.poll == 0 {
		fo.poll = time.Hour
	}
	f := &fixture{pool: postgrestest.Pool(t), timeout: fo.gatewayTimeout}
	f.store = postgres.NewStore(f.pool)
	// The listener's address first: the simulator sends its events there,
	// and the adapter that charges the simulator reads them.
	f.hooks = httptest.NewUnstartedServer(nil)
	t.Cleanup(f.hooks.Close)
	hooksURL := "http://" + f.hooks.Listener.Addr().String()
	if fo.events.URL == "" && fo.events.Secrets != nil {
		fo.events.URL = hooksURL + "/webhooks/refpsp"
	}
	f.sim = sim.New(sim.Options{ClientTimeout: fo.simHold, Events: fo.events})
	hs := httptest.NewServer(f.sim)
	t.Cleanup(func() { hs.Close(); f.sim.Close() })
	gw := newRefpsp(t, hs.URL, fo.gatewayTimeout)
	f.hooks.Config.Handler = webhook.New(f.store, webhook.Config{
		Gateways: map[string]order.EventReceiver{"refpsp": gw, "stripe": newStripe(t)},
		MaxBody:  8 << 10,
	}, f.logs.Logger())
	f.hooks.Start()
	gateways := map[string]order.Gateway{"sim": gw}
	var err error
	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "sim", GatewayTimeout: fo.gatewayTimeout, Grace: time.Second, FirstRecheck: fo.schedule[0],
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	f.rec, err = reconcile.New(f.store, gateways, reconcile.Config{
		Schedule: fo.schedule, BatchSize: 10, Concurrency: 2,
		PollInterval: fo.poll, LookupTimeout: fo.gatewayTimeout, NoShowHorizon: time.Hour,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// newRefpsp is the refpsp adapter for the gateway at baseURL, reading
// events signed with refpspSecret or refpspOldSecret.
func newRefpsp(t testing.TB, baseURL string, timeout time.Duration) *refpsp.Client {
	t.Helper()
	gw, err := refpsp.New(refpsp.Config{BaseURL: baseURL, APIKey: "sk_sim_test", Timeout: timeout,
		EventSecrets: []string{refpspSecret, refpspOldSecret}})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// newStripe is the Stripe adapter as far as its events go (it is never
// asked to charge), reading events signed with stripeSecret or
// stripeOldSecret.
func newStripe(t testing.TB) *stripe.Gateway {
	t.Helper()
	gw, err := stripe.New(stripe.Config{SecretKey: "sk_test_webhooks", BaseURL: "http://" + gatewaytest.ClosedAddr(t),
		WebhookSecrets: []string{stripeSecret, stripeOldSecret}})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// runReconciler runs the reconciler woken by the database's notifications,
// as `settle reconcile` does, until the test ends.
func (f *fixture) runReconciler(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	listening := make(chan struct{})
	var once sync.Once
	go func() { _ = f.rec.Run(ctx); done <- struct{}{} }()
	go func() {
		f.store.ListenDue(ctx, f.logs.Logger(), f.rec.Wake, func() { once.Do(func() { close(listening) }) })
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	<-listening
}

// charging returns an order left CHARGING by a charge whose outcome is
// unknown to Settle, with its attempt: token decides what the simulator
// did (tok_timeout: charged; tok_slow_<ms>: charged, hidden from lookups).
func (f *fixture) charging(t *testing.T, ref, token string) (order.Order, order.Attempt) {
	t.Helper()
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, order.NewOrder{MerchantReference: ref,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token})
	if err != nil {
		t.Fatal(err)
	}
	o, a, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: ref + "-request-a"})
	if err != nil || a == nil {
		t.Fatalf("Charge: %v", err)
	}
	if o.State != order.StateCharging {
		t.Fatalf("order is %s after a %s charge, want CHARGING", o.State, token)
	}
	return o, *a
}

func (f *fixture) order(t testing.TB, id string) order.Order {
	t.Helper()
	o, err := f.store.Order(context.Background(), order.AnyMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (f *fixture) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// refpspEvent is an event about the charge of attempt (the reference).
func refpspEvent(id, typ, attempt string) []byte {
	e := refpsp.Event{ID: id, Type: typ, Created: time.Now().Unix()}
	e.Data.Object = refpsp.ChargeObject{ID: "ch_" + id, Reference: attempt, Status: strings.TrimPrefix(typ, "charge."),
		Amount: 1250, Currency: "GBP"}
	b, _ := json.Marshal(e)
	return b
}

// post sends body with header set to sig and returns the status and the
// result the listener answered.
func (f *fixture) post(t *testing.T, path, header, sig string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.hooks.URL+path, bytes.NewReader(body))
	if sig != "" {
		req.Header.Set(header, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result string `json:"result"`
	}
	b, _ := io.ReadAll(resp.Body)
	if code := resp.StatusCode; code == 200 || code == 400 || code == 413 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
	}
	return resp.StatusCode, out.Result
}

func (f *fixture) postRefpsp(t *testing.T, body []byte) (int, string) {
	return f.post(t, "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), refpspSecret), body)
}

// stripeEvent is a Stripe event about the PaymentIntent pi, whose metadata
// names attempt.
func stripeEvent(id, typ, pi, attempt string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"api_version":"2023-10-16","created":%d,
		"data":{"object":{"id":%q,"object":"payment_intent","amount":1250,"currency":"gbp","metadata":{"attempt_id":%q}}}}`,
		id, typ, time.Now().Unix(), pi, attempt)
}

func stripeSig(body []byte, at time.Time, secret string) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

// TestVerification: an event is accepted only with a valid signature of
// one of the configured secrets, made within the tolerance, and a body
// within the cap; everything else is refused and stores nothing.
func TestVerification(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	_, a := f.charging(t, "verify-1", "tok_slow_60000")
	body := refpspEvent("evt_v1", refpsp.EventSucceeded, a.ID)
	sbody := stripeEvent("evt_sv1", "payment_intent.succeeded", "pi_v1", a.ID)
	old := time.Now().Add(-10 * time.Minute)
	big := refpspEvent("evt_big", refpsp.EventSucceeded, a.ID)
	big = append(big[:len(big)-1], []byte(`,"padding":"`+strings.Repeat("x", 9<<10)+`"}`)...)

	for _, c := range []struct {
		name, path, header, sig string
		body                    []byte
		code                    int
	}{
		{"refpsp no signature", "/webhooks/refpsp", refpsp.SignatureHeader, "", body, 400},
		{"refpsp wrong secret", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), "whsec_wrong"), body, 400},
		{"refpsp signature of another body", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign([]byte("{}"), time.Now(), refpspSecret), body, 400},
		{"refpsp stale timestamp", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(body, old, refpspSecret), body, 400},
		{"refpsp timestamp from the future", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(body, time.Now().Add(10*time.Minute), refpspSecret), body, 400},
		{"refpsp garbage header", "/webhooks/refpsp", refpsp.SignatureHeader, "v1=zz,t=x", body, 400},
		{"refpsp oversized body", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(big, time.Now(), refpspSecret), big, 413},
		{"stripe no signature", "/webhooks/stripe", "Stripe-Signature", "", sbody, 400},
		{"stripe wrong secret", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, time.Now(), "whsec_wrong"), sbody, 400},
		{"stripe stale timestamp", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, old, stripeSecret), sbody, 400},
		{"stripe timestamp from the future", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, time.Now().Add(10*time.Minute), stripeSecret), sbody, 400},
		{"stripe timestamp years ahead", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, time.Now().AddDate(5, 0, 0), stripeSecret), sbody, 400},
		{"stripe future timestamp beside a valid one", "/webhooks/stripe", "Stripe-Signature", "t=" + fmt.Sprint(time.Now().Unix()) + "," + stripeSig(sbody, time.Now().AddDate(5, 0, 0), stripeSecret), sbody, 400},
		{"refpsp signed by refpsp's secret at stripe", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, time.Now(), refpspSecret), sbody, 400},
	} {
		code, _ := f.post(t, c.path, c.header, c.sig, c.body)
		if code != c.code {
			t.Errorf("%s: status %d, want %d", c.name, code, c.code)
		}
	}
	if n := f.count(t, "gateway_events"); n != 0 {
		t.Fatalf("refused events stored %d rows, want none", n)
	}

	// Rotation: the old secret still verifies, alone or beside the new
	// one in the same header, for either gateway; and a sender's clock a
	// little ahead or behind, within the tolerance, is no fault.
	for _, c := range []struct {
		name, path, header, sig string
		body                    []byte
	}{
		{"refpsp old secret", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), refpspOldSecret), body},
		{"refpsp both secrets", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(refpspEvent("evt_v2", refpsp.EventSucceeded, a.ID), time.Now(), "whsec_next", refpspSecret), refpspEvent("evt_v2", refpsp.EventSucceeded, a.ID)},
		{"stripe old secret", "/webhooks/stripe", "Stripe-Signature", stripeSig(sbody, time.Now(), stripeOldSecret), sbody},
		{"stripe current secret", "/webhooks/stripe", "Stripe-Signature", stripeSig(stripeEvent("evt_sv2", "payment_intent.processing", "pi_v1", a.ID), time.Now(), stripeSecret), stripeEvent("evt_sv2", "payment_intent.processing", "pi_v1", a.ID)},
		{"stripe clock 4 minutes ahead", "/webhooks/stripe", "Stripe-Signature", stripeSig(stripeEvent("evt_sv3", "payment_intent.processing", "pi_v1", a.ID), time.Now().Add(4*time.Minute), stripeSecret), stripeEvent("evt_sv3", "payment_intent.processing", "pi_v1", a.ID)},
		{"stripe clock 4 minutes behind", "/webhooks/stripe", "Stripe-Signature", stripeSig(stripeEvent("evt_sv4", "payment_intent.processing", "pi_v1", a.ID), time.Now().Add(-4*time.Minute), stripeSecret), stripeEvent("evt_sv4", "payment_intent.processing", "pi_v1", a.ID)},
		{"refpsp clock 4 minutes ahead", "/webhooks/refpsp", refpsp.SignatureHeader, refpsp.Sign(refpspEvent("evt_v3", refpsp.EventSucceeded, a.ID), time.Now().Add(4*time.Minute), refpspSecret), refpspEvent("evt_v3", refpsp.EventSucceeded, a.ID)},
	} {
		if code, res := f.post(t, c.path, c.header, c.sig, c.body); code != 200 || res != string(order.EventWoken) {
			t.Errorf("%s: %d %q, want 200 woken", c.name, code, res)
		}
	}
	if n := f.count(t, "gateway_events"); n != 7 {
		t.Fatalf("accepted events stored %d rows, want 7", n)
	}
}

// TestEventMakesDueAndDuplicateDoesNothing: an event about an order's
// current attempt makes it due now, once; the reconciler's lookup settles
// it; a repeat of the event answers 200 and records nothing more.
func TestEventMakesDueAndDuplicateDoesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	o, a := f.charging(t, "dup-1", "tok_timeout")
	if !f.order(t, o.ID).ReconcileAt.After(time.Now().Add(time.Minute)) {
		t.Fatal("the order is due before any event; the test proves nothing")
	}
	body := refpspEvent("evt_dup", refpsp.EventSucceeded, a.ID)
	if code, res := f.postRefpsp(t, body); code != 200 || res != string(order.EventWoken) {
		t.Fatalf("event: %d %q, want 200 woken", code, res)
	}
	if got := f.order(t, o.ID); got.State != order.StateCharging || got.ReconcileAt.After(time.Now()) {
		t.Fatalf("after the event the order is %s due at %v, want CHARGING and due now", got.State, got.ReconcileAt)
	}
	if n, err := f.rec.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v; want the woken order", n, err)
	}
	if got := f.order(t, o.ID); got.State != order.StatePaid {
		t.Fatalf("order is %s, want PAID (the lookup found the charge)", got.State)
	}
	for range 2 {
		if code, res := f.postRefpsp(t, body); code != 200 || res != string(order.EventDuplicate) {
			t.Fatalf("repeat: %d %q, want 200 duplicate", code, res)
		}
	}
	if n := f.count(t, "gateway_events"); n != 1 {
		t.Fatalf("%d events recorded, want 1", n)
	}
	if n := f.count(t, "order_events WHERE order_id = '"+o.ID+"'"); n != 3 {
		t.Fatalf("%d order events, want 3 (create, charge, succeed)", n)
	}
}

// TestEventIsNotApplied: an event's word settles nothing. A success for a
// charge the gateway's lookup does not (yet) show leaves the order
// CHARGING; a decline for a charge the lookup shows succeeded ends PAID.
func TestEventIsNotApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	hidden, ha := f.charging(t, "blind-1", "tok_slow_60000")
	charged, ca := f.charging(t, "blind-2", "tok_timeout")
	f.postRefpsp(t, refpspEvent("evt_b1", refpsp.EventSucceeded, ha.ID))
	f.postRefpsp(t, refpspEvent("evt_b2", refpsp.EventDeclined, ca.ID))
	if n, err := f.rec.RunOnce(context.Background()); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v; want both woken orders", n, err)
	}
	if got := f.order(t, hidden.ID); got.State != order.StateCharging {
		t.Errorf("order with a success event but no charge found is %s, want CHARGING", got.State)
	}
	if got := f.order(t, charged.ID); got.State != order.StatePaid {
		t.Errorf("order with a decline event and a charge found is %s, want PAID", got.State)
	}
}

// TestOutOfOrderEvents: a decline delivered after the success (or before
// it) changes nothing: whatever order events come in, the lookup decides.
func TestOutOfOrderEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	o, a := f.charging(t, "ooo-1", "tok_timeout")
	f.postRefpsp(t, refpspEvent("evt_o2", refpsp.EventDeclined, a.ID))
	f.postRefpsp(t, refpspEvent("evt_o1", refpsp.EventSucceeded, a.ID))
	if _, err := f.rec.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, res := f.postRefpsp(t, refpspEvent("evt_o3", refpsp.EventDeclined, a.ID)); code != 200 || res != string(order.EventIgnored) {
		t.Fatalf("late decline: %d %q, want 200 ignored", code, res)
	}
	if got := f.order(t, o.ID); got.State != order.StatePaid {
		t.Fatalf("order is %s, want PAID", got.State)
	}
}

// TestEventForUnknownObject: an event about no attempt of ours answers
// 200 (the gateway need not retry it) and changes nothing.
func TestEventForUnknownObject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for i, ref := range []string{uuid.NewString(), "not-one-of-ours"} {
		code, res := f.postRefpsp(t, refpspEvent(fmt.Sprintf("evt_u%d", i), refpsp.EventSucceeded, ref))
		if code != 200 || res != string(order.EventUnknownObject) {
			t.Errorf("event for %s: %d %q, want 200 unknown_object", ref, code, res)
		}
	}
	code, res := f.post(t, "/webhooks/stripe", "Stripe-Signature", "", nil)
	if code != 400 {
		t.Errorf("stripe without anything: %d %q", code, res)
	}
	sb := stripeEvent("evt_su", "payment_intent.succeeded", "pi_nobody", "")
	if code, res := f.post(t, "/webhooks/stripe", "Stripe-Signature", stripeSig(sb, time.Now(), stripeSecret), sb); code != 200 || res != string(order.EventUnknownObject) {
		t.Errorf("stripe event for an unknown PaymentIntent: %d %q, want 200 unknown_object", code, res)
	}
	if n := f.count(t, "review_items"); n != 0 {
		t.Errorf("%d review items for unknown objects", n)
	}
}

// TestSuccessForAnotherAttempt: a success reported for an attempt that is
// not its order's current one moves nothing and raises one possible
// double charge for review, however often it is reported.
func TestSuccessForAnotherAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, order.NewOrder{MerchantReference: "other-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_decline"})
	if err != nil {
		t.Fatal(err)
	}
	_, first, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "other-1-a"})
	if err != nil {
		t.Fatal(err)
	}
	paid, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "other-1-b", PaymentMethod: "tok_ok"})
	if err != nil || paid.State != order.StatePaid {
		t.Fatalf("second attempt: %v %v", paid.State, err)
	}
	for _, id := range []string{"evt_a1", "evt_a2", "evt_a1"} {
		if code, res := f.postRefpsp(t, refpspEvent(id, refpsp.EventSucceeded, first.ID)); code != 200 ||
			(res != string(order.EventReview) && res != string(order.EventDuplicate)) {
			t.Fatalf("success for the declined attempt: %d %q, want 200 review", code, res)
		}
	}
	if n := f.count(t, "review_items WHERE kind = 'possible_double_charge' AND attempt_id = '"+first.ID+"'"); n != 1 {
		t.Fatalf("%d review items, want 1", n)
	}
	if got := f.order(t, o.ID); got.State != order.StatePaid || got.CurrentAttempt == first.ID {
		t.Fatalf("order moved: %s on attempt %s", got.State, got.CurrentAttempt)
	}
	// A decline of the old attempt is no double charge.
	if _, res := f.postRefpsp(t, refpspEvent("evt_a3", refpsp.EventDeclined, first.ID)); res != string(order.EventIgnored) {
		t.Fatalf("decline for the old attempt: %q, want ignored", res)
	}
}

// TestEventBeforeChargeReturns: the simulator's event for a charge whose
// call is still in flight (the simulator holds its answer past Settle's
// deadline) wakes the reconciler, whose lookup settles the order PAID
// before the call has returned; the call's own settle then loses the
// guard, and the customer is charged once.
func TestEventBeforeChargeReturns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{events: sim.Events{Secrets: []string{refpspSecret}},
		gatewayTimeout: 5 * time.Second, simHold: 20 * time.Second})
	f.runReconciler(t)
	ctx := context.Background()
	o, err := f.svc.Create(ctx, merchant, order.NewOrder{MerchantReference: "early-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_timeout"})
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan order.Order, 1)
	go func() {
		got, _, _ := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "early-1-a"})
		returned <- got
	}()
	for {
		select {
		case got := <-returned:
			t.Fatalf("the charge call returned (%s) before the event settled the order; logs:\n%s", got.State, f.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if f.order(t, o.ID).State == order.StatePaid {
			break
		}
	}
	if got := <-returned; got.State != order.StatePaid {
		t.Fatalf("the charge call returned %s, want the order as it stands: PAID", got.State)
	}
	_, attempts, _ := f.store.History(ctx, merchant, o.ID)
	if len(attempts) != 1 || f.sim.Succeeded(attempts[0].ID) != 1 {
		t.Fatalf("%d attempts, %d charges; want one of each", len(attempts), f.sim.Succeeded(attempts[0].ID))
	}
}

// TestStripeEventMatchedByPaymentIntent: a Stripe event whose
// PaymentIntent carries no attempt id in its metadata is matched by the
// PaymentIntent's id, which the attempt records as its gateway charge id.
func TestStripeEventMatchedByPaymentIntent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	o, a := f.charging(t, "stripe-pi-1", "tok_slow_60000")
	if _, err := f.pool.Exec(context.Background(), "UPDATE charge_attempts SET gateway_charge_id = 'pi_known' WHERE id = $1", a.ID); err != nil {
		t.Fatal(err)
	}
	body := stripeEvent("evt_pi1", "payment_intent.succeeded", "pi_known", "")
	if code, res := f.post(t, "/webhooks/stripe", "Stripe-Signature", stripeSig(body, time.Now(), stripeSecret), body); code != 200 || res != string(order.EventWoken) {
		t.Fatalf("event for the attempt's PaymentIntent: %d %q, want 200 woken", code, res)
	}
	if got := f.order(t, o.ID); got.ReconcileAt.After(time.Now()) {
		t.Fatalf("order due at %v, want now", got.ReconcileAt)
	}
	body = stripeEvent("evt_pi2", "charge.refunded", "pi_known", "")
	if code, res := f.post(t, "/webhooks/stripe", "Stripe-Signature", stripeSig(body, time.Now(), stripeSecret), body); code != 200 || res != "ignored_type" {
		t.Fatalf("an event of another type: %d %q, want 200 ignored_type", code, res)
	}
}

// TestEventForOrderInReview: an event about the current attempt of an
// order in NEEDS_REVIEW makes its slow recheck due now; the lookup finds
// the charge and the order is PAID.
func TestEventForOrderInReview(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	ctx := context.Background()
	o, a := f.charging(t, "review-1", "tok_timeout")
	if _, err := f.pool.Exec(ctx, "UPDATE orders SET state = 'NEEDS_REVIEW', reconcile_at = NULL WHERE id = $1", o.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.rec.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.ID); got.State != order.StateNeedsReview {
		t.Fatalf("order in review is %s before any event, want NEEDS_REVIEW (its recheck is an hour away)", got.State)
	}
	if code, res := f.postRefpsp(t, refpspEvent("evt_r1", refpsp.EventSucceeded, a.ID)); code != 200 || res != string(order.EventWoken) {
		t.Fatalf("event: %d %q, want 200 woken", code, res)
	}
	if _, err := f.rec.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.order(t, o.ID); got.State != order.StatePaid {
		t.Fatalf("order is %s after the event, want PAID", got.State)
	}
}

// receiverFunc is an order.EventReceiver of a gateway the listener has
// never heard of.
type receiverFunc func(body []byte, header map[string][]string) (order.GatewayEvent, error)

func (f receiverFunc) ReceiveEvents(body []byte, header map[string][]string) ([]order.GatewayEvent, error) {
	ev, err := f(body, header)
	if err != nil {
		return nil, err
	}
	return []order.GatewayEvent{ev}, nil
}

// TestAnyGatewaysEvents: the listener knows no gateway. It serves each
// receiver it is given at /webhooks/<name>, hands it the body and the
// headers, records what it reads under that name, and answers by the
// receiver's error: unverified is 400 with the connection closed;
// ignored is 200 and malformed 400, on a connection kept open; another
// name's path is 404.
func TestAnyGatewaysEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	_, a := f.charging(t, "acme-1", "tok_slow_60000")
	acme := receiverFunc(func(body []byte, header map[string][]string) (order.GatewayEvent, error) {
		switch http.Header(header).Get("Acme-Verdict") {
		case "unsigned":
			return order.GatewayEvent{}, fmt.Errorf("acme: %w", order.ErrEventSignature)
		case "ignored":
			return order.GatewayEvent{}, order.ErrEventIgnored
		case "garbled":
			return order.GatewayEvent{}, errors.New("acme: unreadable")
		}
		// The gateway's own name for itself is not what the event is
		// recorded under.
		return order.GatewayEvent{Gateway: "acme-inc", ID: "evt_" + string(body), Type: "acme.paid", ObjectID: "obj_1",
			AttemptID: a.ID, Succeeded: true}, nil
	})
	var got []string
	var mu sync.Mutex
	hooks := httptest.NewServer(webhook.New(f.store, webhook.Config{
		Gateways: map[string]order.EventReceiver{"acme": acme},
		OnEvent: func(gateway, eventType, result string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, gateway+" "+eventType+" "+result)
		},
	}, f.logs.Logger()))
	t.Cleanup(hooks.Close)
	for _, tc := range []struct {
		path, verdict string
		code          int
		closed        bool
	}{
		{"/webhooks/acme", "unsigned", 400, true},
		{"/webhooks/acme", "ignored", 200, false},
		{"/webhooks/acme", "garbled", 400, false},
		{"/webhooks/acme", "", 200, false},
		{"/webhooks/refpsp", "", 404, true},
	} {
		req, _ := http.NewRequest(http.MethodPost, hooks.URL+tc.path, strings.NewReader("1"))
		req.Header.Set("Acme-Verdict", tc.verdict)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Close != tc.closed {
			t.Errorf("%s %q: %d (close %v), want %d (close %v)", tc.path, tc.verdict, resp.StatusCode, resp.Close, tc.code, tc.closed)
		}
	}
	want := []string{"acme  bad_signature", "acme  ignored_type", "acme  malformed", "acme acme.paid woken"}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events told %q, want %q", got, want)
	}
	var gw string
	if err := f.pool.QueryRow(context.Background(), "SELECT gateway FROM gateway_events WHERE event_id = 'evt_1'").Scan(&gw); err != nil || gw != "acme" {
		t.Errorf("the event is recorded under %q (%v), want acme", gw, err)
	}
}

// recorder is a webhook.Store that keeps what it is given.
type recorder struct {
	mu  sync.Mutex
	got []order.GatewayEvent
}

func (r *recorder) RecordGatewayEvent(_ context.Context, ev order.GatewayEvent) (order.RecordedEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, ev)
	return order.RecordedEvent{Result: order.EventIgnored}, nil
}

// TestEventRecordedUnderItsAccount: an event that comes to a path whose
// gateway account has another name (settle dev's refpsp account is "sim")
// is recorded under the account's name, through which a dispute is read
// and accepted; any other path's under the path's.
func TestEventRecordedUnderItsAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accounts map[string]string
		want     string
	}{
		{map[string]string{"refpsp": "sim"}, "sim"},
		{nil, "refpsp"},
	} {
		rec := &recorder{}
		var logs logtest.Buffer
		hooks := httptest.NewUnstartedServer(nil)
		t.Cleanup(hooks.Close)
		gw := sim.New(sim.Options{Events: sim.Events{URL: "http://" + hooks.Listener.Addr().String() + "/webhooks/refpsp",
			Secrets: []string{refpspSecret}}})
		hs := httptest.NewServer(gw)
		t.Cleanup(func() { hs.Close(); gw.Close() })
		client := newRefpsp(t, hs.URL, 2*time.Second)
		hooks.Config.Handler = webhook.New(rec, webhook.Config{
			Gateways: map[string]order.EventReceiver{"refpsp": client}, Accounts: tc.accounts,
		}, logs.Logger())
		hooks.Start()
		if res, err := client.Charge(context.Background(), order.ChargeRequest{AttemptID: "att_account", OrderID: "ord_account",
			Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}); res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge = %+v, %v", res, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			rec.mu.Lock()
			got := slices.Clone(rec.got)
			rec.mu.Unlock()
			if len(got) > 0 {
				if got[0].Gateway != tc.want {
					t.Fatalf("accounts %v: the event was recorded under %q, want %q", tc.accounts, got[0].Gateway, tc.want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no event recorded")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
