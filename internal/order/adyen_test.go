package order_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
	"github.com/settlepay/settle/internal/webhook"
)

// adyenFixture is the charge path and a running reconciler charging
// through the Adyen adapter, over HTTP, against the fake Adyen, whose
// signed notifications reach Settle's webhook listener (and through the
// database, the reconciler) unless the test loses them.
type adyenFixture struct {
	svc   *order.Service
	store *postgres.Store
	fake  *adyenfake.Server
	logs  logtest.Buffer

	mu sync.Mutex
	// lost names the event codes of the notifications the network loses
	// ("*": every one); the fake is told they were accepted.
	lost map[string]bool
}

// adyenHorizon is the fixture's no-show horizon: past it a silent attempt
// is technically canceled. It must exceed the gateway timeout (2 s on
// Citus).
var adyenHorizon = 4 * gatewayTimeout

func newAdyenFixture(t *testing.T) *adyenFixture {
	t.Helper()
	const apiKey, account, hmacKey = "AQE_settle_test", "SettleTestECOM", "44782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056"
	f := &adyenFixture{lost: map[string]bool{}}
	f.store = postgres.NewStore(postgrestest.Pool(t))
	var hooks http.Handler
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if f.loses(body) {
			_, _ = io.WriteString(w, "[accepted]")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		hooks.ServeHTTP(w, r)
	}))
	t.Cleanup(listener.Close)
	var err error
	f.fake, err = adyenfake.New(adyenfake.Config{APIKey: apiKey, MerchantAccount: account, HMACKey: hmacKey,
		NotifyURL: listener.URL + "/webhooks/adyen", ClientTimeout: 4 * gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	fakeSrv := httptest.NewServer(f.fake)
	t.Cleanup(func() { fakeSrv.Close(); f.fake.Close() })
	gw, err := adyen.New(adyen.Config{BaseURL: fakeSrv.URL + "/v71", APIKey: apiKey, MerchantAccount: account,
		HMACKeys: []string{hmacKey}, Timeout: gatewayTimeout, Events: f.store, NoShowHorizon: adyenHorizon})
	if err != nil {
		t.Fatal(err)
	}
	hooks = webhook.New(f.store, webhook.Config{Gateways: map[string]order.EventReceiver{"adyen": gw}}, f.logs.Logger())
	gateways := map[string]order.Gateway{"adyen": gw}
	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "adyen", GatewayTimeout: gatewayTimeout, Grace: time.Second, FirstRecheck: 200 * time.Millisecond,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(f.store, gateways, reconcile.Config{
		Schedule:  []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second, 2 * time.Second, 2 * time.Second},
		BatchSize: 10, Concurrency: 2, PollInterval: 100 * time.Millisecond, LookupTimeout: gatewayTimeout,
		NoShowHorizon: adyenHorizon, ActionExpiry: time.Hour,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.store.ListenDue(ctx, f.logs.Logger(), rec.Wake, func() {}) })
	wg.Go(func() { _ = rec.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if errs := f.fake.ContractErrors(); len(errs) > 0 {
			t.Errorf("the fake broke Adyen's contract: %v", errs)
		}
	})
	return f
}

// lose makes the network lose the notifications of eventCode ("*": all).
func (f *adyenFixture) lose(eventCode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost[eventCode] = true
}

