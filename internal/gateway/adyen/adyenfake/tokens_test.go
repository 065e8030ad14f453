package adyenfake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	e := start(t, Config{ClientTimeout: 10 * time.Second})

	for _, c := range []struct {
		token, resultCode, reason, code string
	}{
		{"tok_error", "Error", "Acquirer Error", "4"},
		{"tok_nonsense", "Refused", "Invalid Card Number", "8"},
		{"tok_capture_fail", "Authorised", "", ""},
		{"tok_refund_fail", "Authorised", "", ""},
		{"tok_lapse_60000", "Authorised", "", ""},
		{"tok_slow_10", "Authorised", "", ""},
	} {
		m := e.pay("t-"+c.token, c.token, 500)
		if m["resultCode"] != c.resultCode || (c.reason != "" && (m["refusalReason"] != c.reason || m["refusalReasonCode"] != c.code)) {
			t.Errorf("%s: %v", c.token, m)
		}
		n := e.rc.wait("t-"+c.token, 1)[0]
		if want := fmt.Sprint(c.resultCode == "Authorised"); n.EventCode != "AUTHORISATION" || n.Success != want {
			t.Errorf("%s: notification %+v, want success %s", c.token, n, want)
		}
	}

	// encryptedCardNumber "test_<token>" stands for the token.
	body := strings.Replace(paymentBody("t-enc", "", 500), `"storedPaymentMethodId":""`, `"encryptedCardNumber":"test_tok_decline"`, 1)
	if r := e.post("/payments", "", body); r.json(t)["resultCode"] != "Refused" {
		t.Errorf("encryptedCardNumber test_tok_decline: %d %s", r.code, r.body)
	}

	// tok_received: Received, then only the notification tells.
	m := e.pay("t-received", "tok_received", 500)
	if m["resultCode"] != "Received" || m["pspReference"] == "" {
		t.Errorf("tok_received: %v", m)
	}
	if n := e.rc.wait("t-received", 1)[0]; n.Success != "true" || n.PSPReference != m["pspReference"] {
		t.Errorf("tok_received notification: %+v", n)
	}

	// tok_5xx: 500, nothing made.
	before := len(e.fake.Ledger())
	if r := e.post("/payments", "k-5xx", paymentBody("t-5xx", "tok_5xx", 500)); r.code != http.StatusInternalServerError || r.json(t)["errorType"] == nil {
		t.Errorf("tok_5xx: %d %s", r.code, r.body)
	}
	if got := len(e.fake.Ledger()); got != before {
		t.Errorf("tok_5xx made a payment")
	}

	// tok_5xx_after: 500 after authorising; the key's replay tells.
	if r := e.post("/payments", "k-5xx-after", paymentBody("t-5xx-after", "tok_5xx_after", 500)); r.code != http.StatusInternalServerError {
		t.Errorf("tok_5xx_after: %d %s", r.code, r.body)
	}
	if r := e.post("/payments", "k-5xx-after", paymentBody("t-5xx-after", "tok_5xx_after", 500)); r.code != http.StatusOK || r.json(t)["resultCode"] != "Authorised" {
		t.Errorf("tok_5xx_after replayed: %d %s", r.code, r.body)
	}
	e.rc.wait("t-5xx-after", 1)

	// tok_drop: the connection drops after authorising.
	if _, err := e.try("k-drop", paymentBody("t-drop", "tok_drop", 500), 10*time.Second); err == nil {
		t.Errorf("tok_drop answered")
	}
	e.rc.wait("t-drop", 1)

	// tok_timeout: authorised, the answer held past the client's deadline.
	if _, err := e.try("k-timeout", paymentBody("t-timeout", "tok_timeout", 500), time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("tok_timeout: %v, want a timeout", err)
	}
	if n := e.rc.wait("t-timeout", 1)[0]; n.Success != "true" {
		t.Errorf("tok_timeout notification: %+v", n)
	}

	// tok_silent: authorised, and never notified.
	if m := e.pay("t-silent", "tok_silent", 500); m["resultCode"] != "Authorised" {
		t.Errorf("tok_silent: %v", m)
	}
	e.settle()
	for _, n := range e.fake.Sent() {
		if n.MerchantReference == "t-silent" {
			t.Errorf("tok_silent notified: %+v", n)
		}
	}

	statuses := map[string]string{}
	for _, p := range e.fake.Ledger() {
		statuses[p.Reference] = p.Status
	}
	for ref, want := range map[string]string{
		"t-tok_error": StatusError, "t-tok_nonsense": StatusRefused, "t-received": StatusAuthorised,
		"t-5xx-after": StatusAuthorised, "t-drop": StatusAuthorised, "t-timeout": StatusAuthorised, "t-silent": StatusAuthorised,
	} {
		if statuses[ref] != want {
			t.Errorf("ledger: %s is %q, want %q", ref, statuses[ref], want)
		}
	}
}

