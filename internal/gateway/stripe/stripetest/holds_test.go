package stripetest_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
)

// authorized creates and confirms a manual-capture intent (with
// request_multicapture when multi) and returns its id.
func authorized(t *testing.T, base, key, pm string, multi bool) string {
	t.Helper()
	form := intent(pm)
	form.Set("capture_method", "manual")
	if multi {
		form.Set("payment_method_options[card][request_multicapture]", "if_available")
	}
	c := post(t, base, key+":create", "/v1/payment_intents", form)
	id, _ := c.body["id"].(string)
	r := post(t, base, key+":confirm", "/v1/payment_intents/"+id+"/confirm", url.Values{"expand[0]": {"latest_charge"}})
	if r.status != 200 || r.body["status"] != "requires_capture" || r.body["amount_capturable"] != 1250.0 || r.body["amount_received"] != 0.0 {
		t.Fatalf("confirm of a manual intent = %+v, want requires_capture holding 1250", r)
	}
	ch, _ := r.body["latest_charge"].(map[string]any)
	pmd, _ := ch["payment_method_details"].(map[string]any)
	card, _ := pmd["card"].(map[string]any)
	if before, _ := card["capture_before"].(float64); before == 0 || time.Until(time.Unix(int64(before), 0)) > 8*24*time.Hour {
		t.Fatalf("the expanded latest charge = %+v, want its card's capture_before", ch)
	}
	return id
}

func capturePath(id string) string { return "/v1/payment_intents/" + id + "/capture" }

// TestManualCapture: Stripe's contract for an authorization: a partial
// final capture releases the rest; a capture beyond amount_capturable is
// amount_too_large; a capture after the final one, or of a canceled
// intent, is payment_intent_unexpected_state; captures replay under their
// key; final_capture=false needs request_multicapture.
func TestManualCapture(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{})

	id := authorized(t, base, "m1", stripetest.TokenVisa, false)
	if r := post(t, base, "c0", capturePath(id), url.Values{"amount_to_capture": {"1300"}}); r.status != 400 || errorField(r, "code") != "amount_too_large" {
		t.Fatalf("capture over the hold = %+v, want 400 amount_too_large", r)
	}
	if r := post(t, base, "c1", capturePath(id), url.Values{"amount_to_capture": {"500"}, "final_capture": {"false"}}); r.status != 400 ||
		errorField(r, "param") != "final_capture" {
		t.Fatalf("final_capture=false without multicapture = %+v, want 400 about final_capture", r)
	}
	first := post(t, base, "c2", capturePath(id), url.Values{"amount_to_capture": {"500"}})
	if first.status != 200 || first.body["status"] != "succeeded" || first.body["amount_received"] != 500.0 || first.body["amount_capturable"] != 0.0 {
		t.Fatalf("partial final capture = %+v, want succeeded with 500 received, nothing capturable", first)
	}
	if r := post(t, base, "c2", capturePath(id), url.Values{"amount_to_capture": {"500"}}); !r.replayed || r.body["amount_received"] != 500.0 {
		t.Fatalf("its replay = %+v", r)
	}
	if r := post(t, base, "c3", capturePath(id), url.Values{"amount_to_capture": {"100"}}); r.status != 400 ||
		errorField(r, "code") != "payment_intent_unexpected_state" || errorIntentStatus(r) != "succeeded" {
		t.Fatalf("capture after the final one = %+v, want 400 payment_intent_unexpected_state", r)
	}
	if pi, _ := fake.Intent(id); pi.Captures != 1 || pi.AmountReceived != 500 {
		t.Fatalf("ledger = %+v, want one capture of 500", pi)
	}

	// Several captures, with multicapture.
	id = authorized(t, base, "m2", stripetest.TokenVisa, true)
	r := post(t, base, "c4", capturePath(id), url.Values{"amount_to_capture": {"500"}, "final_capture": {"false"}})
	if r.status != 200 || r.body["status"] != "requires_capture" || r.body["amount_received"] != 500.0 || r.body["amount_capturable"] != 750.0 {
		t.Fatalf("capture that is not final = %+v, want requires_capture, 500 received, 750 capturable", r)
	}
	if r := post(t, base, "c5", capturePath(id), url.Values{"amount_to_capture": {"800"}, "final_capture": {"false"}}); errorField(r, "code") != "amount_too_large" {
		t.Fatalf("more than is left = %+v, want amount_too_large", r)
	}
	if r := post(t, base, "c6", capturePath(id), nil); r.body["status"] != "succeeded" || r.body["amount_received"] != 1250.0 {
		t.Fatalf("capture of the rest = %+v, want succeeded, 1250 received", r)
	}

	// A canceled hold cannot be captured, and canceling releases it.
	id = authorized(t, base, "m3", stripetest.TokenVisa, false)
	if r := post(t, base, "v1", "/v1/payment_intents/"+id+"/cancel", nil); r.status != 200 || r.body["status"] != "canceled" ||
		r.body["cancellation_reason"] != nil || r.body["amount_capturable"] != 0.0 {
		t.Fatalf("cancel of a hold = %+v, want canceled, no reason, nothing capturable", r)
	}
	if r := post(t, base, "c7", capturePath(id), nil); errorField(r, "code") != "payment_intent_unexpected_state" || errorIntentStatus(r) != "canceled" {
		t.Fatalf("capture after cancel = %+v, want payment_intent_unexpected_state", r)
	}
	// An automatic intent holds nothing to capture.
	c := post(t, base, "a:create", "/v1/payment_intents", intent(stripetest.TokenVisa))
	aid, _ := c.body["id"].(string)
	post(t, base, "a:confirm", "/v1/payment_intents/"+aid+"/confirm", nil)
	if r := post(t, base, "c8", capturePath(aid), nil); errorIntentStatus(r) != "succeeded" {
		t.Fatalf("capture of an automatic intent = %+v, want payment_intent_unexpected_state", r)
	}
}

