package stripetest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
)

const apiKey = "sk_test_123"

type reply struct {
	status   int
	replayed bool
	body     map[string]any
}

// send sends a request to the fake. It reports failures with t.Errorf, so
// that it may run on a goroutine of its own.
func send(t *testing.T, method, base, key, idem, path string, form url.Values) reply {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
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

func post(t *testing.T, base, idem, path string, form url.Values) reply {
	t.Helper()
	return send(t, http.MethodPost, base, apiKey, idem, path, form)
}

func intent(pm string) url.Values {
	return url.Values{"amount": {"1250"}, "currency": {"gbp"}, "payment_method": {pm}, "metadata[attempt_id]": {"a1"}}
}

func errorField(r reply, name string) string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e[name].(string)
	return s
}

func errorIntentStatus(r reply) string {
	e, _ := r.body["error"].(map[string]any)
	pi, _ := e["payment_intent"].(map[string]any)
	s, _ := pi["status"].(string)
	return s
}

func newServer(t *testing.T, opts stripetest.Options) (*stripetest.Server, string) {
	fake := stripetest.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// TestLifecycle: create leaves the intent unconfirmed and charges nothing;
// confirm charges; retrieve shows the intent as it stands; cancel works
// only on an intent that has not succeeded.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{})

	created := post(t, base, "a1:create", "/v1/payment_intents", intent(stripetest.TokenVisa))
	id, _ := created.body["id"].(string)
	if created.status != 200 || created.body["status"] != "requires_confirmation" || id == "" {
		t.Fatalf("create = %+v, want an unconfirmed intent", created)
	}
	if r := send(t, http.MethodGet, base, apiKey, "", "/v1/payment_intents/"+id, nil); r.status != 200 || r.body["status"] != "requires_confirmation" {
		t.Fatalf("retrieve = %+v", r)
	}
	confirmed := post(t, base, "a1:confirm", "/v1/payment_intents/"+id+"/confirm", url.Values{"off_session": {"true"}})
	if confirmed.status != 200 || confirmed.body["status"] != "succeeded" {
		t.Fatalf("confirm = %+v", confirmed)
	}
	if r := send(t, http.MethodGet, base, apiKey, "", "/v1/payment_intents/"+id, nil); r.body["status"] != "succeeded" {
		t.Fatalf("retrieve after confirm = %+v", r)
	}
	if r := post(t, base, "", "/v1/payment_intents/"+id+"/cancel", nil); r.status != 400 ||
		errorField(r, "code") != "payment_intent_unexpected_state" || errorIntentStatus(r) != "succeeded" {
		t.Fatalf("cancel of a succeeded intent = %+v, want 400 payment_intent_unexpected_state carrying it", r)
	}

	// An intent canceled before its confirm can never be charged.
	other := post(t, base, "a2:create", "/v1/payment_intents", intent(stripetest.TokenVisa))
	oid, _ := other.body["id"].(string)
	if r := post(t, base, "", "/v1/payment_intents/"+oid+"/cancel", nil); r.status != 200 || r.body["status"] != "canceled" {
		t.Fatalf("cancel = %+v", r)
	}
	if r := post(t, base, "a2:confirm", "/v1/payment_intents/"+oid+"/confirm", nil); r.status != 400 || errorIntentStatus(r) != "canceled" {
		t.Fatalf("confirm of a canceled intent = %+v, want 400 carrying it", r)
	}
	if pi, ok := fake.Intent(oid); !ok || pi.Status != "canceled" || pi.Confirmations != 0 {
		t.Fatalf("canceled intent = %+v", pi)
	}
	if r := send(t, http.MethodGet, base, apiKey, "", "/v1/payment_intents/pi_nope", nil); r.status != 404 {
		t.Fatalf("retrieve of an unknown intent = %+v, want 404", r)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{})

	first := post(t, base, "k1", "/v1/payment_intents", intent(stripetest.TokenVisa))
	if first.status != 200 || first.replayed {
		t.Fatalf("first = %+v", first)
	}
	id, _ := first.body["id"].(string)
	again := post(t, base, "k1", "/v1/payment_intents", intent(stripetest.TokenVisa))
	if again.status != 200 || !again.replayed || again.body["id"] != id {
		t.Fatalf("repeat = %+v, want the saved answer, replayed", again)
	}
	other := intent(stripetest.TokenVisa)
	other.Set("amount", "1251")
	if r := post(t, base, "k1", "/v1/payment_intents", other); r.status != 400 || errorField(r, "type") != "idempotency_error" {
		t.Fatalf("other parameters = %+v, want 400 idempotency_error", r)
	}
	if r := post(t, base, "k1", "/v1/payment_intents/"+id+"/confirm", nil); r.status != 400 || errorField(r, "type") != "idempotency_error" {
		t.Fatalf("the key on another endpoint = %+v, want 400 idempotency_error", r)
	}
	// The saved answer is the first one, not the intent as it stands.
	post(t, base, "k1c", "/v1/payment_intents/"+id+"/confirm", nil)
	if r := post(t, base, "k1", "/v1/payment_intents", intent(stripetest.TokenVisa)); r.body["status"] != "requires_confirmation" {
		t.Fatalf("replayed create after the confirm = %+v, want the saved unconfirmed intent", r)
	}
	if n := len(fake.Ledger()); n != 1 {
		t.Fatalf("ledger holds %d PaymentIntents, want 1", n)
	}

	// A decline is saved too, and a 500.
	for _, tok := range []string{stripetest.TokenDeclined, stripetest.TokenServerErrorAfterCreate} {
		c := post(t, base, tok+":create", "/v1/payment_intents", intent(tok))
		path := "/v1/payment_intents/" + c.body["id"].(string) + "/confirm"
		d1 := post(t, base, tok+":confirm", path, nil)
		d2 := post(t, base, tok+":confirm", path, nil)
		if d1.status < 400 || d2.status != d1.status || !d2.replayed {
			t.Fatalf("%s: confirms = %+v, %+v; want an error, then its replay", tok, d1, d2)
		}
	}

	// A request that fails validation is not saved: the key stays free.
	bad := intent(stripetest.TokenVisa)
	bad.Del("amount")
	if r := post(t, base, "k3", "/v1/payment_intents", bad); r.status != 400 || errorField(r, "code") != "parameter_missing" {
		t.Fatalf("missing amount = %+v", r)
	}
	if r := post(t, base, "k3", "/v1/payment_intents", intent(stripetest.TokenVisa)); r.status != 200 || r.replayed {
		t.Fatalf("after a failed validation = %+v, want a fresh execution", r)
	}

	// So is a rate limit, and a rejected key, which is quoted whole.
	c := post(t, base, "k4", "/v1/payment_intents", intent(stripetest.TokenRateLimited))
	path := "/v1/payment_intents/" + c.body["id"].(string) + "/confirm"
	if r := post(t, base, "k4c", path, nil); r.status != 429 {
		t.Fatalf("rate limited = %+v", r)
	}
	if r := send(t, http.MethodPost, base, "nope_secret", "k4c", path, nil); r.status != 401 ||
		!strings.Contains(errorField(r, "message"), "nope_secret") {
		t.Fatalf("bad key = %+v, want 401 quoting the key", r)
	}
	if r := post(t, base, "k4c", path, nil); r.status != 429 || r.replayed {
		t.Fatalf("rate limited again = %+v, want a fresh 429", r)
	}
}