// try posts a payment with a client deadline and returns its status.
func (e *env) try(idem, body string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v71/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("Idempotency-Key", idem)
	// A fresh connection each time: Go's transport resends a request
	// that carries an Idempotency-Key when a reused connection drops, and
	// the replay would hide the drop.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func Test3DSecure(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, c := range []struct{ result, resultCode, success string }{
		{"authorised", "Authorised", "true"},
		{"refused", "Refused", "false"},
	} {
		ref := "3ds-" + c.result
		m := e.pay(ref, "tok_3ds", 700)
		action, _ := m["action"].(map[string]any)
		if m["resultCode"] != "RedirectShopper" || action["type"] != "redirect" || action["method"] != "GET" || !strings.HasPrefix(fmt.Sprint(action["url"]), e.url+"/challenge/") {
			t.Fatalf("tok_3ds: %v", m)
		}
		page, err := noFollow.Get(fmt.Sprint(action["url"]))
		if err != nil || page.StatusCode != http.StatusOK {
			t.Fatalf("challenge page: %v %v", page, err)
		}
		page.Body.Close()
		done, err := noFollow.Get(fmt.Sprint(action["url"]) + "?result=" + c.result)
		if err != nil || done.StatusCode != http.StatusFound {
			t.Fatalf("challenge %s: %v %v", c.result, done, err)
		}
		done.Body.Close()
		back, err := url.Parse(done.Header.Get("Location"))
		if err != nil || back.Host != "shop.example" || back.Query().Get("redirectResult") == "" {
			t.Fatalf("redirect to %q", done.Header.Get("Location"))
		}
		// The notification comes without /payments/details.
		if n := e.rc.wait(ref, 1)[0]; n.EventCode != "AUTHORISATION" || n.Success != c.success || n.PSPReference != m["pspReference"] {
			t.Errorf("%s: notification %+v", c.result, n)
		}
		r := e.post("/payments/details", "", fmt.Sprintf(`{"details":{"redirectResult":%q}}`, back.Query().Get("redirectResult")))
		if d := r.json(t); r.code != http.StatusOK || d["resultCode"] != c.resultCode || d["pspReference"] != m["pspReference"] {
			t.Errorf("%s: details %d %s", c.result, r.code, r.body)
		}
	}
	if r := e.post("/payments/details", "", `{"details":{"redirectResult":"forged"}}`); r.code != http.StatusUnprocessableEntity {
		t.Errorf("forged redirectResult: %d %s", r.code, r.body)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})

	first := e.post("/payments", "key-1", paymentBody("idem-1", "tok_ok", 900))
	again := e.post("/payments", "key-1", paymentBody("idem-1", "tok_ok", 900))
	other := e.post("/payments", "key-1", paymentBody("idem-1", "tok_decline", 1))
	if first.code != http.StatusOK || string(again.body) != string(first.body) || again.code != first.code || string(other.body) != string(first.body) {
		t.Fatalf("replays:\n%d %s\n%d %s\n%d %s", first.code, first.body, again.code, again.body, other.code, other.body)
	}
	if again.header.Get("Idempotency-Key") != "key-1" {
		t.Errorf("replay's Idempotency-Key header: %q", again.header.Get("Idempotency-Key"))
	}
	if n := len(e.fake.Ledger()); n != 1 {
		t.Fatalf("%d payments for one key", n)
	}

	// A request whose key is in flight is refused as Adyen documents.
	var slow reply
	var wg sync.WaitGroup
	wg.Go(func() { slow = e.post("/payments", "key-2", paymentBody("idem-2", "tok_slow_3000", 900)) })
	for len(e.fake.Ledger()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	busy := e.post("/payments", "key-2", paymentBody("idem-2", "tok_slow_3000", 900))
	m := busy.json(t)
	if busy.code != http.StatusUnprocessableEntity || m["errorCode"] != "704" || busy.header.Get("Transient-Error") != "true" {
		t.Errorf("concurrent same key: %d %s %v", busy.code, busy.body, busy.header)
	}
	wg.Wait()
	if slow.code != http.StatusOK || slow.json(t)["resultCode"] != "Authorised" {
		t.Fatalf("slow payment: %d %s", slow.code, slow.body)
	}
	if r := e.post("/payments", "key-2", paymentBody("idem-2", "tok_slow_3000", 900)); string(r.body) != string(slow.body) {
		t.Errorf("replay after the slow one: %s, want %s", r.body, slow.body)
	}

	// Modifications too: a capture replayed is one capture.
	psp := e.pay("idem-3", "tok_ok", 900)["pspReference"].(string)
	c1 := e.post("/payments/"+psp+"/captures", "cap-1", captureBody("idem-3:capture", 900))
	c2 := e.post("/payments/"+psp+"/captures", "cap-1", captureBody("idem-3:capture", 900))
	if c1.code != http.StatusCreated || string(c1.body) != string(c2.body) {
		t.Fatalf("capture replay: %s / %s", c1.body, c2.body)
	}
	for _, p := range e.fake.Ledger() {
		if p.Reference == "idem-3" && (len(p.Captures) != 1 || p.AmountCaptured != 900) {
			t.Fatalf("captures for one key: %+v", p)
		}
	}
	if n := len(e.fake.Ledger()); n != 3 {
		t.Fatalf("%d payments, want 3", n)
	}
}