// TestHoldLapse: a hold lapses at its capture_before (by age, or Expire):
// a capture is then charge_expired_for_capture and the intent canceled
// with cancellation_reason automatic.
func TestHoldLapse(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{AuthorizationExpiry: time.Millisecond})
	id := authorized(t, base, "l1", stripetest.TokenVisa, false)
	lapsed := id
	time.Sleep(5 * time.Millisecond)
	if r := post(t, base, "lc1", capturePath(id), nil); r.status != 400 || errorField(r, "code") != "charge_expired_for_capture" {
		t.Fatalf("capture of a lapsed hold = %+v, want 400 charge_expired_for_capture", r)
	}
	if r := send(t, http.MethodGet, base, apiKey, "", "/v1/payment_intents/"+id, nil); r.body["status"] != "canceled" ||
		r.body["cancellation_reason"] != "automatic" {
		t.Fatalf("lapsed intent = %+v, want canceled, automatic", r)
	}

	fake2, base2 := newServer(t, stripetest.Options{})
	id = authorized(t, base2, "l2", stripetest.TokenVisa, false)
	if !fake2.Expire(id) || fake2.Expire(id) {
		t.Fatal("Expire: want true once, then false")
	}
	if r := post(t, base2, "lv", "/v1/payment_intents/"+id+"/cancel", nil); errorIntentStatus(r) != "canceled" {
		t.Fatalf("cancel of a lapsed hold = %+v, want payment_intent_unexpected_state", r)
	}
	if pi, _ := fake2.Intent(id); pi.Status != "canceled" || pi.CancellationReason != "automatic" {
		t.Fatalf("expired intent = %+v, want canceled, automatic", pi)
	}
	if pi, _ := fake.Intent(lapsed); pi.Status != "canceled" || pi.Captures != 0 {
		t.Fatalf("lapsed intent = %+v, want canceled, never captured", pi)
	}
}

// TestHoldFaultTokens: the hold tokens' captures and cancels are executed
// and then faulted: held past the client's patience, or a saved 500.
func TestHoldFaultTokens(t *testing.T) {
	t.Parallel()
	fake, base := newServer(t, stripetest.Options{Hold: 200 * time.Millisecond})
	id := authorized(t, base, "f1", stripetest.TokenHold500, false)
	r1 := post(t, base, "fc1", capturePath(id), nil)
	r2 := post(t, base, "fc1", capturePath(id), nil)
	if r1.status != 500 || r2.status != 500 || !r2.replayed {
		t.Fatalf("capture = %+v, then %+v; want a 500 and its replay", r1, r2)
	}
	if pi, _ := fake.Intent(id); pi.Status != "succeeded" || pi.Captures != 1 {
		t.Fatalf("ledger = %+v, want captured once behind the 500", pi)
	}
	id = authorized(t, base, "f2", stripetest.TokenHoldTimeout, false)
	start := time.Now()
	if r := post(t, base, "fv1", "/v1/payment_intents/"+id+"/cancel", nil); r.status != 200 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("held cancel = %+v after %s, want 200 after the hold", r, time.Since(start))
	}
}