func (f *adyenFixture) loses(body []byte) bool {
	var req struct {
		NotificationItems []struct {
			NotificationRequestItem struct {
				EventCode string `json:"eventCode"`
			} `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.NotificationItems) == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[req.NotificationItems[0].NotificationRequestItem.EventCode] || f.lost["*"]
}

// charge creates an order of 12.50 EUR paid with token (capture mode
// capture) and charges it once with the customer present.
func (f *adyenFixture) charge(t *testing.T, token string, capture order.CaptureMode) (order.Order, *order.Attempt) {
	t.Helper()
	ctx := context.Background()
	in := newOrder(uniqueRef(), token)
	in.Amount.Currency, in.Capture = "EUR", capture
	o, err := f.svc.Create(ctx, merchant, in)
	if err != nil {
		t.Fatal(err)
	}
	charged, a, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "req-" + o.ID,
		CustomerPresent: true, ReturnURL: "https://shop.example/return"})
	if err != nil {
		t.Fatalf("Charge(%s): %v", token, err)
	}
	return charged, a
}

// settled waits until the order leaves its unknown (CHARGING) or waiting
// (REQUIRES_ACTION) state, and returns it with how long that took from
// since.
func (f *adyenFixture) settled(t *testing.T, id string, since time.Time) (order.Order, time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := f.store.Order(context.Background(), order.AnyMerchant, id)
		if err != nil {
			t.Fatal(err)
		}
		if o.State != order.StateCharging && o.State != order.StateRequiresAction {
			return o, time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s still %s after 30s; log:\n%s", id, o.State, f.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// payment is the fake's ledger entry of the attempt.
func (f *adyenFixture) payment(t *testing.T, attemptID string) adyenfake.Payment {
	t.Helper()
	var found []adyenfake.Payment
	for _, p := range f.fake.Ledger() {
		if p.Reference == attemptID {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the fake has %d payments with reference %s, want 1: %+v", len(found), attemptID, found)
	}
	return found[0]
}

// TestAdyenAutomaticOrderIsAuthorizedThenCaptured: Settle authorizes
// every Adyen payment with manual capture and captures an automatic
// order itself, in the charge call.
func TestAdyenAutomaticOrderIsAuthorizedThenCaptured(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	o, a := f.charge(t, "tok_ok", order.CaptureAutomatic)
	if o.State != order.StatePaid {
		t.Fatalf("tok_ok: %s, want PAID", o.State)
	}
	eventually(t, func() bool {
		p := f.payment(t, a.ID)
		return p.ManualCapture && p.AmountCaptured == 1250 && len(p.Captures) == 1
	}, "the fake has the payment authorized with manual capture and captured once, in full")
}

// TestAdyenTimeoutSettledByTheNotification: a payment whose answer is
// lost stays CHARGING; its AUTHORISATION notification makes it due, and
// the reconciler's lookup (from the recorded notification) captures it
// under the charge's key and settles it PAID, once.
func TestAdyenTimeoutSettledByTheNotification(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	start := time.Now()
	o, a := f.charge(t, "tok_timeout", order.CaptureAutomatic)
	if o.State != order.StateCharging && o.State != order.StatePaid {
		t.Fatalf("tok_timeout: %s, want CHARGING (or PAID, had the notification won)", o.State)
	}
	o, took := f.settled(t, o.ID, start)
	if o.State != order.StatePaid {
		t.Fatalf("settled %s, want PAID; log:\n%s", o.State, f.logs.String())
	}
	t.Logf("timed-out authorization to PAID by its notification: %s (gateway timeout %s)", took.Round(time.Millisecond), gatewayTimeout)
	eventually(t, func() bool {
		p := f.payment(t, a.ID)
		return p.AmountCaptured == 1250 && len(p.Captures) == 1
	}, "captured once, in full")
}

// TestAdyenLostAuthorisationIsTechnicallyCanceled: the AUTHORISATION
// notification of a payment whose answer was lost never arrives. Past the
// no-show horizon the reconciler's lookup sends a technical cancel by the
// attempt's reference; its TECHNICAL_CANCEL proves that nothing is held,
// and the order is PENDING again, nothing captured.
func TestAdyenLostAuthorisationIsTechnicallyCanceled(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	f.lose("AUTHORISATION")
	start := time.Now()
	o, a := f.charge(t, "tok_timeout", order.CaptureAutomatic)
	if o.State != order.StateCharging {
		t.Fatalf("tok_timeout without its notification: %s, want CHARGING", o.State)
	}
	o, took := f.settled(t, o.ID, start)
	if o.State != order.StatePending {
		t.Fatalf("settled %s, want PENDING; log:\n%s", o.State, f.logs.String())
	}
	if took < adyenHorizon {
		t.Fatalf("settled after %s, before the no-show horizon %s", took, adyenHorizon)
	}
	t.Logf("timed-out authorization, its notification lost, to PENDING by the technical cancel: %s (no-show horizon %s)",
		took.Round(time.Millisecond), adyenHorizon)
	p := f.payment(t, a.ID)
	if p.Status != adyenfake.StatusCancelled || p.AmountCaptured != 0 || len(p.TechnicalCancels) == 0 {
		t.Fatalf("the fake has the payment %s, %d captured, %d technical cancels; want cancelled by a technical cancel, nothing captured",
			p.Status, p.AmountCaptured, len(p.TechnicalCancels))
	}
}

// TestAdyenSilenceGoesToReview: no notification about the attempt ever
// arrives, not even the technical cancel's: Settle cannot know, and a
// person decides once the schedule is spent.
func TestAdyenSilenceGoesToReview(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	f.lose("*")
	start := time.Now()
	o, a := f.charge(t, "tok_timeout", order.CaptureAutomatic)
	o, took := f.settled(t, o.ID, start)
	if o.State != order.StateNeedsReview {
		t.Fatalf("settled %s, want NEEDS_REVIEW; log:\n%s", o.State, f.logs.String())
	}
	t.Logf("timed-out authorization, every notification lost, to NEEDS_REVIEW: %s", took.Round(time.Millisecond))
	// The technical cancel was made: what a person finds at Adyen is a
	// canceled payment, nothing taken.
	if p := f.payment(t, a.ID); p.AmountCaptured != 0 || len(p.TechnicalCancels) == 0 {
		t.Fatalf("the fake has %d captured and %d technical cancels; want nothing captured and a technical cancel", p.AmountCaptured, len(p.TechnicalCancels))
	}
}

// TestAdyenManualCaptureSettledByItsNotification: a capture-manual order
// is AUTHORIZED; its capture is received by Adyen (CAPTURING) and settled
// by its CAPTURE notification.
func TestAdyenManualCaptureSettledByItsNotification(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	o, a := f.charge(t, "tok_ok", order.CaptureManual)
	if o.State != order.StateAuthorized {
		t.Fatalf("tok_ok, capture manual: %s, want AUTHORIZED", o.State)
	}
	_, c, err := f.svc.Capture(context.Background(), order.ForMerchant(merchant), order.ActorAPI, order.CaptureInput{OrderID: o.ID, RequestID: "cap-" + o.ID, AmountMinor: 1000, Final: true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		o, err := f.store.Order(context.Background(), order.AnyMerchant, o.ID)
		return err == nil && o.State == order.StatePaid
	}, "the order PAID by its capture's notification")
	_, got, err := f.store.OrderCapture(context.Background(), o.MerchantID, c.ID)
	if err != nil || got.State != order.CaptureSucceeded {
		t.Fatalf("capture %s: %+v %v, want SUCCEEDED", c.ID, got.State, err)
	}
	if p := f.payment(t, a.ID); p.AmountCaptured != 1000 || len(p.Captures) != 1 {
		t.Fatalf("the fake captured %d in %d captures, want 1000 in 1", p.AmountCaptured, len(p.Captures))
	}
}

// TestAdyenChallengeCompletedPastTheHorizon: an attempt waiting for the
// shopper's 3-D Secure is not a lost answer: past the no-show horizon the
// reconciler's checks leave it waiting (no technical cancel), and when
// the shopper authenticates, its AUTHORISATION notification settles it
// PAID, captured once.
func TestAdyenChallengeCompletedPastTheHorizon(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	o, a := f.charge(t, "tok_3ds", order.CaptureAutomatic)
	if o.State != order.StateRequiresAction || a == nil || a.NextAction.RedirectURL == "" {
		t.Fatalf("tok_3ds: %s with attempt %+v, want REQUIRES_ACTION with a page", o.State, a)
	}
	time.Sleep(adyenHorizon + 2*time.Second) // the reconciler checks it meanwhile
	if got, _ := f.store.Order(context.Background(), order.AnyMerchant, o.ID); got.State != order.StateRequiresAction {
		t.Fatalf("past the horizon the waiting order is %s, want REQUIRES_ACTION; log:\n%s", got.State, f.logs.String())
	}
	if p := f.payment(t, a.ID); len(p.TechnicalCancels) != 0 {
		t.Fatalf("the reconciler technically canceled a challenge the shopper was still on: %+v", p.TechnicalCancels)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(a.NextAction.RedirectURL + "?result=authorised")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, func() bool {
		got, err := f.store.Order(context.Background(), order.AnyMerchant, o.ID)
		return err == nil && got.State == order.StatePaid
	}, "the order PAID once the shopper authenticated")
	eventually(t, func() bool {
		p := f.payment(t, a.ID)
		return p.AmountCaptured == 1250 && len(p.Captures) == 1
	}, "captured once, in full")
}

// TestAdyenActionResultBesideItsNotification: the shopper's return with
// the redirectResult and the AUTHORISATION notification of the same
// challenge (which wakes the reconciler) settle the order once, PAID,
// captured once, whichever comes first.
func TestAdyenActionResultBesideItsNotification(t *testing.T) {
	t.Parallel()
	f := newAdyenFixture(t)
	o, a := f.charge(t, "tok_3ds", order.CaptureAutomatic)
	if o.State != order.StateRequiresAction || a == nil || a.NextAction.RedirectURL == "" {
		t.Fatalf("tok_3ds: %s with attempt %+v, want REQUIRES_ACTION with a page", o.State, a)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(a.NextAction.RedirectURL + "?result=authorised")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: "req-" + o.ID,
		CustomerPresent: true, ActionResult: back.Query().Get("redirectResult")})
	switch {
	case err != nil:
		t.Fatalf("Charge with the action result: %v", err)
	case got.State == order.StateRequiresAction:
		// The gateway's answer did not come within the deadline (a busy
		// machine): unknown, so the order waits for the notification and
		// the reconciler, never failed.
		eventually(t, func() bool {
			o, err := f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
			return err == nil && o.State == order.StatePaid
		}, "PAID after an unknown answer to the action result")
	case got.State != order.StatePaid:
		// Whether the notification settled it first or not.
		t.Fatalf("Charge with the action result = %s; want PAID", got.State)
	}
	time.Sleep(time.Second) // a second capture, if any, would be made meanwhile
	if p := f.payment(t, a.ID); p.AmountCaptured != 1250 || len(p.Captures) != 1 {
		t.Errorf("ledger %+v; want captured once, in full", p)
	}
}

func eventually(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
