package stripe_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// holdFixture is an adapter and the fake it talks to.
type holdFixture struct {
	g    *stripe.Gateway
	fake *stripetest.Server
	url  string
}

func newHoldFixture(t *testing.T, opts stripetest.Options, cfg stripe.Config) holdFixture {
	t.Helper()
	fake, url := newFake(t, opts)
	cfg.BaseURL = url
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return holdFixture{g: newGateway(t, cfg), fake: fake, url: url}
}

// authorize charges token with manual capture, and wants an open hold of
// the whole amount.
func (f holdFixture) authorize(t *testing.T, token string) (order.ChargeRequest, order.Result) {
	t.Helper()
	req := chargeReq(token)
	req.Capture = order.CaptureManual
	res, err := f.g.Charge(context.Background(), req)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold == nil || res.Hold.State != order.HoldOpen ||
		res.Hold.AuthorizedMinor != 1250 || res.Hold.CapturedMinor != 0 {
		t.Fatalf("authorize: %+v (hold %+v), %v; want succeeded with an open hold of 1250", res, res.Hold, err)
	}
	req.GatewayChargeID = res.ChargeID
	return req, res
}

func captureReq(auth order.ChargeRequest, amount int64, final bool) order.CaptureRequest {
	return order.CaptureRequest{
		CaptureID: order.NewID(), OrderID: auth.OrderID, ChargeAttemptID: auth.AttemptID, ChargeID: auth.GatewayChargeID,
		Amount: order.Money{Currency: auth.Amount.Currency, AmountMinor: amount}, Final: final, CreatedAt: time.Now(),
	}
}

func voidReq(auth order.ChargeRequest) order.VoidRequest {
	return order.VoidRequest{VoidID: order.NewID(), OrderID: auth.OrderID, ChargeAttemptID: auth.AttemptID,
		ChargeID: auth.GatewayChargeID, CreatedAt: time.Now()}
}

// want checks an outcome, a decline code and (when h is not nil) the hold.
func want(t *testing.T, what string, res order.Result, err error, outcome order.Outcome, code string, h *order.Hold) {
	t.Helper()
	if res.Outcome != outcome || res.DeclineCode != code {
		t.Fatalf("%s: %s %q, %v; want %s %q", what, res.Outcome, res.DeclineCode, err, outcome, code)
	}
	if outcome == order.OutcomeSucceeded && err != nil {
		t.Errorf("%s: succeeded with an error: %v", what, err)
	}
	if h == nil {
		return
	}
	if res.Hold == nil {
		t.Fatalf("%s: no hold, want %+v", what, *h)
	}
	got := *res.Hold
	got.CaptureBefore = time.Time{}
	if got != *h {
		t.Errorf("%s: hold %+v, want %+v", what, got, *h)
	}
}

// TestAuthorizeManual: a manual charge creates its PaymentIntent with
// capture_method=manual and reads requires_capture as a succeeded charge
// with an open hold, with capture_before from the latest charge; Lookup
// reads it alike. An automatic charge is unchanged: no hold.
func TestAuthorizeManual(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	ctx := context.Background()
	auth, res := f.authorize(t, stripetest.TokenVisa)
	pi, _ := f.fake.Intent(auth.GatewayChargeID)
	if pi.CaptureMethod != "manual" || pi.Status != "requires_capture" || pi.AmountReceived != 0 {
		t.Fatalf("the PaymentIntent is %s, %s, %d received; want manual, requires_capture, 0", pi.CaptureMethod, pi.Status, pi.AmountReceived)
	}
	if !res.Hold.CaptureBefore.Equal(pi.CaptureBefore.Truncate(time.Second)) {
		t.Errorf("capture_before %s, want the charge's %s", res.Hold.CaptureBefore, pi.CaptureBefore)
	}
	if d := time.Until(res.Hold.CaptureBefore); d < 6*24*time.Hour || d > 8*24*time.Hour {
		t.Errorf("capture_before is %s away, want Stripe's 7 days", d)
	}
	got, err := f.g.Lookup(ctx, auth)
	want(t, "lookup", got, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250})
	if !got.Hold.CaptureBefore.Equal(res.Hold.CaptureBefore) {
		t.Errorf("lookup's capture_before %s, want %s", got.Hold.CaptureBefore, res.Hold.CaptureBefore)
	}

	// A lost create's answer: Lookup's replay of the create carries
	// capture_method=manual too (else Stripe would say idempotency_error).
	lost := chargeReq(stripetest.TokenVisa)
	lost.Capture = order.CaptureManual
	got, err = f.g.Lookup(ctx, lost)
	want(t, "lookup of a never-confirmed manual attempt", got, err, order.OutcomeDeclined, "canceled_unconfirmed", nil)
	if got.Hold != nil {
		t.Errorf("a never-authorized attempt has hold %+v", *got.Hold)
	}

	plain := chargeReq(stripetest.TokenVisa)
	res, err = f.g.Charge(ctx, plain)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold != nil {
		t.Fatalf("automatic charge: %+v, %v; want succeeded without a hold", res, err)
	}
	if pi, _ := f.fake.Intent(res.ChargeID); pi.CaptureMethod != "automatic" || pi.Status != "succeeded" {
		t.Errorf("automatic charge's PaymentIntent is %s, %s", pi.CaptureMethod, pi.Status)
	}
}