func captureBody(ref string, value int64) string {
	return fmt.Sprintf(`{"amount":{"currency":"EUR","value":%d},"merchantAccount":%q,"reference":%q}`, value, testMerchant, ref)
}

func cancelBody(ref string) string {
	return fmt.Sprintf(`{"merchantAccount":%q,"reference":%q}`, testMerchant, ref)
}

func technicalCancelBody(paymentRef string) string {
	return fmt.Sprintf(`{"merchantAccount":%q,"paymentReference":%q,"reference":%q}`, testMerchant, paymentRef, paymentRef+":cancel")
}

// modify posts a modification, expects 201 "received", and returns the
// notifications about ref once n have arrived.
func (e *env) modify(path, body, ref string, n int) []wireItem {
	e.t.Helper()
	r := e.post(path, "", body)
	if m := r.json(e.t); r.code != http.StatusCreated || m["status"] != "received" {
		e.t.Fatalf("POST %s: %d %s", path, r.code, r.body)
	}
	return e.rc.wait(ref, n)
}

func TestCapturesCancelsRefunds(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	psp := e.pay("cap", "tok_ok", 1000)["pspReference"].(string)
	caps := "/payments/" + psp + "/captures"
	for i, c := range []struct {
		value   int64
		success string
	}{{400, "true"}, {600, "true"}, {1, "false"}} {
		ref := fmt.Sprintf("cap:c%d", i)
		n := e.modify(caps, captureBody(ref, c.value), ref, 1)[0]
		if n.EventCode != "CAPTURE" || n.Success != c.success || n.OriginalReference != psp || n.Amount.Value != c.value {
			t.Errorf("capture %d of %d: %+v", i, c.value, n)
		}
		if c.success == "false" && n.Reason != "Insufficient balance on payment" {
			t.Errorf("capture beyond the authorisation: reason %q", n.Reason)
		}
	}
	refs := "/payments/" + psp + "/refunds"
	if n := e.modify(refs, captureBody("cap:r1", 300), "cap:r1", 1)[0]; n.EventCode != "REFUND" || n.Success != "true" {
		t.Errorf("refund: %+v", n)
	}
	if n := e.modify(refs, captureBody("cap:r2", 800), "cap:r2", 1)[0]; n.EventCode != "REFUND" || n.Success != "false" {
		t.Errorf("refund beyond the captured: %+v", n)
	}
	if n := e.modify("/payments/"+psp+"/cancels", cancelBody("cap:v"), "cap:v", 1)[0]; n.EventCode != "CANCELLATION" || n.Success != "false" {
		t.Errorf("cancel of a captured payment: %+v", n)
	}
	p := e.payment("cap")
	if p.Status != StatusCaptured || p.AmountCaptured != 1000 || p.AmountRefunded != 300 || len(p.Captures) != 3 ||
		p.Captures[2].Status != ModFailed || len(p.Refunds) != 2 || len(p.Cancels) != 1 {
		t.Errorf("ledger: %+v", p)
	}

	// A cancel releases an authorisation; a capture after it fails.
	psp = e.pay("void", "tok_ok", 1000)["pspReference"].(string)
	if n := e.modify("/payments/"+psp+"/cancels", cancelBody("void:v"), "void:v", 1)[0]; n.Success != "true" || n.OriginalReference != psp {
		t.Errorf("cancel: %+v", n)
	}
	if n := e.modify("/payments/"+psp+"/captures", captureBody("void:c", 10), "void:c", 1)[0]; n.Success != "false" || n.Reason != "Payment cancelled" {
		t.Errorf("capture after cancel: %+v", n)
	}
	if p := e.payment("void"); p.Status != StatusCancelled || p.AmountCaptured != 0 {
		t.Errorf("ledger: %+v", p)
	}

	// tok_capture_fail: CAPTURE, then CAPTURE_FAILED; nothing taken.
	psp = e.pay("cf", "tok_capture_fail", 1000)["pspReference"].(string)
	got := e.modify("/payments/"+psp+"/captures", captureBody("cf:c", 1000), "cf:c", 2)
	codes := map[string]string{got[0].EventCode: got[0].Success, got[1].EventCode: got[1].Success}
	if codes["CAPTURE"] != "true" || codes["CAPTURE_FAILED"] != "true" {
		t.Errorf("tok_capture_fail: %+v", got)
	}
	if p := e.payment("cf"); p.AmountCaptured != 0 || p.Captures[0].Status != ModFailed {
		t.Errorf("ledger: %+v", p)
	}

	// tok_refund_fail: REFUND, then REFUND_FAILED.
	psp = e.pay("rf", "tok_refund_fail", 1000)["pspReference"].(string)
	e.modify("/payments/"+psp+"/captures", captureBody("rf:c", 1000), "rf:c", 1)
	got = e.modify("/payments/"+psp+"/refunds", captureBody("rf:r", 1000), "rf:r", 2)
	codes = map[string]string{got[0].EventCode: got[0].Success, got[1].EventCode: got[1].Success}
	if codes["REFUND"] != "true" || codes["REFUND_FAILED"] != "true" {
		t.Errorf("tok_refund_fail: %+v", got)
	}
	if p := e.payment("rf"); p.AmountRefunded != 0 || p.Refunds[0].Status != ModFailed {
		t.Errorf("ledger: %+v", p)
	}

	// tok_lapse_<ms>: the hold lapses when its time comes, asked about or
	// not, and Adyen says so (EXPIRE, about the payment, for what was
	// held); captures after the lapse fail.
	psp = e.pay("lapse", "tok_lapse_50", 1000)["pspReference"].(string)
	got = e.rc.wait("lapse", 2) // AUTHORISATION, then EXPIRE
	codes = map[string]string{got[0].EventCode: got[0].Success, got[1].EventCode: got[1].Success}
	if codes["AUTHORISATION"] != "true" || codes["EXPIRE"] != "true" {
		t.Errorf("tok_lapse_50: %+v", got)
	}
	for _, n := range got {
		if n.EventCode == "EXPIRE" && (n.PSPReference != psp || n.Amount.Value != 1000) {
			t.Errorf("EXPIRE: %+v", n)
		}
	}
	if n := e.modify("/payments/"+psp+"/captures", captureBody("lapse:c", 1000), "lapse:c", 1)[0]; n.Success != "false" || n.Reason != "Authorisation expired" {
		t.Errorf("capture after the lapse: %+v", n)
	}
	if p := e.payment("lapse"); p.Status != StatusExpired || p.AmountCaptured != 0 {
		t.Errorf("ledger: %+v", p)
	}

	if r := e.post("/payments/NOSUCHPAYMENT000/captures", "", captureBody("x", 1)); r.code != http.StatusUnprocessableEntity || r.json(t)["errorCode"] != "167" {
		t.Errorf("capture of an unknown payment: %d %s", r.code, r.body)
	}
}

