package stripetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
)

type reply struct {
	status   int
	replayed bool
	body     map[string]any
}

// post sends a create request. It reports failures with t.Errorf, so that
// it may run on a goroutine of its own.
func post(t *testing.T, base, key, idem string, form url.Values) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/payment_intents", strings.NewReader(form.Encode()))
	if err != nil {
		t.Error(err)
		return reply{}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if err := json.Unmarshal(b, &r.body); err != nil {
		t.Errorf("answer %d is not JSON: %s", resp.StatusCode, b)
	}
	return r
}

func intent(pm string) url.Values {
	return url.Values{"amount": {"1250"}, "currency": {"gbp"}, "payment_method": {pm}, "confirm": {"true"},
		"off_session": {"true"}, "metadata[attempt_id]": {"a1"}}
}

func errorField(r reply, name string) string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e[name].(string)
	return s
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	fake := stripetest.New(stripetest.Options{})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	const key = "sk_test_123"

	first := post(t, srv.URL, key, "k1", intent(stripetest.TokenVisa))
	if first.status != 200 || first.replayed || first.body["status"] != "succeeded" {
		t.Fatalf("first = %+v", first)
	}
	again := post(t, srv.URL, key, "k1", intent(stripetest.TokenVisa))
	if again.status != 200 || !again.replayed || again.body["id"] != first.body["id"] {
		t.Fatalf("repeat = %+v, want the saved answer, replayed", again)
	}
	other := intent(stripetest.TokenVisa)
	other.Set("amount", "1251")
	if r := post(t, srv.URL, key, "k1", other); r.status != 400 || errorField(r, "type") != "idempotency_error" {
		t.Fatalf("other parameters = %+v, want 400 idempotency_error", r)
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Fatalf("ledger holds %d PaymentIntents, want 1", n)
	}

	// A decline is saved too.
	d1 := post(t, srv.URL, key, "k2", intent(stripetest.TokenDeclined))
	d2 := post(t, srv.URL, key, "k2", intent(stripetest.TokenDeclined))
	if d1.status != 402 || errorField(d1, "decline_code") != "generic_decline" || d2.status != 402 || !d2.replayed {
		t.Fatalf("declines = %+v, %+v; want 402 generic_decline, then its replay", d1, d2)
	}

	// A request that fails validation is not saved: the key stays free.
	bad := intent(stripetest.TokenVisa)
	bad.Del("amount")
	if r := post(t, srv.URL, key, "k3", bad); r.status != 400 || errorField(r, "code") != "parameter_missing" {
		t.Fatalf("missing amount = %+v", r)
	}
	if r := post(t, srv.URL, key, "k3", intent(stripetest.TokenVisa)); r.status != 200 || r.replayed {
		t.Fatalf("after a failed validation = %+v, want a fresh execution", r)
	}

	// So is a rate limit, and a rejected key, which is quoted whole.
	if r := post(t, srv.URL, key, "k4", intent(stripetest.TokenRateLimited)); r.status != 429 {
		t.Fatalf("rate limited = %+v", r)
	}
	if r := post(t, srv.URL, "nope_secret", "k4", intent(stripetest.TokenVisa)); r.status != 401 ||
		!strings.Contains(errorField(r, "message"), "nope_secret") {
		t.Fatalf("bad key = %+v, want 401 quoting the key", r)
	}
	if n := len(fake.Intents("k4")); n != 0 {
		t.Fatalf("k4 created %d PaymentIntents, want none", n)
	}
}

func TestKeyInFlight(t *testing.T) {
	t.Parallel()
	fake := stripetest.New(stripetest.Options{Hold: 500 * time.Millisecond})
	srv := httptest.NewServer(fake)
	defer srv.Close()

	var (
		wg    sync.WaitGroup
		first reply
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = post(t, srv.URL, "sk_test_123", "slow", intent(stripetest.TokenTimeout))
	}()
	for fake.InFlight() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if r := post(t, srv.URL, "sk_test_123", "slow", intent(stripetest.TokenTimeout)); r.status != 409 ||
		errorField(r, "code") != "idempotency_key_in_use" {
		t.Errorf("while in flight = %+v, want 409 idempotency_key_in_use", r)
	}
	wg.Wait()
	after := post(t, srv.URL, "sk_test_123", "slow", intent(stripetest.TokenTimeout))
	if first.status != 200 || after.status != 200 || !after.replayed || after.body["id"] != first.body["id"] {
		t.Errorf("first = %+v, after = %+v; want one PaymentIntent, replayed", first, after)
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Errorf("ledger holds %d PaymentIntents, want 1", n)
	}
}