// TestCapture: a full capture, its replay and lookups; a partial final
// capture releases the rest, and a capture after it is declined; a
// capture over the hold is declined and captures nothing.
func TestCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	ctx := context.Background()

	auth, _ := f.authorize(t, stripetest.TokenVisa)
	full := captureReq(auth, 1250, true)
	res, err := f.g.Capture(ctx, full)
	captured := &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1250}
	want(t, "full capture", res, err, order.OutcomeSucceeded, "", captured)
	res, err = f.g.Capture(ctx, full)
	want(t, "its replay", res, err, order.OutcomeSucceeded, "", captured)
	res, err = f.g.LookupCapture(ctx, full)
	want(t, "its lookup", res, err, order.OutcomeSucceeded, "", captured)
	res, err = f.g.Lookup(ctx, auth)
	want(t, "the charge's lookup", res, err, order.OutcomeSucceeded, "", captured)
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.Captures != 1 || pi.AmountReceived != 1250 {
		t.Errorf("Stripe captured %d times, %d in all; want once, 1250", pi.Captures, pi.AmountReceived)
	}
	keys := 0
	for _, r := range f.fake.Requests() {
		if r.IdempotencyKey == full.CaptureID+":capture" {
			keys++
		}
	}
	if keys != 3 {
		t.Errorf("%d requests carried the capture's key, want 3 (capture, replay, lookup's replay)", keys)
	}
	if caps := f.fake.Captures(); len(caps) != 1 || caps[0].IdempotencyKey != full.CaptureID+":capture" || caps[0].Amount != 1250 || !caps[0].Final {
		t.Errorf("the fake's captures = %+v, want one final capture of 1250 under the capture's key", caps)
	}

	// An answer about another attempt's PaymentIntent is not an answer.
	other := captureReq(auth, 1250, true)
	other.ChargeAttemptID = "another-attempt"
	if res, err := f.g.LookupCapture(ctx, other); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("lookup naming another attempt: %s, %v; want unknown", res.Outcome, err)
	}

	auth, _ = f.authorize(t, stripetest.TokenVisa)
	res, err = f.g.Capture(ctx, captureReq(auth, 500, true))
	want(t, "partial final capture", res, err, order.OutcomeSucceeded, "",
		&order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 500})
	res, err = f.g.Capture(ctx, captureReq(auth, 500, true))
	want(t, "a capture after a final one", res, err, order.OutcomeDeclined, "already_captured", nil)
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.AmountReceived != 500 || pi.AmountCapturable != 0 {
		t.Errorf("Stripe has %d received, %d capturable; want 500, 0", pi.AmountReceived, pi.AmountCapturable)
	}

	auth, _ = f.authorize(t, stripetest.TokenVisa)
	over := captureReq(auth, 1300, true)
	res, err = f.g.Capture(ctx, over)
	want(t, "capture over the hold", res, err, order.OutcomeDeclined, "amount_too_large", nil)
	res, err = f.g.LookupCapture(ctx, over)
	want(t, "its lookup", res, err, order.OutcomeDeclined, "amount_too_large", nil)
	res, err = f.g.Lookup(ctx, auth)
	want(t, "the hold after it", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250})
}

