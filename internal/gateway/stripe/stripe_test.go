package stripe_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
)

const secretKey = "sk_test_SettleSecret4242" // stripe-mock wants three parts

// newGateway returns a Gateway for cfg, with the test key unless cfg has one.
func newGateway(t *testing.T, cfg stripe.Config) *stripe.Gateway {
	t.Helper()
	if cfg.SecretKey == "" {
		cfg.SecretKey = secretKey
	}
	g, err := stripe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newFake starts a Stripe fake for the test.
func newFake(t *testing.T, opts stripetest.Options) (*stripetest.Server, string) {
	t.Helper()
	fake := stripetest.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

func chargeReq(token string) order.ChargeRequest {
	id := order.NewID()
	return order.ChargeRequest{
		AttemptID:         id,
		OrderID:           "ord-" + id,
		MerchantReference: "inv-" + id,
		Amount:            order.Money{Currency: "GBP", AmountMinor: 1250},
		PaymentMethod:     token,
		CreatedAt:         time.Now(),
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  stripe.Config
		ok   bool
	}{
		{"defaults", stripe.Config{SecretKey: secretKey}, true},
		{"everything", stripe.Config{SecretKey: secretKey, BaseURL: "http://127.0.0.1:12111/", Timeout: time.Second,
			MaxNetworkRetries: 3, ReplayWindow: 23 * time.Hour, Logger: slog.Default(), Now: time.Now}, true},
		{"no key", stripe.Config{}, false},
		{"key with a line break", stripe.Config{SecretKey: secretKey + "\n"}, false},
		{"relative base URL", stripe.Config{SecretKey: secretKey, BaseURL: "api.stripe.com"}, false},
		{"other scheme", stripe.Config{SecretKey: secretKey, BaseURL: "ftp://api.stripe.com"}, false},
		{"credentials in base URL", stripe.Config{SecretKey: secretKey, BaseURL: "https://user:hunter2@api.stripe.com"}, false},
		{"unparseable base URL", stripe.Config{SecretKey: secretKey, BaseURL: "http://user:hunter2@[::1"}, false},
		{"negative timeout", stripe.Config{SecretKey: secretKey, Timeout: -time.Second}, false},
		{"negative retries", stripe.Config{SecretKey: secretKey, MaxNetworkRetries: -1}, false},
		{"replay window past Stripe's retention", stripe.Config{SecretKey: secretKey, ReplayWindow: 24 * time.Hour}, false},
		{"negative replay window", stripe.Config{SecretKey: secretKey, ReplayWindow: -time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stripe.New(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("New() error = %v, want ok: %t", err, tt.ok)
			}
			if err != nil && (strings.Contains(err.Error(), secretKey) || strings.Contains(err.Error(), "hunter2")) {
				t.Errorf("error %q contains a secret", err)
			}
		})
	}
}

// seen is one request a raw test server received.
type seen struct {
	method, path, auth, idem string
	form                     map[string][]string
}

// recorder is a raw Stripe stand-in: answer says what to answer to each
// request, and every request is recorded.
type recorder struct {
	mu     sync.Mutex
	got    []seen
	answer func(r *http.Request) (int, string)
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm() // a bad form reads as empty, which the test then reports
	rec.mu.Lock()
	rec.got = append(rec.got, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.PostForm})
	rec.mu.Unlock()
	status, body := rec.answer(r)
	if status == http.StatusFound {
		w.Header().Set("Location", "/elsewhere")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.got...)
}

func newRecorder(t *testing.T, answer func(r *http.Request) (int, string)) (*recorder, string) {
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

const piFields = `"object":"payment_intent","amount":1250,"currency":"gbp",`

func intentBody(id, status string) string {
	return `{"id":"` + id + `",` + piFields + `"status":"` + status + `"}`
}

func TestChargeCreatesThenConfirms(t *testing.T) {
	t.Parallel()
	rec, url := newRecorder(t, func(r *http.Request) (int, string) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents":
			return 200, intentBody("pi_123", "requires_confirmation")
		case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents/pi_123/confirm":
			return 200, intentBody("pi_123", "succeeded")
		case r.Method == http.MethodGet && r.URL.Path == "/v1/payment_intents/pi_123":
			return 200, intentBody("pi_123", "succeeded")
		}
		return 404, `{"error":{"type":"invalid_request_error"}}`
	})
	g := newGateway(t, stripe.Config{BaseURL: url + "/", MaxNetworkRetries: 2})
	req := chargeReq("pm_card_visa")

	res, err := g.Charge(t.Context(), req)
	if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "pi_123"}); res != want || err != nil {
		t.Fatalf("Charge = %+v, %v; want %+v", res, err, want)
	}
	req.GatewayChargeID = res.ChargeID
	if res, err := g.Lookup(t.Context(), req); err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != "pi_123" {
		t.Fatalf("Lookup = %+v, %v; want succeeded pi_123", res, err)
	}

	got := rec.requests()
	want := []struct {
		method, path, idem string
		form               map[string]string
	}{
		{http.MethodPost, "/v1/payment_intents", req.AttemptID + ":create", map[string]string{
			"amount": "1250", "currency": "gbp", "payment_method": "pm_card_visa", "payment_method_types[0]": "card",
			"metadata[order_id]": req.OrderID, "metadata[attempt_id]": req.AttemptID,
			"metadata[merchant_reference]": req.MerchantReference,
		}},
		{http.MethodPost, "/v1/payment_intents/pi_123/confirm", req.AttemptID + ":confirm", map[string]string{"off_session": "true"}},
		// The lookup only reads.
		{http.MethodGet, "/v1/payment_intents/pi_123", "", map[string]string{}},
	}
	if len(got) != len(want) {
		t.Fatalf("server saw %+v, want %d requests", got, len(want))
	}
	for i, w := range want {
		s := got[i]
		if s.method != w.method || s.path != w.path {
			t.Errorf("request %d = %s %s, want %s %s", i, s.method, s.path, w.method, w.path)
		}
		if s.auth != "Bearer "+secretKey {
			t.Errorf("request %d: Authorization = %q", i, s.auth)
		}
		if s.idem != w.idem {
			t.Errorf("request %d: Idempotency-Key = %q, want %q", i, s.idem, w.idem)
		}
		if len(s.form) != len(w.form) {
			t.Errorf("request %d: parameters = %v, want exactly %v", i, s.form, w.form)
		}
		for k, v := range w.form {
			if f := s.form[k]; len(f) != 1 || f[0] != v {
				t.Errorf("request %d: %s = %q, want %q", i, k, f, v)
			}
		}
	}
}

