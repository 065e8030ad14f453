package stripe_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

func TestChargeSendsOneKeyedCreateAndConfirm(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, auth, idem string
		form                     map[string][]string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // a bad form reads as empty, which the test then reports
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.PostForm})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"pi_123","object":"payment_intent","amount":1250,"currency":"gbp","status":"succeeded","latest_charge":"ch_123"}`))
	}))
	defer srv.Close()
	g := newGateway(t, stripe.Config{BaseURL: srv.URL + "/", MaxNetworkRetries: 2})
	req := chargeReq("pm_card_visa")

	res, err := g.Charge(t.Context(), req)
	if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "pi_123"}); res != want || err != nil {
		t.Fatalf("Charge = %+v, %v; want %+v", res, err, want)
	}
	if _, err := g.Lookup(t.Context(), req); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("server saw %d requests, want 2 (charge and replay)", len(got))
	}
	want := map[string]string{
		"amount": "1250", "currency": "gbp", "payment_method": "pm_card_visa", "confirm": "true",
		"off_session": "true", "payment_method_types[0]": "card",
		"metadata[order_id]": req.OrderID, "metadata[attempt_id]": req.AttemptID,
		"metadata[merchant_reference]": req.MerchantReference,
	}
	for i, s := range got {
		if s.method != http.MethodPost || s.path != "/v1/payment_intents" {
			t.Errorf("request %d = %s %s, want POST /v1/payment_intents", i, s.method, s.path)
		}
		if s.auth != "Bearer "+secretKey {
			t.Errorf("request %d: Authorization = %q", i, s.auth)
		}
		if s.idem != req.AttemptID {
			t.Errorf("request %d: Idempotency-Key = %q, want the attempt id %q", i, s.idem, req.AttemptID)
		}
		if len(s.form) != len(want) {
			t.Errorf("request %d: parameters = %v, want exactly %v", i, s.form, want)
		}
		for k, v := range want {
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
		{stripetest.TokenRequiresAction, order.OutcomeDeclined, "requires_action", true, false},
		{stripetest.TokenServerErrorAfterCreate, order.OutcomeUnknown, "", false, true},
		{stripetest.TokenRateLimited, order.OutcomeUnknown, "", false, true},
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

// TestAnswers checks the classification of answers the fake does not give,
// for Charge and for a Lookup replay.
func TestAnswers(t *testing.T) {
	t.Parallel()
	const (
		otherAttempt = `"metadata":{"attempt_id":"someone-else"},`
		piFields     = `"object":"payment_intent","amount":1250,"currency":"gbp",`
	)
	tests := []struct {
		name   string
		status int
		body   string
		// charge and lookup are the outcomes wanted; unknown means an error
		// for Lookup.
		charge, lookup order.Outcome
		code           string
		loggedError    bool
	}{
		{"succeeded", 200, `{"id":"pi_1",` + piFields + `"status":"succeeded"}`, order.OutcomeSucceeded, order.OutcomeSucceeded, "", false},
		{"requires_payment_method with a decline", 200,
			`{"id":"pi_1",` + piFields + `"status":"requires_payment_method","last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"do_not_honor"}}`,
			order.OutcomeDeclined, order.OutcomeDeclined, "do_not_honor", false},
		{"requires_payment_method bare", 200, `{"id":"pi_1",` + piFields + `"status":"requires_payment_method"}`,
			order.OutcomeDeclined, order.OutcomeDeclined, "requires_payment_method", false},
		{"canceled", 200, `{"id":"pi_1",` + piFields + `"status":"canceled"}`, order.OutcomeDeclined, order.OutcomeDeclined, "canceled", false},
		{"processing", 200, `{"id":"pi_1",` + piFields + `"status":"processing"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"requires_capture", 200, `{"id":"pi_1",` + piFields + `"status":"requires_capture"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"another amount", 200, `{"id":"pi_1","amount":999,"currency":"gbp","status":"succeeded"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"another attempt", 200, `{"id":"pi_1",` + piFields + otherAttempt + `"status":"succeeded"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"no id", 200, `{` + piFields + `"status":"succeeded"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"garbage", 200, `<html>oops</html>`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"card error", 402, `{"error":{"type":"card_error","code":"expired_card","payment_intent":{"id":"pi_1"}}}`,
			order.OutcomeDeclined, order.OutcomeDeclined, "expired_card", false},
		{"idempotency error", 400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`,
			order.OutcomeUnknown, order.OutcomeUnknown, "", true},
		{"key in use", 409, `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use"}}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"rate limited", 429, `{"error":{"type":"invalid_request_error","code":"rate_limit"}}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"server error", 500, `{"error":{"type":"api_error"}}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"unavailable", 503, `{"error":{"type":"api_error"}}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"invalid request", 400, `{"error":{"type":"invalid_request_error","code":"parameter_unknown","param":"bogus"}}`,
			order.OutcomeDeclined, order.OutcomeUnknown, "rejected_parameter_unknown", false},
		{"unauthorized", 401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: ` + secretKey + `"}}`,
			order.OutcomeDeclined, order.OutcomeUnknown, "rejected_401", false},
		{"error without an error object", 404, `{"nothing":"here"}`, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
		{"redirect", 302, ``, order.OutcomeUnknown, order.OutcomeUnknown, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == http.StatusFound {
					w.Header().Set("Location", "/elsewhere")
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			var logs logtest.Buffer
			g := newGateway(t, stripe.Config{BaseURL: srv.URL, Logger: logs.Logger()})
			req := chargeReq("pm_card_visa")

			res, err := g.Charge(t.Context(), req)
			if res.Outcome != tt.charge || (tt.charge == order.OutcomeDeclined && res.DeclineCode != tt.code) {
				t.Errorf("Charge = %+v, %v; want %s %q", res, err, tt.charge, tt.code)
			}
			if tt.charge == order.OutcomeUnknown && err == nil {
				t.Error("Charge: unknown without an error")
			}
			checkSecret(t, err)
			t.Logf("charge: %+v %v", res, err)

			res, err = g.Lookup(t.Context(), req)
			t.Logf("lookup: %+v %v", res, err)
			if tt.lookup == order.OutcomeUnknown {
				if err == nil || res.Outcome != order.OutcomeUnknown {
					t.Errorf("Lookup = %+v, %v; want an error", res, err)
				}
			} else if err != nil || res.Outcome != tt.lookup || (tt.lookup == order.OutcomeDeclined && res.DeclineCode != tt.code) {
				t.Errorf("Lookup = %+v, %v; want %s %q", res, err, tt.lookup, tt.code)
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

func checkSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secretKey) {
		t.Errorf("error %q contains the secret key", err)
	}
}

// TestSecretKeyNeverLeaks sends a key the server rejects and quotes back.
func TestSecretKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	_, url := newFake(t, stripetest.Options{SecretKey: "sk_test_the_right_one"})
	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{BaseURL: url, SecretKey: secretKey, MaxNetworkRetries: 2, Logger: logs.Logger()})
	req := chargeReq(stripetest.TokenVisa)

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeDeclined || res.DeclineCode != "rejected_401" || err == nil {
		t.Errorf("Charge = %+v, %v; want declined rejected_401 with an error", res, err)
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
}

// TestTimeoutThenReplay is the reconciler's path for Stripe: the charge
// times out after Stripe created the PaymentIntent; a replay while the first
// request is still being processed cannot say; once it is done, the replay
// answers with that same PaymentIntent. One PaymentIntent for the attempt,
// whatever happens.
func TestTimeoutThenReplay(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{Hold: time.Second})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 200 * time.Millisecond})
	req := chargeReq(stripetest.TokenTimeout)

	res, err := g.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown", res, err)
	}
	res, err = g.Lookup(t.Context(), req)
	if err == nil || res.Outcome != order.OutcomeUnknown || errors.Is(err, order.ErrLookupExpired) {
		t.Fatalf("Lookup while the charge is in flight = %+v, %v; want an error to try later", res, err)
	}
	if !strings.Contains(err.Error(), "idempotency_key_in_use") {
		t.Errorf("Lookup error %q does not say the key is in use", err)
	}

	waitIdle(t, fake)
	res, err = g.Lookup(t.Context(), req)
	pis := fake.Intents(req.AttemptID)
	if len(pis) != 1 {
		t.Fatalf("PaymentIntents for the attempt: %+v, want one", pis)
	}
	if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pis[0].ID}); res != want || err != nil {
		t.Fatalf("Lookup = %+v, %v; want %+v", res, err, want)
	}
	// And again, and a late Charge of the same attempt: still the one.
	if again, err := g.Lookup(t.Context(), req); again != res || err != nil {
		t.Errorf("second Lookup = %+v, %v; want %+v", again, err, res)
	}
	if again, err := g.Charge(t.Context(), req); again != res || err != nil {
		t.Errorf("Charge again = %+v, %v; want %+v", again, err, res)
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Errorf("the fake created %d PaymentIntents, want 1", n)
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

// TestNetworkRetriesReuseTheKey drops the connection after Stripe created
// the PaymentIntent: stripe-go's retry carries the same key and gets the
// saved answer; without retries the outcome is unknown until a replay.
func TestNetworkRetriesReuseTheKey(t *testing.T) {
	t.Parallel()
	t.Run("with retries", func(t *testing.T) {
		t.Parallel()
		fake, url := newFake(t, stripetest.Options{})
		g := newGateway(t, stripe.Config{BaseURL: url, MaxNetworkRetries: 2})
		req := chargeReq(stripetest.TokenDropAfterCreate)
		res, err := g.Charge(t.Context(), req)
		pis := fake.Intents(req.AttemptID)
		if len(pis) != 1 || fake.Requests() != 2 {
			t.Fatalf("PaymentIntents %+v from %d requests; want one from two", pis, fake.Requests())
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
		if res, err := g.Charge(t.Context(), req); res.Outcome != order.OutcomeUnknown || err == nil {
			t.Fatalf("Charge = %+v, %v; want unknown", res, err)
		}
		res, err := g.Lookup(t.Context(), req)
		pis := fake.Intents(req.AttemptID)
		if len(pis) != 1 {
			t.Fatalf("PaymentIntents for the attempt: %+v, want one", pis)
		}
		if want := (order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pis[0].ID}); res != want || err != nil {
			t.Fatalf("Lookup = %+v, %v; want %+v", res, err, want)
		}
	})
}

// TestServerErrorIsSavedWithTheKey: Stripe saves a 500 with the key, so a
// replay keeps saying 500 and the outcome stays unknown for a person, even
// though (here) the PaymentIntent succeeded.
func TestServerErrorIsSavedWithTheKey(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: url})
	req := chargeReq(stripetest.TokenServerErrorAfterCreate)
	if res, err := g.Charge(t.Context(), req); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown", res, err)
	}
	if res, err := g.Lookup(t.Context(), req); err == nil {
		t.Fatalf("Lookup = %+v; want an error: the replay answers the saved 500", res)
	}
	if n := len(fake.Intents(req.AttemptID)); n != 1 {
		t.Errorf("PaymentIntents for the attempt: %d, want 1", n)
	}
}