// TestMulticapture: with Config.Multicapture, captures with Final false
// add up on one hold until a final one; without it, such a capture is
// declined before anything is sent.
func TestMulticapture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{Multicapture: true})
	auth, _ := f.authorize(t, stripetest.TokenVisa)
	res, err := f.g.Capture(ctx, captureReq(auth, 500, false))
	want(t, "first of several", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250, CapturedMinor: 500})
	second := captureReq(auth, 700, false)
	res, err = f.g.Capture(ctx, second)
	want(t, "second", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250, CapturedMinor: 1200})
	res, err = f.g.Capture(ctx, captureReq(auth, 100, false))
	want(t, "more than is left", res, err, order.OutcomeDeclined, "amount_too_large", nil)
	res, err = f.g.Capture(ctx, captureReq(auth, 50, true))
	want(t, "final", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1250})
	res, err = f.g.LookupCapture(ctx, second)
	want(t, "lookup of the second", res, err, order.OutcomeSucceeded, "", nil)

	single := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	auth, _ = single.authorize(t, stripetest.TokenVisa)
	res, err = single.g.Capture(ctx, captureReq(auth, 500, false))
	want(t, "not final, without multicapture", res, err, order.OutcomeDeclined, "multicapture_unsupported", nil)
	if n := single.fake.Count("POST", "/capture"); n != 0 {
		t.Errorf("%d captures sent, want none", n)
	}

	// A hold without multicapture (at the fake: created without
	// request_multicapture): Stripe refuses final_capture=false, and
	// nothing is captured.
	plain := holdFixture{g: newGateway(t, stripe.Config{BaseURL: f.url, Timeout: 5 * time.Second}), fake: f.fake}
	auth, _ = plain.authorize(t, stripetest.TokenVisa)
	res, err = f.g.Capture(ctx, captureReq(auth, 500, false))
	want(t, "not final, the hold without multicapture", res, err, order.OutcomeDeclined, "multicapture_unsupported", nil)
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.AmountReceived != 0 || pi.Status != "requires_capture" {
		t.Errorf("Stripe has the intent %s with %d received", pi.Status, pi.AmountReceived)
	}
}

// TestVoid: a void releases the hold; its replay and lookup say so; a
// capture after it is declined; a void after a capture is declined.
func TestVoid(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	ctx := context.Background()

	auth, _ := f.authorize(t, stripetest.TokenVisa)
	v := voidReq(auth)
	voided := &order.Hold{State: order.HoldVoided, AuthorizedMinor: 1250}
	res, err := f.g.Void(ctx, v)
	want(t, "void", res, err, order.OutcomeSucceeded, "", voided)
	res, err = f.g.Void(ctx, v)
	want(t, "its replay", res, err, order.OutcomeSucceeded, "", voided)
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "its lookup", res, err, order.OutcomeSucceeded, "", voided)
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.CancelKey != v.VoidID+":void" {
		t.Errorf("canceled under key %q, want the void's", pi.CancelKey)
	}
	res, err = f.g.Lookup(ctx, auth)
	want(t, "the charge's lookup", res, err, order.OutcomeSucceeded, "", voided)
	c := captureReq(auth, 1250, true)
	res, err = f.g.Capture(ctx, c)
	want(t, "capture after void", res, err, order.OutcomeDeclined, "authorization_voided", nil)
	res, err = f.g.LookupCapture(ctx, c)
	want(t, "its lookup", res, err, order.OutcomeDeclined, "authorization_voided", nil)
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.AmountReceived != 0 || pi.Status != "canceled" {
		t.Errorf("Stripe has the intent %s with %d received", pi.Status, pi.AmountReceived)
	}

	auth, _ = f.authorize(t, stripetest.TokenVisa)
	if res, err := f.g.Capture(ctx, captureReq(auth, 1250, true)); res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("capture: %s, %v", res.Outcome, err)
	}
	v = voidReq(auth)
	res, err = f.g.Void(ctx, v)
	want(t, "void after capture", res, err, order.OutcomeDeclined, "already_captured", nil)
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "its lookup", res, err, order.OutcomeDeclined, "already_captured", nil)
}