func (e *env) payment(ref string) Payment {
	e.t.Helper()
	for _, p := range e.fake.Ledger() {
		if p.Reference == ref {
			return p
		}
	}
	e.t.Fatalf("no payment %s in the ledger", ref)
	return Payment{}
}

func TestTechnicalCancel(t *testing.T) {
	t.Parallel()
	e := start(t, Config{ClientTimeout: 10 * time.Second})

	// An authorisation whose answer was lost is released.
	if _, err := e.try("tc-1", paymentBody("tc-lost", "tok_timeout", 800), time.Second); err == nil {
		t.Fatal("tok_timeout answered in time")
	}
	psp := e.payment("tc-lost").PSPReference
	got := e.modify("/cancels", technicalCancelBody("tc-lost"), "tc-lost", 2)
	n := got[len(got)-1]
	if got[0].EventCode == "TECHNICAL_CANCEL" {
		n = got[0]
	}
	if n.EventCode != "TECHNICAL_CANCEL" || n.Success != "true" || n.OriginalReference != psp {
		t.Errorf("technical cancel of an authorisation: %+v", got)
	}
	if p := e.payment("tc-lost"); p.Status != StatusCancelled || len(p.TechnicalCancels) != 1 {
		t.Errorf("ledger: %+v", p)
	}

	// A captured payment is not cancelled.
	psp = e.pay("tc-captured", "tok_ok", 800)["pspReference"].(string)
	e.modify("/payments/"+psp+"/captures", captureBody("tc-captured:c", 800), "tc-captured:c", 1)
	got = e.modify("/cancels", technicalCancelBody("tc-captured"), "tc-captured", 2)
	for _, n := range got {
		if n.EventCode == "TECHNICAL_CANCEL" && (n.Success != "false" || n.Reason == "") {
			t.Errorf("technical cancel of a captured payment: %+v", n)
		}
	}
	if p := e.payment("tc-captured"); p.Status != StatusCaptured {
		t.Errorf("ledger: %+v", p)
	}

	// No payment with the reference: nothing is held.
	n = e.modify("/cancels", technicalCancelBody("tc-none"), "tc-none", 1)[0]
	if n.EventCode != "TECHNICAL_CANCEL" || n.Success != "true" || n.OriginalReference != "" {
		t.Errorf("technical cancel of nothing: %+v", n)
	}
	all := e.fake.TechnicalCancels()
	if len(all) != 3 || all[2].PaymentReference != "tc-none" || all[2].PaymentPSPReference != "" || all[2].Status != ModSucceeded {
		t.Errorf("technical cancels: %+v", all)
	}
}