func TestChargeOutcomes(t *testing.T) {
	t.Parallel()
	_, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 2 * time.Second})
	tests := []struct {
		token       string
		outcome     order.Outcome
		declineCode string
		chargeID    bool
		err         bool
	}{
		{stripetest.TokenVisa, order.OutcomeSucceeded, "", true, false},
		{stripetest.TokenDeclined, order.OutcomeDeclined, "generic_decline", true, false},
		{stripetest.TokenInsufficientFunds, order.OutcomeDeclined, "insufficient_funds", true, false},
		{stripetest.TokenRequiresAction, order.OutcomeDeclined, order.DeclineAuthenticationRequired, true, false},
		{stripetest.TokenServerErrorAfterCreate, order.OutcomeUnknown, "", true, true},
		{stripetest.TokenProcessing, order.OutcomeUnknown, "", true, true},
		// Stripe refused the only confirm sent, unexecuted: nothing moved.
		{stripetest.TokenRateLimited, order.OutcomeNotSent, "", true, true},
		// The create's answer was lost: the id is not known.
		{stripetest.TokenCreateDropped, order.OutcomeUnknown, "", false, true},
		{"pm_no_such_method", order.OutcomeDeclined, "rejected_resource_missing", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			t.Parallel()
			res, err := g.Charge(t.Context(), chargeReq(tt.token))
			if res.Outcome != tt.outcome || res.DeclineCode != tt.declineCode || (res.ChargeID != "") != tt.chargeID || (err != nil) != tt.err {
				t.Errorf("Charge = %+v, %v; want %s %q, charge id: %t, error: %t", res, err, tt.outcome, tt.declineCode, tt.chargeID, tt.err)
			}
		})
	}
}