// TestHoldExpiry: a hold Stripe let lapse reads as expired; a capture and
// a void of it are declined authorization_expired, at the call and at
// the lookup. Options.AuthorizationExpiry lapses holds by age.
func TestHoldExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	auth, _ := f.authorize(t, stripetest.TokenVisa)
	if !f.fake.Expire(auth.GatewayChargeID) {
		t.Fatal("Expire did nothing")
	}
	expired := &order.Hold{State: order.HoldExpired, AuthorizedMinor: 1250}
	res, err := f.g.Lookup(ctx, auth)
	want(t, "the charge's lookup", res, err, order.OutcomeSucceeded, "", expired)
	c := captureReq(auth, 1250, true)
	res, err = f.g.Capture(ctx, c)
	want(t, "capture", res, err, order.OutcomeDeclined, "authorization_expired", nil)
	res, err = f.g.LookupCapture(ctx, c)
	want(t, "its lookup", res, err, order.OutcomeDeclined, "authorization_expired", nil)
	v := voidReq(auth)
	res, err = f.g.Void(ctx, v)
	want(t, "void", res, err, order.OutcomeDeclined, "authorization_expired", nil)
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "its lookup", res, err, order.OutcomeDeclined, "authorization_expired", nil)

	// By age: the capture reaches a hold past its capture_before, which
	// Stripe refuses with charge_expired_for_capture.
	aged := newHoldFixture(t, stripetest.Options{AuthorizationExpiry: time.Millisecond}, stripe.Config{})
	auth, _ = aged.authorize(t, stripetest.TokenVisa)
	time.Sleep(5 * time.Millisecond)
	res, err = aged.g.Capture(ctx, captureReq(auth, 1250, true))
	want(t, "capture past capture_before", res, err, order.OutcomeDeclined, "authorization_expired", nil)
	res, err = aged.g.Lookup(ctx, auth)
	want(t, "the charge's lookup", res, err, order.OutcomeSucceeded, "", expired)
}

// TestHoldFaults: a capture or void whose answer is lost or a 500 after
// Stripe did it is unknown, never declined; the lookup's replay under
// the same key learns the capture's fate without capturing twice. An
// unreachable Stripe is not sent.
func TestHoldFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The answers are held 3s; only the calls that are to time out are
	// made by an adapter that waits 300ms.
	f := newHoldFixture(t, stripetest.Options{Hold: 3 * time.Second}, stripe.Config{})
	impatient := newGateway(t, stripe.Config{BaseURL: f.url, Timeout: 300 * time.Millisecond})
	waitIdle := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for f.fake.InFlight() > 0 {
			if time.Now().After(deadline) {
				t.Fatal("the fake's held answers never completed")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	auth, _ := f.authorize(t, stripetest.TokenHoldTimeout)
	c := captureReq(auth, 1000, true)
	res, err := impatient.Capture(ctx, c)
	want(t, "capture timing out", res, err, order.OutcomeUnknown, "", nil)
	if err == nil {
		t.Error("an unknown capture without an error")
	}
	res, err = f.g.LookupCapture(ctx, c)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("lookup while the capture is in flight: %s, %v; want unknown", res.Outcome, err)
	}
	waitIdle()
	res, err = f.g.LookupCapture(ctx, c)
	want(t, "lookup after it completed", res, err, order.OutcomeSucceeded, "",
		&order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1000})
	if pi, _ := f.fake.Intent(auth.GatewayChargeID); pi.Captures != 1 {
		t.Errorf("Stripe captured %d times, want once", pi.Captures)
	}

	auth, _ = f.authorize(t, stripetest.TokenHoldTimeout)
	v := voidReq(auth)
	res, err = impatient.Void(ctx, v)
	want(t, "void timing out", res, err, order.OutcomeUnknown, "", nil)
	waitIdle()
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "its lookup", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldVoided, AuthorizedMinor: 1250})

	auth, _ = f.authorize(t, stripetest.TokenHold500)
	c = captureReq(auth, 1250, true)
	res, err = f.g.Capture(ctx, c)
	want(t, "capture answered 500 after it was done", res, err, order.OutcomeUnknown, "", nil)
	res, err = f.g.LookupCapture(ctx, c)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("lookup of a capture whose saved answer is a 500: %s, %v; want unknown, for review", res.Outcome, err)
	}
	auth, _ = f.authorize(t, stripetest.TokenHold500)
	res, err = f.g.Void(ctx, voidReq(auth))
	want(t, "void answered 500 after it was done", res, err, order.OutcomeUnknown, "", nil)

	down := newGateway(t, stripe.Config{BaseURL: "http://" + gatewaytest.ClosedAddr(t), Timeout: time.Second})
	res, err = down.Capture(ctx, captureReq(auth, 1250, true))
	want(t, "capture, Stripe unreachable", res, err, order.OutcomeNotSent, "", nil)
	res, err = down.Void(ctx, voidReq(auth))
	want(t, "void, Stripe unreachable", res, err, order.OutcomeNotSent, "", nil)
	if res, err := down.LookupCapture(ctx, captureReq(auth, 1250, true)); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("lookup, Stripe unreachable: %s, %v; want unknown", res.Outcome, err)
	}
}