func TestNotificationsRetriedUntilAccepted(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	rc.refuse, rc.wrong = 2, 2
	rc.user, rc.pass = "adyen", "s3cret"
	e := start(t, Config{NotifyURL: rc.srv.URL, NotifyUser: "adyen", NotifyPassword: "s3cret",
		Notify: NotifyFaults{RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}})
	e.rc = rc
	e.pay("retry", "tok_ok", 100)
	rc.wait("retry", 1)
	rc.mu.Lock()
	posts := rc.posts
	rc.mu.Unlock()
	if posts != 5 {
		t.Errorf("%d deliveries, want 5 (2 refused, 2 not [accepted], 1 accepted)", posts)
	}
	if e.settle() != 1 || len(e.fake.Sent()) != 1 {
		t.Errorf("sent: %+v", e.fake.Sent())
	}
}

func TestNotificationFaults(t *testing.T) {
	t.Parallel()
	run := func(nf NotifyFaults, seed uint64, payments int) (*env, int) {
		e := start(t, Config{Notify: nf, Seed: seed})
		for i := range payments {
			e.pay(fmt.Sprintf("nf-%d", i), "tok_ok", 100)
		}
		return e, e.settle()
	}
	if _, n := run(NotifyFaults{Loss: 1}, 1, 10); n != 0 {
		t.Errorf("loss 1: %d deliveries", n)
	}
	if e, n := run(NotifyFaults{Duplicate: 1}, 1, 10); n != 20 {
		t.Errorf("duplicate 1: %d deliveries, want 20", n)
	} else {
		for i := range 10 {
			e.rc.wait(fmt.Sprintf("nf-%d", i), 2)
		}
	}
	_, a := run(NotifyFaults{Loss: 0.3, Duplicate: 0.3}, 7, 40)
	_, b := run(NotifyFaults{Loss: 0.3, Duplicate: 0.3}, 7, 40)
	if a != b || a == 40 || a < 10 {
		t.Errorf("loss and duplication 0.3 with one seed: %d and %d deliveries of 40", a, b)
	}

	// Random delays reorder them.
	e, _ := run(NotifyFaults{MaxDelay: 300 * time.Millisecond, Reorder: 0.3, ReorderDelay: 100 * time.Millisecond}, 3, 20)
	order := e.fake.Sent()
	inOrder := true
	for i := 1; i < len(order); i++ {
		if order[i].PSPReference < order[i-1].PSPReference {
			inOrder = false
		}
	}
	if inOrder {
		t.Errorf("20 notifications with random delays arrived in order")
	}
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	e := start(t, Config{Seed: 5, ClientTimeout: time.Second,
		Random: RandomFaults{Refuse: 0.2, FiveXXBefore: 0.2, FiveXXAfter: 0.2, DropAfter: 0.2, Slow: 0.2, SlowMax: 20 * time.Millisecond}})
	codes := map[string]int{}
	for i := range 30 {
		body := paymentBody(fmt.Sprintf("rnd-%d", i), "tok_random", 100)
		code, err := e.try(fmt.Sprintf("rnd-%d", i), body, 10*time.Second)
		switch {
		case err != nil:
			codes["dropped"]++
		case code == http.StatusInternalServerError:
			codes["500"]++
		default:
			codes[fmt.Sprint(code)]++
		}
	}
	if codes["dropped"] == 0 || codes["500"] == 0 || codes["200"] == 0 {
		t.Errorf("30 payments under random faults: %v", codes)
	}
	refused := 0
	for _, p := range e.fake.Ledger() {
		if p.Status == StatusRefused {
			refused++
		}
	}
	if refused == 0 || len(e.fake.Ledger()) == 30 {
		t.Errorf("ledger under random faults: %d payments, %d refused", len(e.fake.Ledger()), refused)
	}
}

// TestConcurrentCapturesNeverExceedTheAuthorisation races captures that
// together ask for more than is held: only what is held is taken.
func TestConcurrentCapturesNeverExceedTheAuthorisation(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	psp := e.pay("race", "tok_ok", 1000)["pspReference"].(string)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := e.post("/payments/"+psp+"/captures", fmt.Sprintf("race:%d", i), captureBody(fmt.Sprintf("race:c%d", i), 300))
			if r.code != http.StatusCreated {
				t.Errorf("capture %d: %d %s", i, r.code, r.body)
			}
		})
	}
	wg.Wait()
	p := e.payment("race")
	succeeded := 0
	for _, c := range p.Captures {
		if c.Status == ModSucceeded {
			succeeded++
		}
	}
	if len(p.Captures) != 8 || succeeded != 3 || p.AmountCaptured != 900 {
		t.Errorf("8 racing captures of 300 against 1000: %d succeeded, %d captured", succeeded, p.AmountCaptured)
	}
}
