package adyenfake

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testKey      = "test-api-key"
	testMerchant = "SettleTestMerchant"
	testHMAC     = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
)

// receiver is a merchant's notification endpoint: it checks each item's
// signature as Adyen's documentation says to, and answers "[accepted]"
// unless told to refuse the first deliveries.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	items  []wireItem
	posts  int
	refuse int // answer 500 to this many deliveries first
	wrong  int // then answer 200 without "[accepted]" this many times
	user   string
	pass   string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts++
	if rc.user != "" {
		u, p, ok := r.BasicAuth()
		if !ok || u != rc.user || p != rc.pass {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if rc.refuse > 0 {
		rc.refuse--
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	if rc.wrong > 0 {
		rc.wrong--
		io.WriteString(w, "ok")
		return
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Live != "false" {
		rc.t.Errorf("notification: %v, live %q: %s", err, req.Live, body)
	}
	key, _ := hex.DecodeString(testHMAC)
	for _, wrapped := range req.NotificationItems {
		it := wrapped.NotificationRequestItem
		// Adyen's documented signing string: the fields joined by
		// colons, absent ones empty.
		signed := strings.Join([]string{it.PSPReference, it.OriginalReference, it.MerchantAccountCode,
			it.MerchantReference, fmt.Sprint(it.Amount.Value), it.Amount.Currency, it.EventCode, it.Success}, ":")
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(signed))
		if want := base64.StdEncoding.EncodeToString(mac.Sum(nil)); it.AdditionalData["hmacSignature"] != want {
			rc.t.Errorf("notification %s about %s: hmacSignature %q, want %q", it.EventCode, it.PSPReference, it.AdditionalData["hmacSignature"], want)
		}
		if _, err := time.Parse(time.RFC3339, it.EventDate); err != nil {
			rc.t.Errorf("notification eventDate %q: %v", it.EventDate, err)
		}
		rc.items = append(rc.items, it)
	}
	io.WriteString(w, "[accepted]")
}

// wait returns the items received once n have arrived about ref (a
// merchantReference), or fails the test.
func (rc *receiver) wait(ref string, n int) []wireItem {
	rc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rc.mu.Lock()
		var got []wireItem
		for _, it := range rc.items {
			if it.MerchantReference == ref {
				got = append(got, it)
			}
		}
		rc.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			rc.t.Fatalf("%d notifications about %s, want %d: %+v", len(got), ref, n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits until every delivery the fake planned was accepted, and
// returns how many there were.
func (e *env) settle() int {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.fake.mu.Lock()
		planned, sent := e.fake.planned, len(e.fake.sent)
		e.fake.mu.Unlock()
		if sent == planned {
			return planned
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d notifications delivered", sent, planned)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type env struct {
	t    *testing.T
	fake *Server
	url  string
	rc   *receiver
}

// start runs a fake (with cfg's notification and fault settings) and a
// receiver; at the end it checks the fake broke no contract.
func start(t *testing.T, cfg Config) *env {
	t.Helper()
	rc := newReceiver(t)
	cfg.APIKey, cfg.MerchantAccount, cfg.HMACKey = testKey, testMerchant, testHMAC
	if cfg.NotifyURL == "" {
		cfg.NotifyURL = rc.srv.URL
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		f.Close()
		if errs := f.ContractErrors(); len(errs) > 0 {
			t.Errorf("contract errors:\n%s", strings.Join(errs, "\n"))
		}
	})
	return &env{t: t, fake: f, url: srv.URL, rc: rc}
}

type reply struct {
	code   int
	body   []byte
	header http.Header
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d %q: %v", r.code, r.body, err)
	}
	return m
}

// post sends body to path with the test key and idem as Idempotency-Key
// (if not empty).
func (e *env) post(path, idem, body string) reply {
	e.t.Helper()
	return e.postKey(path, testKey, idem, body)
}

func (e *env) postKey(path, key, idem, body string) reply {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/v71"+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: b, header: resp.Header}
}

func paymentBody(ref, token string, value int64) string {
	return fmt.Sprintf(`{"amount":{"currency":"EUR","value":%d},"merchantAccount":%q,"reference":%q,`+
		`"returnUrl":"https://shop.example/return","paymentMethod":{"type":"scheme","storedPaymentMethodId":%q},`+
		`"shopperReference":"shopper-1","shopperInteraction":"ContAuth","recurringProcessingModel":"CardOnFile",`+
		`"additionalData":{"manualCapture":"true"}}`, value, testMerchant, ref, token)
}

func (e *env) pay(ref, token string, value int64) map[string]any {
	e.t.Helper()
	r := e.post("/payments", ref, paymentBody(ref, token, value))
	if r.code != http.StatusOK {
		e.t.Fatalf("payment %s: %d %s", token, r.code, r.body)
	}
	return r.json(e.t)
}

func TestContractRejectsMalformedRequests(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	for name, body := range map[string]string{
		"amount.value a string": strings.Replace(paymentBody("bad-1", "tok_ok", 1000), `"value":1000`, `"value":"1000"`, 1),
		"no merchantAccount":    strings.Replace(paymentBody("bad-2", "tok_ok", 1000), `"merchantAccount":"`+testMerchant+`",`, "", 1),
		"no reference":          strings.Replace(paymentBody("bad-3", "tok_ok", 1000), `"reference":"bad-3",`, "", 1),
		"not JSON":              `{"amount":`,
		"no shopperReference":   strings.Replace(paymentBody("bad-4", "tok_ok", 1000), `"shopperReference":"shopper-1",`, "", 1),
	} {
		r := e.post("/payments", "", body)
		m := r.json(t)
		if r.code != http.StatusUnprocessableEntity || m["status"] != float64(422) || m["errorType"] != "validation" || m["errorCode"] == "" || m["message"] == "" {
			t.Errorf("%s: %d %s, want 422 validation", name, r.code, r.body)
		}
	}
	if got := e.fake.Ledger(); len(got) != 0 {
		t.Fatalf("malformed requests made payments: %+v", got)
	}
	m := e.pay("good-1", "tok_ok", 1000)
	if m["resultCode"] != "Authorised" {
		t.Fatalf("the valid request: %v", m)
	}
	if got := e.fake.Ledger(); len(got) != 1 || got[0].Status != StatusAuthorised {
		t.Fatalf("ledger: %+v", got)
	}
}

func TestAuthAndMerchantAccount(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	body := paymentBody("auth-1", "tok_ok", 1000)
	if r := e.postKey("/payments", "", "", body); r.code != http.StatusUnauthorized || r.json(t)["errorType"] != "security" {
		t.Errorf("no key: %d %s", r.code, r.body)
	}
	if r := e.postKey("/payments", "wrong", "", body); r.code != http.StatusForbidden {
		t.Errorf("wrong key: %d %s", r.code, r.body)
	}
	other := strings.Replace(body, testMerchant, "SomeoneElse", 1)
	if r := e.post("/payments", "", other); r.code != http.StatusForbidden || r.json(t)["errorCode"] != "901" {
		t.Errorf("other merchant account: %d %s", r.code, r.body)
	}
	if got := e.fake.Ledger(); len(got) != 0 {
		t.Fatalf("refused requests made payments: %+v", got)
	}
}

func TestAuthorisedAndRefusedAreNotified(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	ok := e.pay("ok-1", "tok_ok", 1250)
	if ok["resultCode"] != "Authorised" || ok["pspReference"] == nil || len(ok["pspReference"].(string)) != 16 {
		t.Fatalf("tok_ok: %v", ok)
	}
	n := e.rc.wait("ok-1", 1)[0]
	if n.EventCode != "AUTHORISATION" || n.Success != "true" || n.PSPReference != ok["pspReference"] ||
		n.Amount != (amount{"EUR", 1250}) || n.MerchantAccountCode != testMerchant {
		t.Fatalf("tok_ok notification: %+v", n)
	}

	no := e.pay("no-1", "tok_decline", 1250)
	if no["resultCode"] != "Refused" || no["refusalReason"] != "Refused" || no["refusalReasonCode"] != "2" {
		t.Fatalf("tok_decline: %v", no)
	}
	n = e.rc.wait("no-1", 1)[0]
	if n.EventCode != "AUTHORISATION" || n.Success != "false" || n.Reason != "Refused" {
		t.Fatalf("tok_decline notification: %+v", n)
	}
	led := e.fake.Ledger()
	if len(led) != 2 || led[0].Status != StatusAuthorised || led[0].AmountAuthorised != 1250 || led[1].Status != StatusRefused {
		t.Fatalf("ledger: %+v", led)
	}
}

// TestContractCatchesTheFakesOwnMistakes shows the checks of answers and
// notifications can fail, so an empty ContractErrors means something.
func TestContractCatchesTheFakesOwnMistakes(t *testing.T) {
	t.Parallel()
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	body := captureBody("c", 100)
	r := httptest.NewRequest(http.MethodPost, "http://fake/v71/payments/PSP0000000000001/captures", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h := http.Header{"Content-Type": {"application/json"}}
	good := `{"amount":{"currency":"EUR","value":100},"merchantAccount":"M","paymentPspReference":"P","pspReference":"Q","reference":"c","status":"received"}`
	if p := c.checkResponse(r, []byte(body), http.StatusCreated, h, []byte(good)); len(p) != 0 {
		t.Errorf("a good capture answer: %v", p)
	}
	bad := strings.Replace(good, `"received"`, `"done"`, 1)
	if p := c.checkResponse(r, []byte(body), http.StatusCreated, h, []byte(bad)); len(p) == 0 {
		t.Error("a capture answer with status \"done\" passed")
	}
	note := `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"x"},` +
		`"amount":{"currency":"EUR","value":1},"eventCode":"CAPTURE","eventDate":"2026-01-02T03:04:05Z",` +
		`"merchantAccountCode":"M","merchantReference":"r","originalReference":"P","pspReference":"Q","success":"true"}}]}`
	if p := c.checkNotification("CAPTURE", []byte(note)); len(p) != 0 {
		t.Errorf("a good CAPTURE notification: %v", p)
	}
	if p := c.checkNotification("CAPTURE", []byte(strings.Replace(note, `"merchantReference":"r",`, "", 1))); len(p) == 0 {
		t.Error("a CAPTURE notification without merchantReference passed")
	}
}

func TestContractRejectsMalformedModifications(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	psp := e.pay("mod-bad", "tok_ok", 1000)["pspReference"].(string)
	bad := strings.Replace(captureBody("mod-bad:c", 100), `"value":100`, `"value":"100"`, 1)
	if r := e.post("/payments/"+psp+"/captures", "", bad); r.code != http.StatusUnprocessableEntity || r.json(t)["errorType"] != "validation" {
		t.Errorf("capture with a string amount: %d %s", r.code, r.body)
	}
	if r := e.post("/cancels", "", `{"merchantAccount":"`+testMerchant+`"}`); r.code != http.StatusUnprocessableEntity {
		t.Errorf("technical cancel without paymentReference: %d %s", r.code, r.body)
	}
	if p := e.payment("mod-bad"); len(p.Captures) != 0 || p.Status != StatusAuthorised || len(e.fake.TechnicalCancels()) != 0 {
		t.Errorf("malformed modifications changed the ledger: %+v", p)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	f, err := New(Config{APIKey: testKey, MerchantAccount: testMerchant})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln) }()
	e := &env{t: t, fake: f, url: "http://" + ln.Addr().String()}
	if m := e.pay("serve-1", "tok_ok", 100); m["resultCode"] != "Authorised" {
		t.Errorf("payment: %v", m)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if errs := f.ContractErrors(); len(errs) > 0 {
		t.Errorf("contract errors: %v", errs)
	}
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no API key":          {MerchantAccount: testMerchant},
		"no merchant account": {APIKey: testKey},
		"no HMAC key":         {APIKey: testKey, MerchantAccount: testMerchant, NotifyURL: "http://127.0.0.1:1/"},
		"HMAC key not hex":    {APIKey: testKey, MerchantAccount: testMerchant, NotifyURL: "http://127.0.0.1:1/", HMACKey: "xyz"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestSignMatchesAdyensVector checks the signer against the sample that
// Adyen's own libraries test their HMAC validators with.
func TestSignMatchesAdyensVector(t *testing.T) {
	t.Parallel()
	key, err := hex.DecodeString("DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00")
	if err != nil {
		t.Fatal(err)
	}
	s := SigningString("pspReference", "originalReference", "merchantAccount", "reference", 1000, "EUR", "EVENT", "true")
	if s != "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true" {
		t.Errorf("signing string %q", s)
	}
	if got, want := Sign(key, s), "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}