func TestLookupReplayWindow(t *testing.T) {
	t.Parallel()
	fake, url := newFake(t, stripetest.Options{})
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := newGateway(t, stripe.Config{BaseURL: url, Now: func() time.Time { return now }})

	old := chargeReq(stripetest.TokenVisa)
	old.CreatedAt = now.Add(-21 * time.Hour)
	res, err := g.Lookup(t.Context(), old)
	if !errors.Is(err, order.ErrLookupExpired) || res.Outcome != order.OutcomeUnknown {
		t.Errorf("Lookup of a 21h-old attempt = %+v, %v; want ErrLookupExpired", res, err)
	}

	undated := chargeReq(stripetest.TokenVisa)
	undated.CreatedAt = time.Time{}
	res, err = g.Lookup(t.Context(), undated)
	if err == nil || errors.Is(err, order.ErrLookupExpired) || res.Outcome != order.OutcomeUnknown {
		t.Errorf("Lookup without a creation time = %+v, %v; want an error (not expired)", res, err)
	}
	if n := fake.Requests(); n != 0 {
		t.Fatalf("the fake saw %d requests, want none: those lookups must not replay", n)
	}

	recent := chargeReq(stripetest.TokenVisa)
	recent.CreatedAt = now.Add(-19 * time.Hour)
	if res, err := g.Lookup(t.Context(), recent); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Errorf("Lookup of a 19h-old attempt = %+v, %v; want a replay that succeeds", res, err)
	}
}

// TestReplayWithOtherParameters: a Lookup built differently from the charge
// is a bug; Stripe says idempotency_error, which is logged at ERROR.
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
	_, url := newFake(t, stripetest.Options{Hold: time.Second})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 10 * time.Second, MaxNetworkRetries: 2})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := g.Charge(ctx, chargeReq(stripetest.TokenTimeout))
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("Charge = %+v, %v; want unknown", res, err)
	}
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Errorf("Charge took %s; the caller's deadline was 200ms", took)
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
	} {
		if res, err := g.Charge(t.Context(), req); res.Outcome != order.OutcomeNotSent || err == nil {
			t.Errorf("Charge(%+v) = %+v, %v; want not sent", req, res, err)
		}
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("the fake saw %d requests, want none", n)
	}
}