// TestAnswers checks the classification of answers the fake does not give:
// to the create, and to the confirm of a created PaymentIntent.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const otherAttempt = `"metadata":{"attempt_id":"someone-else"},`
	tests := []struct {
		name   string
		step   string // the step that gets the answer: "create" or "confirm"
		status int
		body   string

		outcome     order.Outcome
		code        string
		loggedError bool
	}{
		{"succeeded", "confirm", 200, intentBody("pi_1", "succeeded"), order.OutcomeSucceeded, "", false},
		{"requires_payment_method with a decline", "confirm", 200,
			`{"id":"pi_1",` + piFields + `"status":"requires_payment_method","last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"do_not_honor"}}`,
			order.OutcomeDeclined, "do_not_honor", false},
		{"requires_payment_method bare", "confirm", 200, intentBody("pi_1", "requires_payment_method"), order.OutcomeDeclined, "requires_payment_method", false},
		{"canceled", "confirm", 200, intentBody("pi_1", "canceled"), order.OutcomeDeclined, "canceled", false},
		{"processing", "confirm", 200, intentBody("pi_1", "processing"), order.OutcomeUnknown, "", false},
		{"requires_capture", "confirm", 200, intentBody("pi_1", "requires_capture"), order.OutcomeUnknown, "", false},
		{"another amount", "confirm", 200, `{"id":"pi_1","amount":999,"currency":"gbp","status":"succeeded"}`, order.OutcomeUnknown, "", false},
		{"another attempt", "confirm", 200, `{"id":"pi_1",` + piFields + otherAttempt + `"status":"succeeded"}`, order.OutcomeUnknown, "", false},
		{"no id", "confirm", 200, `{` + piFields + `"status":"succeeded"}`, order.OutcomeUnknown, "", false},
		{"garbage", "confirm", 200, `<html>oops</html>`, order.OutcomeUnknown, "", false},
		{"card error", "confirm", 402, `{"error":{"type":"card_error","code":"expired_card","payment_intent":{"id":"pi_1"}}}`,
			order.OutcomeDeclined, "expired_card", false},
		{"unexpected state, succeeded", "confirm", 400,
			`{"error":{"type":"invalid_request_error","code":"payment_intent_unexpected_state","payment_intent":` + intentBody("pi_1", "succeeded") + `}}`,
			order.OutcomeSucceeded, "", false},
		{"unexpected state, canceled", "confirm", 400,
			`{"error":{"type":"invalid_request_error","code":"payment_intent_unexpected_state","payment_intent":` + intentBody("pi_1", "canceled") + `}}`,
			order.OutcomeDeclined, "canceled", false},
		{"idempotency error", "confirm", 400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`,
			order.OutcomeUnknown, "", true},
		{"key in use", "confirm", 409, `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use"}}`, order.OutcomeUnknown, "", false},
		{"confirm rate limited", "confirm", 429, `{"error":{"type":"invalid_request_error","code":"rate_limit"}}`, order.OutcomeNotSent, "", false},
		{"create rate limited", "create", 429, `{"error":{"type":"invalid_request_error","code":"rate_limit"}}`, order.OutcomeNotSent, "", false},
		{"server error", "confirm", 500, `{"error":{"type":"api_error"}}`, order.OutcomeUnknown, "", false},
		{"create server error", "create", 500, `{"error":{"type":"api_error"}}`, order.OutcomeUnknown, "", false},
		{"unavailable", "confirm", 503, `{"error":{"type":"api_error"}}`, order.OutcomeUnknown, "", false},
		{"unknown parameter", "create", 400, `{"error":{"type":"invalid_request_error","code":"parameter_unknown","param":"bogus"}}`,
			order.OutcomeRefused, "", true},
		{"no such payment method", "create", 400, `{"error":{"type":"invalid_request_error","code":"resource_missing","param":"payment_method"}}`,
			order.OutcomeDeclined, "rejected_resource_missing", false},
		{"amount too small", "create", 400, `{"error":{"type":"invalid_request_error","code":"amount_too_small","param":"amount"}}`,
			order.OutcomeDeclined, "rejected_amount_too_small", false},
		{"unauthorized", "create", 401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: ` + secretKey + `"}}`,
			order.OutcomeRefused, "", true},
		{"confirm unauthorized", "confirm", 401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`,
			order.OutcomeRefused, "", true},
		{"forbidden", "create", 403, `{"error":{"type":"invalid_request_error","message":"The provided key does not have the required permissions"}}`,
			order.OutcomeRefused, "", true},
		{"error without an error object", "create", 404, `{"nothing":"here"}`, order.OutcomeUnknown, "", false},
		{"redirect", "create", 302, ``, order.OutcomeUnknown, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, url := newRecorder(t, func(r *http.Request) (int, string) {
				if tt.step == "create" || strings.HasSuffix(r.URL.Path, "/confirm") {
					return tt.status, tt.body
				}
				return 200, intentBody("pi_1", "requires_confirmation")
			})
			var logs logtest.Buffer
			g := newGateway(t, stripe.Config{BaseURL: url, Logger: logs.Logger()})

			res, err := g.Charge(t.Context(), chargeReq("pm_card_visa"))
			t.Logf("charge: %+v %v", res, err)
			if res.Outcome != tt.outcome || (tt.outcome == order.OutcomeDeclined && res.DeclineCode != tt.code) {
				t.Errorf("Charge = %+v, %v; want %s %q", res, err, tt.outcome, tt.code)
			}
			if definite := res.Outcome == order.OutcomeSucceeded || res.Outcome == order.OutcomeDeclined; !definite && err == nil {
				t.Errorf("Charge: %s without an error", res.Outcome)
			}
			if tt.step == "confirm" && res.ChargeID != "pi_1" {
				t.Errorf("Charge: ChargeID = %q, want the created PaymentIntent pi_1", res.ChargeID)
			}
			checkSecret(t, err)
			logged := strings.Contains(logs.String(), "level=ERROR")
			if logged != tt.loggedError {
				t.Errorf("logged at ERROR: %t, want %t; logs:\n%s", logged, tt.loggedError, logs.String())
			}
			if strings.Contains(logs.String(), secretKey) {
				t.Errorf("logs contain the secret key:\n%s", logs.String())
			}
		})
	}
}

// TestLookupReadsTheIntent checks how Lookup reads a retrieved
// PaymentIntent, and what it sends: a GET, and a cancel only for an intent
// never confirmed. It never confirms.
func TestLookupReadsTheIntent(t *testing.T) {
	t.Parallel()
	unexpected := func(status string) string {
		return `{"error":{"type":"invalid_request_error","code":"payment_intent_unexpected_state","payment_intent":` + intentBody("pi_1", status) + `}}`
	}
	tests := []struct {
		name        string
		get         string // the retrieved intent's status
		cancel      func() (int, string)
		outcome     order.Outcome // unknown means an error
		code        string
		wantCancels int
		expired     bool // CancelAwaitingAction
	}{
		{name: "succeeded", get: "succeeded", outcome: order.OutcomeSucceeded},
		{name: "canceled", get: "canceled", outcome: order.OutcomeDeclined, code: "canceled"},
		{name: "processing", get: "processing", outcome: order.OutcomeUnknown},
		{name: "requires_capture", get: "requires_capture", outcome: order.OutcomeUnknown},
		{name: "never confirmed", get: "requires_confirmation", cancel: func() (int, string) { return 200, intentBody("pi_1", "canceled") },
			outcome: order.OutcomeDeclined, code: "canceled_unconfirmed", wantCancels: 1},
		{name: "requires_payment_method without an error", get: "requires_payment_method",
			cancel:  func() (int, string) { return 200, intentBody("pi_1", "canceled") },
			outcome: order.OutcomeDeclined, code: "canceled_unconfirmed", wantCancels: 1},
		{name: "requires_action", get: "requires_action", outcome: order.OutcomeRequiresAction},
		{name: "requires_action past its expiry", get: "requires_action", cancel: func() (int, string) { return 200, intentBody("pi_1", "canceled") },
			outcome: order.OutcomeDeclined, code: "requires_action", wantCancels: 1, expired: true},
		{name: "completed as its expiry cancels", get: "requires_action", cancel: func() (int, string) { return 400, unexpected("succeeded") },
			outcome: order.OutcomeSucceeded, wantCancels: 1, expired: true},
		{name: "a confirm won the race with the cancel", get: "requires_confirmation",
			cancel:  func() (int, string) { return 400, unexpected("succeeded") },
			outcome: order.OutcomeSucceeded, wantCancels: 1},
		{name: "the cancel found it processing", get: "requires_confirmation",
			cancel:  func() (int, string) { return 400, unexpected("processing") },
			outcome: order.OutcomeUnknown, wantCancels: 1},
		{name: "the cancel failed", get: "requires_confirmation",
			cancel:  func() (int, string) { return 500, `{"error":{"type":"api_error"}}` },
			outcome: order.OutcomeUnknown, wantCancels: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, url := newRecorder(t, func(r *http.Request) (int, string) {
				switch {
				case r.Method == http.MethodGet:
					return 200, intentBody("pi_1", tt.get)
				case strings.HasSuffix(r.URL.Path, "/cancel") && tt.cancel != nil:
					return tt.cancel()
				}
				return 400, `{"error":{"type":"invalid_request_error","message":"not expected"}}`
			})
			g := newGateway(t, stripe.Config{BaseURL: url})
			req := chargeReq("pm_card_visa")
			req.GatewayChargeID = "pi_1"
			req.CancelAwaitingAction = tt.expired
			res, err := g.Lookup(t.Context(), req)
			if tt.outcome == order.OutcomeUnknown {
				if err == nil || res.Outcome != order.OutcomeUnknown {
					t.Errorf("Lookup = %+v, %v; want an error", res, err)
				}
			} else if err != nil || res.Outcome != tt.outcome || res.DeclineCode != tt.code {
				t.Errorf("Lookup = %+v, %v; want %s %q", res, err, tt.outcome, tt.code)
			}
			if res.ChargeID != "pi_1" {
				t.Errorf("Lookup: ChargeID = %q, want pi_1", res.ChargeID)
			}
			cancels := 0
			for _, s := range rec.requests() {
				switch {
				case s.method == http.MethodPost && strings.HasSuffix(s.path, "/cancel"):
					cancels++
				case s.method != http.MethodGet:
					t.Errorf("Lookup sent %s %s: a lookup only reads and cancels", s.method, s.path)
				}
			}
			if cancels != tt.wantCancels {
				t.Errorf("Lookup sent %d cancels, want %d", cancels, tt.wantCancels)
			}
		})
	}
}

func checkSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secretKey) {
		t.Errorf("error %q contains the secret key", err)
	}
}

// TestSecretKeyNeverLeaks sends a key the server rejects and quotes back:
// the charge is refused as a configuration error, and the key is nowhere.
func TestSecretKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{SecretKey: "sk_test_the_right_one"})
	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{BaseURL: url, SecretKey: secretKey, MaxNetworkRetries: 2, Logger: logs.Logger()})
	req := chargeReq(stripetest.TokenVisa)

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeRefused || err == nil {
		t.Errorf("Charge = %+v, %v; want refused with an error", res, err)
	}
	checkSecret(t, err)
	if _, err := g.Lookup(t.Context(), req); err == nil {
		t.Error("Lookup with a rejected key: err = nil, want an error")
	} else {
		checkSecret(t, err)
	}
	if strings.Contains(logs.String(), secretKey) {
		t.Errorf("logs contain the secret key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "[redacted]") {
		t.Errorf("logs do not show stripe-go's (scrubbed) report of the 401:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the refusal of the key is not logged at ERROR:\n%s", logs.String())
	}
	if n := len(fake.Ledger()); n != 0 {
		t.Errorf("the fake holds %d PaymentIntents, want none", n)
	}
}

// checkNeverCharged checks that the fake never charged the attempt, and
// that no confirm was sent after the first Charge's.
func checkNeverCharged(t *testing.T, fake *stripetest.Server, attemptID string) {
	t.Helper()
	for _, pi := range fake.Intents(attemptID) {
		if pi.Status == "succeeded" || pi.Confirmations > 0 {
			t.Errorf("PaymentIntent %s of the attempt is %s after %d confirms; want it never confirmed", pi.ID, pi.Status, pi.Confirmations)
		}
	}
}

// TestCrashBetweenCreateAndConfirm: the create executed but its answer was
// lost, so no confirm was sent and Settle does not know the id. Lookup
// learns the id by replaying the unconfirmed create, and proves the attempt
// uncharged by canceling it; however often it is asked, and even when the
// charge request is sent again, nothing is charged.
func TestCrashBetweenCreateAndConfirm(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	req := chargeReq(stripetest.TokenCreateDropped)

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeUnknown || res.ChargeID != "" || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown without an id", res, err)
	}
	pis := fake.Intents(req.AttemptID)
	if len(pis) != 1 || pis[0].Status != "requires_confirmation" {
		t.Fatalf("PaymentIntents of the attempt = %+v; want one, unconfirmed", pis)
	}
	confirms := fake.Count(http.MethodPost, "/confirm")

	for i, code := range []string{"canceled_unconfirmed", "canceled", "canceled"} {
		res, err = g.Lookup(t.Context(), req)
		if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != code || res.ChargeID != pis[0].ID {
			t.Fatalf("Lookup %d = %+v, %v; want declined %s for %s", i, res, err, code, pis[0].ID)
		}
		req.GatewayChargeID = res.ChargeID // as the reconciler records it
	}
	if n := fake.Count(http.MethodPost, "/confirm"); n != confirms {
		t.Errorf("lookups sent %d confirms; a lookup must never confirm", n-confirms)
	}
	// The charge request, sent again late, cannot charge a canceled intent.
	req.GatewayChargeID = ""
	if res, err := g.Charge(t.Context(), req); res.Outcome == order.OutcomeSucceeded {
		t.Errorf("late Charge = %+v, %v; want no charge", res, err)
	}
	if pis := fake.Intents(req.AttemptID); len(pis) != 1 || pis[0].Status != "canceled" {
		t.Errorf("PaymentIntents of the attempt = %+v; want the one, canceled", pis)
	}
	checkNeverCharged(t, fake, req.AttemptID)
}

// TestLookupOfAnAttemptNeverSent: the replayed create creates the intent
// now, unconfirmed, and Lookup cancels it. No money moves.
func TestLookupOfAnAttemptNeverSent(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	req := chargeReq(stripetest.TokenVisa)
	res, err := g.Lookup(t.Context(), req)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != "canceled_unconfirmed" {
		t.Fatalf("Lookup = %+v, %v; want declined canceled_unconfirmed", res, err)
	}
	if n := fake.Count(http.MethodPost, "/confirm"); n != 0 {
		t.Errorf("Lookup sent %d confirms", n)
	}
	checkNeverCharged(t, fake, req.AttemptID)
}

// TestUnknownsSettleOnceStripeKnows: a confirm answered with a saved 500,
// or an intent still processing, settles at the first lookup after Stripe
// knows: the lookup reads the intent, it does not replay the confirm.
func TestUnknownsSettleOnceStripeKnows(t *testing.T) {
	t.Parallel()
	t.Run("saved 500", func(t *testing.T) {
		t.Parallel()
		fake, url := newFake(t, stripetest.Options{})
		g := newGateway(t, stripe.Config{BaseURL: url})
		req := chargeReq(stripetest.TokenServerErrorAfterCreate)
		res, err := g.Charge(t.Context(), req)
		if res.Outcome != order.OutcomeUnknown || res.ChargeID == "" || err == nil {
			t.Fatalf("Charge = %+v, %v; want unknown with the PaymentIntent's id", res, err)
		}
		id := res.ChargeID
		// With the id recorded, and without it (the settle was lost too).
		for _, known := range []string{id, ""} {
			req.GatewayChargeID = known
			if res, err := g.Lookup(t.Context(), req); err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != id {
				t.Fatalf("Lookup (id %q) = %+v, %v; want succeeded %s", known, res, err, id)
			}
		}
		if n := fake.Count(http.MethodPost, "/confirm"); n != 1 {
			t.Errorf("the fake saw %d confirms, want the charge's one", n)
		}
	})
	t.Run("processing", func(t *testing.T) {
		t.Parallel()
		fake, url := newFake(t, stripetest.Options{})
		g := newGateway(t, stripe.Config{BaseURL: url})
		req := chargeReq(stripetest.TokenProcessing)
		res, err := g.Charge(t.Context(), req)
		if res.Outcome != order.OutcomeUnknown || res.ChargeID == "" || err == nil {
			t.Fatalf("Charge = %+v, %v; want unknown with the PaymentIntent's id", res, err)
		}
		req.GatewayChargeID = res.ChargeID
		if res, err := g.Lookup(t.Context(), req); err == nil || res.Outcome != order.OutcomeUnknown || res.ChargeID != req.GatewayChargeID {
			t.Fatalf("Lookup while processing = %+v, %v; want unknown with the id, and an error", res, err)
		}
		if !fake.Succeed(req.GatewayChargeID) {
			t.Fatal("the fake's intent is not processing")
		}
		if res, err := g.Lookup(t.Context(), req); err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Lookup once succeeded = %+v, %v; want succeeded", res, err)
		}
		if n, c := fake.Count(http.MethodPost, "/confirm"), fake.Count(http.MethodPost, "/cancel"); n != 1 || c != 0 {
			t.Errorf("the fake saw %d confirms and %d cancels, want the charge's one confirm and no cancel", n, c)
		}
	})
}

// TestTimeoutThenLookup is the reconciler's path for Stripe: the confirm
// times out after Stripe executed it; a lookup reads the intent by the id
// the create told, even while the confirm's answer is still held.
func TestTimeoutThenLookup(t *testing.T) {
	t.Parallel()
	// The timeout covers the create and the confirm: long enough for both
	// to reach the fake on a loaded machine, and the hold past it.
	fake, url := newFake(t, stripetest.Options{Hold: 6 * time.Second})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 2 * time.Second})
	req := chargeReq(stripetest.TokenTimeout)

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeUnknown || res.ChargeID == "" || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown with the PaymentIntent's id", res, err)
	}
	req.GatewayChargeID = res.ChargeID
	res, err = g.Lookup(t.Context(), req)
	if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: req.GatewayChargeID}); res != want || err != nil {
		t.Fatalf("Lookup = %+v, %v; want %+v", res, err, want)
	}
	waitIdle(t, fake)
	// A late Charge of the same attempt gets the saved answers: the one.
	if again, err := g.Charge(t.Context(), req); again != res || err != nil {
		t.Errorf("Charge again = %+v, %v; want %+v", again, err, res)
	}
	if pis := fake.Intents(req.AttemptID); len(pis) != 1 || pis[0].Confirmations != 1 {
		t.Errorf("PaymentIntents of the attempt = %+v, want one, confirmed once", pis)
	}
}

func waitIdle(t *testing.T, fake *stripetest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fake.InFlight() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fake still has a request in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNetworkRetriesReuseTheKey drops the connection after Stripe
// confirmed: stripe-go's retry carries the same key and gets the saved
// answer; without retries the outcome is unknown until a lookup.
func TestNetworkRetriesReuseTheKey(t *testing.T) {
	t.Parallel()
	t.Run("with retries", func(t *testing.T) {
		t.Parallel()
		fake, url := newFake(t, stripetest.Options{})
		g := newGateway(t, stripe.Config{BaseURL: url, MaxNetworkRetries: 2})
		req := chargeReq(stripetest.TokenDropAfterCreate)
		res, err := g.Charge(t.Context(), req)
		pis := fake.Intents(req.AttemptID)
		if len(pis) != 1 || pis[0].Confirmations != 1 || fake.Count(http.MethodPost, "/confirm") != 2 {
			t.Fatalf("PaymentIntents %+v from %d confirms; want one, confirmed once, from two", pis, fake.Count(http.MethodPost, "/confirm"))
		}
		if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pis[0].ID}); res != want || err != nil {
			t.Fatalf("Charge = %+v, %v; want %+v", res, err, want)
		}
	})
	t.Run("without retries", func(t *testing.T) {
		t.Parallel()
		fake, url := newFake(t, stripetest.Options{})
		g := newGateway(t, stripe.Config{BaseURL: url})
		req := chargeReq(stripetest.TokenDropAfterCreate)
		res, err := g.Charge(t.Context(), req)
		if res.Outcome != order.OutcomeUnknown || err == nil {
			t.Fatalf("Charge = %+v, %v; want unknown", res, err)
		}
		req.GatewayChargeID = res.ChargeID
		res, err = g.Lookup(t.Context(), req)
		pis := fake.Intents(req.AttemptID)
		if len(pis) != 1 {
			t.Fatalf("PaymentIntents for the attempt: %+v, want one", pis)
		}
		if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pis[0].ID}); res != want || err != nil {
			t.Fatalf("Lookup = %+v, %v; want %+v", res, err, want)
		}
	})
}

// TestLookupReplayWindow: the create is replayed only while Stripe surely
// holds its key; with the id known, an attempt of any age is read.
func TestLookupReplayWindow(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	now := time.Now()
	g := newGateway(t, stripe.Config{BaseURL: url, Now: func() time.Time { return now }})

	old := chargeReq(stripetest.TokenVisa)
	old.CreatedAt = now.Add(-21 * time.Hour)
	res, err := g.Lookup(t.Context(), old)
	if !errors.Is(err, order.ErrLookupExpired) || res.Outcome != order.OutcomeUnknown {
		t.Errorf("Lookup of a 21h-old attempt without an id = %+v, %v; want ErrLookupExpired", res, err)
	}
	undated := chargeReq(stripetest.TokenVisa)
	undated.CreatedAt = time.Time{}
	res, err = g.Lookup(t.Context(), undated)
	if err == nil || errors.Is(err, order.ErrLookupExpired) || res.Outcome != order.OutcomeUnknown {
		t.Errorf("Lookup without an id or a creation time = %+v, %v; want an error (not expired)", res, err)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the fake saw %d requests, want none: those lookups must not replay", n)
	}

	recent := chargeReq(stripetest.TokenVisa)
	recent.CreatedAt = now.Add(-19 * time.Hour)
	if res, err := g.Lookup(t.Context(), recent); err != nil || res.Outcome != order.OutcomeDeclined {
		t.Errorf("Lookup of a 19h-old attempt never sent = %+v, %v; want it canceled, declined", res, err)
	}

	charged := chargeReq(stripetest.TokenVisa)
	res, err = g.Charge(t.Context(), charged)
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v", res, err)
	}
	charged.GatewayChargeID = res.ChargeID
	charged.CreatedAt = now.Add(-30 * 24 * time.Hour)
	if res, err := g.Lookup(t.Context(), charged); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Errorf("Lookup of a 30-day-old attempt by id = %+v, %v; want succeeded", res, err)
	}
}

// TestReplayWithOtherParameters: a Lookup built differently from the charge
// is a bug; Stripe says idempotency_error to the replayed create, which is
// logged at ERROR.
func TestReplayWithOtherParameters(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{BaseURL: url, Logger: logs.Logger()})
	req := chargeReq(stripetest.TokenVisa)
	if res, err := g.Charge(t.Context(), req); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v", res, err)
	}
	other := req
	other.Amount.AmountMinor++
	res, err := g.Lookup(t.Context(), other)
	if err == nil || res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Lookup with other parameters = %+v, %v; want an error", res, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), req.AttemptID) {
		t.Errorf("no ERROR log naming the attempt:\n%s", logs.String())
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Errorf("the fake created %d PaymentIntents, want 1", n)
	}
}

func TestChargeNotSent(t *testing.T) {
	t.Parallel()
	// Every try is refused, retries included: nothing reached Stripe.
	g := newGateway(t, stripe.Config{BaseURL: "http://" + gatewaytest.ClosedAddr(t), MaxNetworkRetries: 1, Timeout: 5 * time.Second})
	res, err := g.Charge(t.Context(), chargeReq(stripetest.TokenVisa))
	if res.Outcome != order.OutcomeNotSent || err == nil {
		t.Errorf("Charge = %+v, %v; want not sent with the dial error", res, err)
	}
}

func TestChargeHonoursTheCallersDeadline(t *testing.T) {
	t.Parallel()
	// A deadline of a second against the adapter's 10 s timeout, two
	// retries and an 8 s hold: the caller's wins.
	_, url := newFake(t, stripetest.Options{Hold: 8 * time.Second})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 10 * time.Second, MaxNetworkRetries: 2})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := g.Charge(ctx, chargeReq(stripetest.TokenTimeout))
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("Charge = %+v, %v; want unknown", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Charge took %s; the caller's deadline was 1s", took)
	}
}

func TestInvalidRequestIsNotSent(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	for _, req := range []order.ChargeRequest{
		{OrderID: "o", Amount: order.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "pm_card_visa"},
		{AttemptID: "a", Amount: order.Money{Currency: "GBP"}, PaymentMethod: "pm_card_visa"},
		{AttemptID: "a", Amount: order.Money{Currency: "GBP", AmountMinor: 1}},
		{AttemptID: "a", Amount: order.Money{Currency: "KWD", AmountMinor: 1255}, PaymentMethod: "pm_card_visa"},
	} {
		if res, err := g.Charge(t.Context(), req); res.Outcome != order.OutcomeNotSent || err == nil {
			t.Errorf("Charge(%+v) = %+v, %v; want not sent", req, res, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the fake saw %d requests, want none", n)
	}
}

// TestAmounts: amounts are sent in Stripe's units for their currency, and
// what Stripe cannot carry is refused before anything is sent.
func TestAmounts(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	tests := []struct {
		money order.Money
		sent  int64 // 0: refused
	}{
		{order.Money{Currency: "GBP", AmountMinor: 1250}, 1250},
		{order.Money{Currency: "JPY", AmountMinor: 1250}, 1250},
		{order.Money{Currency: "KRW", AmountMinor: 15000}, 15000},
		{order.Money{Currency: "KWD", AmountMinor: 1250}, 1250},
		{order.Money{Currency: "KWD", AmountMinor: 1255}, 0},
		{order.Money{Currency: "BHD", AmountMinor: 1}, 0},
		{order.Money{Currency: "TND", AmountMinor: 5130}, 5130},
		{order.Money{Currency: "ISK", AmountMinor: 500}, 50000},
		{order.Money{Currency: "MGA", AmountMinor: 150000}, 1500},
		{order.Money{Currency: "MGA", AmountMinor: 150050}, 0},
		{order.Money{Currency: "XAU", AmountMinor: 1}, 0},
		{order.Money{Currency: "CLF", AmountMinor: 10000}, 0},
	}
	for _, tt := range tests {
		err := g.CheckAmount(tt.money)
		var verr *order.ValidationError
		if (tt.sent == 0) != errors.As(err, &verr) {
			t.Errorf("CheckAmount(%+v) = %v; want refused: %t", tt.money, err, tt.sent == 0)
		}
		req := chargeReq(stripetest.TokenVisa)
		req.Amount = tt.money
		res, err := g.Charge(t.Context(), req)
		if tt.sent == 0 {
			if res.Outcome != order.OutcomeNotSent || err == nil || len(fake.Intents(req.AttemptID)) != 0 {
				t.Errorf("Charge of %+v = %+v, %v; want not sent", tt.money, res, err)
			}
			continue
		}
		pis := fake.Intents(req.AttemptID)
		if res.Outcome != order.OutcomeSucceeded || len(pis) != 1 || pis[0].Amount != tt.sent {
			t.Errorf("Charge of %+v = %+v, %v, intents %+v; want succeeded for %d", tt.money, res, err, pis, tt.sent)
		}
	}
}

// TestRefundAmounts: a refund is sent in Stripe's units for its currency,
// as its charge was (ISK and MGA differ from ISO 4217 by two decimals),
// and its lookup reads it back in the same units; what Stripe cannot carry
// is not sent.
func TestRefundAmounts(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	for _, tt := range []struct {
		charge, refund order.Money
		sent           int64 // 0: not sent
	}{
		{order.Money{Currency: "GBP", AmountMinor: 1250}, order.Money{Currency: "GBP", AmountMinor: 500}, 500},
		{order.Money{Currency: "ISK", AmountMinor: 500}, order.Money{Currency: "ISK", AmountMinor: 200}, 20000},
		{order.Money{Currency: "MGA", AmountMinor: 150000}, order.Money{Currency: "MGA", AmountMinor: 50000}, 500},
		{order.Money{Currency: "MGA", AmountMinor: 150000}, order.Money{Currency: "MGA", AmountMinor: 50050}, 0},
		{order.Money{Currency: "KWD", AmountMinor: 1250}, order.Money{Currency: "KWD", AmountMinor: 5}, 0},
	} {
		creq := chargeReq(stripetest.TokenVisa)
		creq.Amount = tt.charge
		c, err := g.Charge(t.Context(), creq)
		if err != nil || c.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge of %+v = %+v, %v", tt.charge, c, err)
		}
		req := order.RefundRequest{RefundID: order.NewID(), OrderID: creq.OrderID, ChargeAttemptID: creq.AttemptID,
			ChargeID: c.ChargeID, Amount: tt.refund, CreatedAt: time.Now()}
		res, err := g.Refund(t.Context(), req)
		var sent []stripetest.Refund
		for _, r := range fake.Refunds() {
			if r.Metadata["refund_id"] == req.RefundID {
				sent = append(sent, r)
			}
		}
		if tt.sent == 0 {
			if res.Outcome != order.OutcomeNotSent || len(sent) != 0 {
				t.Errorf("Refund of %+v = %+v, %v, sent %+v; want not sent", tt.refund, res, err, sent)
			}
			continue
		}
		if res.Outcome != order.OutcomeSucceeded || len(sent) != 1 || sent[0].Amount != tt.sent {
			t.Errorf("Refund of %+v = %+v, %v, sent %+v; want succeeded for %d", tt.refund, res, err, sent, tt.sent)
		}
		if got, err := g.LookupRefund(t.Context(), req); err != nil || got.Outcome != order.OutcomeSucceeded {
			t.Errorf("LookupRefund of %+v = %+v, %v; want succeeded", tt.refund, got, err)
		}
	}
}

// TestThreeDSecure: a customer-present charge that Stripe challenges is
// reported as requiring action, with the redirect and the client secret;
// the confirm carries the return URL and no off_session. Completed, a
// lookup says succeeded; failed, declined; a lookup never cancels it before
// its expiry, and cancels it after.
func TestThreeDSecure(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	present := func() order.ChargeRequest {
		req := chargeReq(stripetest.TokenRequiresAction)
		req.CustomerPresent, req.ReturnURL = true, "https://checkout.example/return"
		return req
	}
	for _, tt := range []struct {
		name    string
		finish  func(id string)
		outcome order.Outcome
		code    string
	}{
		{"completed", func(id string) {
			resp, err := http.Get(url + "/fake/3ds/" + id)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("opening the challenge page: %v %v", resp, err)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}, order.OutcomeSucceeded, ""},
		{"failed", func(id string) { fake.Authenticate(id, false) }, order.OutcomeDeclined, "payment_intent_authentication_failure"},
	} {
		req := present()
		res, err := g.Charge(t.Context(), req)
		if err != nil || res.Outcome != order.OutcomeRequiresAction || res.ChargeID == "" ||
			res.NextAction.RedirectURL != url+"/fake/3ds/"+res.ChargeID || res.NextAction.ClientSecret == "" {
			t.Fatalf("%s: Charge = %+v, %v; want requires_action with the redirect and the client secret", tt.name, res, err)
		}
		req.GatewayChargeID = res.ChargeID
		if again, err := g.Lookup(t.Context(), req); err != nil || again.Outcome != order.OutcomeRequiresAction {
			t.Fatalf("%s: Lookup while waiting = %+v, %v; want requires_action", tt.name, again, err)
		}
		tt.finish(res.ChargeID)
		if got, err := g.Lookup(t.Context(), req); err != nil || got.Outcome != tt.outcome || got.DeclineCode != tt.code {
			t.Errorf("%s: Lookup after = %+v, %v; want %s %q", tt.name, got, err, tt.outcome, tt.code)
		}
	}
	if n := fake.Count(http.MethodPost, "/cancel"); n != 0 {
		t.Errorf("lookups before the expiry sent %d cancels", n)
	}

	// Abandoned: the expiry's lookup cancels it, and it can no longer be
	// completed.
	req := present()
	res, _ := g.Charge(t.Context(), req)
	req.GatewayChargeID, req.CancelAwaitingAction = res.ChargeID, true
	if got, err := g.Lookup(t.Context(), req); err != nil || got.Outcome != order.OutcomeDeclined {
		t.Fatalf("Lookup at the expiry = %+v, %v; want declined (canceled)", got, err)
	}
	if fake.Authenticate(res.ChargeID, true) {
		t.Error("a canceled intent was authenticated")
	}

	// Off session, the same card is declined: nobody can act. Its
	// PaymentIntent is canceled first, so that nothing can complete it.
	off := chargeReq(stripetest.TokenRequiresAction)
	res, err := g.Charge(t.Context(), off)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != order.DeclineAuthenticationRequired {
		t.Errorf("off-session Charge = %+v, %v; want declined authentication_required", res, err)
	}
	if pi, ok := fake.Intent(res.ChargeID); !ok || pi.Status != "canceled" {
		t.Errorf("off-session PaymentIntent = %+v; want it canceled", pi)
	}
	if fake.Authenticate(res.ChargeID, true) {
		t.Error("a declined off-session intent was authenticated")
	}
}

// TestOffSessionCancelFails: an off-session charge that Stripe answers
// requires_action, and whose cancel gets a 500, is not a decline: its
// PaymentIntent may still be open. The outcome is unknown, with the
// PaymentIntent's id and the authentication_required mark, and Lookup
// (told to cancel what awaits an action) cancels it once Stripe answers.
func TestOffSessionCancelFails(t *testing.T) {
	t.Parallel()
	fake := stripetest.New(stripetest.Options{})
	var failCancels atomic.Bool
	failCancels.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failCancels.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"An unknown error occurred"}}`))
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g := newGateway(t, stripe.Config{BaseURL: srv.URL})

	req := chargeReq(stripetest.TokenRequiresAction)
	res, err := g.Charge(t.Context(), req)
	if err == nil || res.Outcome != order.OutcomeUnknown || res.DeclineCode != order.DeclineAuthenticationRequired || res.ChargeID == "" {
		t.Fatalf("Charge = %+v, %v; want unknown, marked authentication_required, with the PaymentIntent's id", res, err)
	}
	if pi, _ := fake.Intent(res.ChargeID); pi.Status != "requires_action" {
		t.Fatalf("PaymentIntent = %+v; want it still requires_action (the cancel failed)", pi)
	}

	failCancels.Store(false)
	req.GatewayChargeID, req.CancelAwaitingAction = res.ChargeID, true
	got, err := g.Lookup(t.Context(), req)
	if err != nil || got.Outcome != order.OutcomeDeclined {
		t.Fatalf("Lookup = %+v, %v; want declined", got, err)
	}
	if pi, _ := fake.Intent(res.ChargeID); pi.Status != "canceled" || pi.Confirmations != 1 {
		t.Errorf("PaymentIntent = %+v; want it canceled, confirmed once", pi)
	}
}