// TestLookupNeverSent: a capture or void whose request never reached
// Stripe is executed by the lookup's replay while Stripe keeps its key;
// past the replay window the lookup only reads: not found while nothing
// is captured, and order.ErrLookupExpired when captures cannot be told
// apart.
func TestLookupNeverSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	later := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	auth, _ := f.authorize(t, stripetest.TokenVisa)
	c := captureReq(auth, 1250, true)
	v := voidReq(auth)
	c.CreatedAt, v.CreatedAt = now, now
	later(21 * time.Hour)
	res, err := f.g.LookupCapture(ctx, c)
	want(t, "capture past the window, nothing captured", res, err, order.OutcomeNotFound, "", nil)
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "void past the window, still held", res, err, order.OutcomeNotFound, "", nil)
	if n := f.fake.Count("POST", ""); n != 2 {
		t.Errorf("%d POSTs, want the authorization's 2 only: a lookup past the window only reads", n)
	}

	fresh := captureReq(auth, 1250, true)
	fresh.CreatedAt = now
	res, err = f.g.LookupCapture(ctx, fresh)
	want(t, "capture inside the window, never sent: the replay does it", res, err, order.OutcomeSucceeded, "",
		&order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1250})
	later(21 * time.Hour)
	res, err = f.g.LookupCapture(ctx, c)
	if !errors.Is(err, order.ErrLookupExpired) || res.Outcome != order.OutcomeUnknown {
		t.Errorf("capture past the window, hold captured: %s, %v; want unknown, order.ErrLookupExpired", res.Outcome, err)
	}
	res, err = f.g.LookupVoid(ctx, v)
	want(t, "void of a captured hold", res, err, order.OutcomeDeclined, "already_captured", nil)
}

// observed records the operations an adapter reports.
type observed struct {
	mu  sync.Mutex
	ops []string
}

func (o *observed) Start(ctx context.Context, c gateway.Call) (context.Context, func(order.Result, error)) {
	return ctx, func(order.Result, error) { o.mu.Lock(); o.ops = append(o.ops, c.Op+" "+c.AttemptID); o.mu.Unlock() }
}

// TestHoldObserved: every capture, void and lookup of one reports to the
// Observer once, under its own operation and id.
func TestHoldObserved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obs := &observed{}
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{Observer: obs})
	auth, _ := f.authorize(t, stripetest.TokenVisa)
	c, v := captureReq(auth, 1250, true), voidReq(auth)
	for _, call := range []func() (order.Result, error){
		func() (order.Result, error) { return f.g.Void(ctx, v) },
		func() (order.Result, error) { return f.g.LookupVoid(ctx, v) },
		func() (order.Result, error) { return f.g.Capture(ctx, c) },
		func() (order.Result, error) { return f.g.LookupCapture(ctx, c) },
	} {
		if res, err := call(); res.Outcome == order.OutcomeUnknown {
			t.Errorf("unknown: %v", err)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	wantOps := []string{"charge " + auth.AttemptID, "void " + v.VoidID, "lookup_void " + v.VoidID,
		"capture " + c.CaptureID, "lookup_capture " + c.CaptureID}
	if !slices.Equal(obs.ops, wantOps) {
		t.Errorf("observed %q, want %q", obs.ops, wantOps)
	}
}

// TestHoldEvents: an authorization's events make its attempt due, read
// from the PaymentIntent or from the Charge it is about.
func TestHoldEvents(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stripe.Config{BaseURL: "http://127.0.0.1:1", WebhookSecrets: []string{webhookSecret}})
	charge := func(id, typ string) []byte {
		return []byte(`{"id":"` + id + `","object":"event","type":"` + typ + `","api_version":"2023-10-16","created":1,
			"data":{"object":{"id":"ch_1","object":"charge","amount":1250,"currency":"gbp","payment_intent":"pi_1",
			"metadata":{"attempt_id":"att-1"}}}}`)
	}
	for _, tc := range []struct {
		body []byte
		want order.GatewayEvent
	}{
		{event("evt_1", "payment_intent.amount_capturable_updated", "pi_1", "att-1"),
			order.GatewayEvent{ID: "evt_1", Type: "payment_intent.amount_capturable_updated", ObjectID: "pi_1", AttemptID: "att-1", ChargeID: "pi_1"}},
		{event("evt_2", "payment_intent.canceled", "pi_1", "att-1"),
			order.GatewayEvent{ID: "evt_2", Type: "payment_intent.canceled", ObjectID: "pi_1", AttemptID: "att-1", ChargeID: "pi_1"}},
		{charge("evt_3", "charge.captured"),
			order.GatewayEvent{ID: "evt_3", Type: "charge.captured", ObjectID: "ch_1", AttemptID: "att-1", ChargeID: "pi_1", Succeeded: true}},
		{charge("evt_4", "charge.expired"),
			order.GatewayEvent{ID: "evt_4", Type: "charge.expired", ObjectID: "ch_1", AttemptID: "att-1", ChargeID: "pi_1"}},
	} {
		got, err := receiveOne(g, tc.body, signature(sign(tc.body, time.Now(), webhookSecret)))
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.want.Type, got, err, tc.want)
		}
	}
	bad := []byte(`{"id":"evt_5","object":"event","type":"charge.captured","data":{"object":{"id":"ch_1","object":"charge"}}}`)
	if _, err := receiveOne(g, bad, signature(sign(bad, time.Now(), webhookSecret))); err == nil || errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("a charge event without its PaymentIntent: %v, want an error of its own", err)
	}
}