func TestProcessing(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{})
	c := post(t, base, "p:create", "/v1/payment_intents", intent(stripetest.TokenProcessing))
	id := c.body["id"].(string)
	if r := post(t, base, "p:confirm", "/v1/payment_intents/"+id+"/confirm", nil); r.body["status"] != "processing" {
		t.Fatalf("confirm = %+v, want processing", r)
	}
	if r := post(t, base, "", "/v1/payment_intents/"+id+"/cancel", nil); r.status != 400 {
		t.Fatalf("cancel while processing = %+v, want 400", r)
	}
	if !fake.Succeed(id) || fake.Succeed(id) {
		t.Fatal("Succeed: want true once, then false")
	}
	if r := send(t, http.MethodGet, base, apiKey, "", "/v1/payment_intents/"+id, nil); r.body["status"] != "succeeded" {
		t.Fatalf("retrieve = %+v, want succeeded", r)
	}
	// The ledger keeps the way there, in order, and when.
	pi, _ := fake.Intent(id)
	if got := statuses(pi); !slices.Equal(got, []string{"requires_confirmation", "processing", "succeeded"}) {
		t.Fatalf("changes = %v, want requires_confirmation, processing, succeeded", got)
	}
	for i := 1; i < len(pi.Changes); i++ {
		if pi.Changes[i].At.Before(pi.Changes[i-1].At) {
			t.Errorf("change %d (%s) at %s, before change %d", i, pi.Changes[i].Status, pi.Changes[i].At, i-1)
		}
	}
}

// statuses lists the statuses an intent took.
func statuses(pi stripetest.PaymentIntent) []string {
	var out []string
	for _, c := range pi.Changes {
		out = append(out, c.Status)
	}
	return out
}

func TestKeyInFlight(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{Hold: 5 * time.Second})
	c := post(t, base, "slow:create", "/v1/payment_intents", intent(stripetest.TokenTimeout))
	path := "/v1/payment_intents/" + c.body["id"].(string) + "/confirm"

	var (
		wg    sync.WaitGroup
		first reply
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = post(t, base, "slow", path, nil)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for fake.InFlight() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the confirm never got in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := post(t, base, "slow", path, nil); r.status != 409 || errorField(r, "code") != "idempotency_key_in_use" {
		t.Errorf("while in flight = %+v, want 409 idempotency_key_in_use", r)
	}
	wg.Wait()
	after := post(t, base, "slow", path, nil)
	if first.status != 200 || after.status != 200 || !after.replayed || after.body["id"] != first.body["id"] {
		t.Errorf("first = %+v, after = %+v; want one PaymentIntent, replayed", first, after)
	}
	if pis := fake.Ledger(); len(pis) != 1 || pis[0].Confirmations != 1 {
		t.Errorf("ledger = %+v, want one intent confirmed once", pis)
	}
}