// TestCustomerIsSentAndReplayed: a saved card's Customer goes with the
// create, and Lookup's replay of the create (its answer lost, so the
// PaymentIntent's id never recorded) sends it again: Stripe answers with
// the saved PaymentIntent, which Lookup cancels, instead of
// idempotency_error. A replay without the customer is another request.
func TestCustomerIsSentAndReplayed(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	req := chargeReq(stripetest.TokenCreateDropped)
	req.Customer = "cus_Saved4242"

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeUnknown || res.ChargeID != "" || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown without an id", res, err)
	}
	pis := fake.Intents(req.AttemptID)
	if len(pis) != 1 || pis[0].Customer != req.Customer {
		t.Fatalf("PaymentIntents of the attempt = %+v; want one, for customer %s", pis, req.Customer)
	}
	without := req
	without.Customer = ""
	if res, err := g.Lookup(t.Context(), without); err == nil || res.Outcome != order.OutcomeUnknown {
		t.Errorf("Lookup replaying the create without its customer = %+v, %v; want unknown (idempotency_error)", res, err)
	}
	res, err = g.Lookup(t.Context(), req)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != "canceled_unconfirmed" || res.ChargeID != pis[0].ID {
		t.Fatalf("Lookup = %+v, %v; want declined canceled_unconfirmed for %s", res, err, pis[0].ID)
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Errorf("the fake created %d PaymentIntents, want 1", n)
	}
	checkNeverCharged(t, fake, req.AttemptID)

	paid := chargeReq(stripetest.TokenVisa)
	paid.Customer = "cus_Saved4242"
	if res, err := g.Charge(t.Context(), paid); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge of a saved card = %+v, %v; want succeeded", res, err)
	}
	if pis := fake.Intents(paid.AttemptID); len(pis) != 1 || pis[0].Customer != paid.Customer || pis[0].Status != "succeeded" {
		t.Errorf("PaymentIntents = %+v; want one, succeeded, for customer %s", pis, paid.Customer)
	}
}

// TestCustomerNeverLogged: Stripe quotes a Customer it does not know in
// its error; like the key, the id reaches neither the error nor the logs.
func TestCustomerNeverLogged(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{BaseURL: url, Logger: logs.Logger()})
	req := chargeReq(stripetest.TokenVisa)
	req.Customer = stripetest.CustomerMissing + "Gone42"

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeDeclined || res.DeclineCode != "rejected_resource_missing" || err == nil {
		t.Fatalf("Charge for an unknown customer = %+v, %v; want declined rejected_resource_missing, with an error", res, err)
	}
	if strings.Contains(err.Error(), req.Customer) {
		t.Errorf("the error quotes the customer: %v", err)
	}
	if strings.Contains(logs.String(), req.Customer) {
		t.Errorf("the logs quote the customer:\n%s", logs.String())
	}
	if !strings.Contains(logs.String()+err.Error(), "cus_[redacted]") {
		t.Errorf("neither the error nor the logs show Stripe's (scrubbed) message: %v\n%s", err, logs.String())
	}
	if n := len(fake.Ledger()); n != 0 {
		t.Errorf("the fake holds %d PaymentIntents, want none", n)
	}
}