// TestAuthorizeAfterChallengeOrTimeout: a manual charge that asks for 3-D
// Secure is authorized once the customer passes it, and one whose confirm
// timed out is found authorized by the lookup; both then capture.
func TestAuthorizeAfterChallengeOrTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoldFixture(t, stripetest.Options{Hold: 1500 * time.Millisecond}, stripe.Config{})
	impatient := newGateway(t, stripe.Config{BaseURL: f.url, Timeout: 300 * time.Millisecond})

	req := chargeReq(stripetest.TokenRequiresAction)
	req.Capture, req.CustomerPresent, req.ReturnURL = order.CaptureManual, true, "https://checkout.example/return"
	res, err := f.g.Charge(ctx, req)
	if res.Outcome != order.OutcomeRequiresAction {
		t.Fatalf("charge = %s, %v; want requires_action", res.Outcome, err)
	}
	req.GatewayChargeID = res.ChargeID
	if !f.fake.Authenticate(res.ChargeID, true) {
		t.Fatal("the challenge could not be passed")
	}
	res, err = f.g.Lookup(ctx, req)
	want(t, "lookup after the challenge", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250})
	res, err = f.g.Capture(ctx, captureReq(req, 1250, true))
	want(t, "capture", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1250})

	req = chargeReq(stripetest.TokenTimeout)
	req.Capture = order.CaptureManual
	res, err = impatient.Charge(ctx, req)
	want(t, "authorization timing out", res, err, order.OutcomeUnknown, "", nil)
	req.GatewayChargeID = res.ChargeID
	res, err = f.g.Lookup(ctx, req)
	want(t, "its lookup", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250})
	res, err = f.g.Capture(ctx, captureReq(req, 600, true))
	want(t, "capture", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 600})
}

// TestHoldMinorUnits: a hold's amounts are in ISO 4217 minor units, not
// Stripe's (ISK counts hundredths at Stripe).
func TestHoldMinorUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHoldFixture(t, stripetest.Options{}, stripe.Config{})
	req := chargeReq(stripetest.TokenVisa)
	req.Capture, req.Amount = order.CaptureManual, order.Money{Currency: "ISK", AmountMinor: 1250}
	res, err := f.g.Charge(ctx, req)
	want(t, "authorize", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250})
	req.GatewayChargeID = res.ChargeID
	res, err = f.g.Capture(ctx, captureReq(req, 1000, true))
	want(t, "capture", res, err, order.OutcomeSucceeded, "", &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1000})
	if pi, _ := f.fake.Intent(req.GatewayChargeID); pi.AmountReceived != 100000 {
		t.Errorf("Stripe received %d, want 100000 (1000 krónur in hundredths)", pi.AmountReceived)
	}
}
