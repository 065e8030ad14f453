package stripe_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/paymentintent"

	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
)

// stripeMockVersion is the stripe-mock that CI installs; keep it in step
// with .ci/run.
const stripeMockVersion = "v0.203.0"

// TestContract checks against stripe-mock, which validates requests against
// Stripe's OpenAPI schema and answers with schema fixtures, that Stripe
// accepts every request Settle sends (create, confirm, retrieve, cancel,
// a manual-capture charge's create, confirm, capture and cancel, and a
// dispute's retrieve and close)
// and that its answers decode. stripe-mock is stateless: this is about the
// wire format only; behaviour is tested against the stateful fake (package
// stripetest). A recording proxy in front of stripe-mock sees each answer's
// status.
//
// It uses STRIPE_MOCK_URL (a stripe-mock already running), or starts
// STRIPE_MOCK_BIN, or stripe-mock from PATH, GOBIN or GOPATH/bin, on a free
// loopback port. Without any, it fails when CI=true and is skipped
// otherwise.
func TestContract(t *testing.T) {
	base := stripeMock(t)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode))
		mu.Unlock()
		dispute := strings.HasPrefix(resp.Request.URL.Path, "/v1/disputes/")
		if (resp.Request.Method != http.MethodGet && !dispute) || resp.StatusCode != http.StatusOK {
			return nil
		}
		var obj map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil {
			return err
		}
		resp.Body.Close()
		if dispute {
			// stripe-mock's dispute is of a bare Charge; Settle's are of
			// PaymentIntents.
			obj["payment_intent"] = "pi_123"
		} else {
			// stripe-mock's fixture is an intent whose confirm failed; make
			// the retrieved one never confirmed, so that Lookup sends its
			// cancel.
			obj["status"], obj["last_payment_error"] = "requires_confirmation", nil
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	answered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
	// match checks that the requests were exactly want, each answered 200.
	match := func(t *testing.T, want ...string) {
		t.Helper()
		got := answered()
		if len(got) != len(want) {
			t.Fatalf("stripe-mock answered %q; want %q", got, want)
		}
		for i := range want {
			if !regexp.MustCompile("^" + want[i] + " 200$").MatchString(got[i]) {
				t.Errorf("stripe-mock answered %q; want %q answered 200", got[i], want[i])
			}
		}
	}

	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{BaseURL: srv.URL, Timeout: 10 * time.Second, MaxNetworkRetries: 2, Logger: logs.Logger()})
	req := chargeReq(stripetest.TokenVisa)
	// stripe-mock's fixtures are for 10.99 USD: with that amount, its
	// answers pass the adapter's check that an answer is about the
	// attempt, and Lookup goes on to cancel.
	req.Amount = order.Money{Currency: "USD", AmountMinor: 1099}
	// Characters that form encoding must get right.
	req.MerchantReference = "inv-1001 & co/ü?x=1"

	t.Run("charge: create and confirm are accepted and decode", func(t *testing.T) {
		res, err := g.Charge(t.Context(), req)
		// stripe-mock's fixture is a PaymentIntent in requires_payment_method.
		if res.Outcome != order.OutcomeSucceeded && res.Outcome != order.OutcomeDeclined {
			t.Errorf("Charge = %+v, %v; want a decoded PaymentIntent", res, err)
		}
		if !strings.HasPrefix(res.ChargeID, "pi_") {
			t.Errorf("ChargeID = %q, want a PaymentIntent id", res.ChargeID)
		}
		match(t, "POST /v1/payment_intents", "POST /v1/payment_intents/pi_[^/]+/confirm")
		t.Logf("stripe-mock answered %+v, %v", res, err)
	})

	t.Run("customer present: the confirm with a return_url is accepted", func(t *testing.T) {
		present := req
		present.AttemptID = order.NewID()
		present.CustomerPresent, present.ReturnURL = true, "https://checkout.example/return?o=1"
		res, err := g.Charge(t.Context(), present)
		t.Logf("Charge = %+v, %v", res, err)
		match(t, "POST /v1/payment_intents", "POST /v1/payment_intents/pi_[^/]+/confirm")
	})

	t.Run("lookup by id: retrieve and cancel are accepted and decode", func(t *testing.T) {
		byID := req
		byID.GatewayChargeID = "pi_123"
		res, err := g.Lookup(t.Context(), byID)
		t.Logf("Lookup = %+v, %v", res, err)
		// The retrieved intent was never confirmed: Lookup cancels it.
		match(t, "GET /v1/payment_intents/pi_123", "POST /v1/payment_intents/pi_123/cancel")
	})

	t.Run("lookup without an id: the replayed create is accepted", func(t *testing.T) {
		res, err := g.Lookup(t.Context(), req)
		t.Logf("Lookup = %+v, %v", res, err)
		match(t, "POST /v1/payment_intents", "GET /v1/payment_intents/pi_[^/]+", "POST /v1/payment_intents/pi_[^/]+/cancel")
	})

	t.Run("manual capture: the create, confirm, capture, cancel and retrieve are accepted", func(t *testing.T) {
		mg := newGateway(t, stripe.Config{BaseURL: srv.URL, Timeout: 10 * time.Second, Multicapture: true, Logger: logs.Logger()})
		manual := req
		manual.AttemptID, manual.Capture = order.NewID(), order.CaptureManual
		res, err := mg.Charge(t.Context(), manual)
		t.Logf("Charge = %+v, %v", res, err)
		match(t, "POST /v1/payment_intents", "POST /v1/payment_intents/pi_[^/]+/confirm")
		c := order.CaptureRequest{CaptureID: order.NewID(), OrderID: manual.OrderID, ChargeID: "pi_123",
			Amount: manual.Amount, Final: false, CreatedAt: time.Now()}
		res, err = mg.Capture(t.Context(), c)
		t.Logf("Capture = %+v, %v", res, err)
		match(t, "POST /v1/payment_intents/pi_123/capture")
		res, err = mg.Void(t.Context(), order.VoidRequest{VoidID: order.NewID(), OrderID: manual.OrderID, ChargeID: "pi_123"})
		t.Logf("Void = %+v, %v", res, err)
		match(t, "POST /v1/payment_intents/pi_123/cancel")
		// The retrieved intent reads as never confirmed: the lookup only reads.
		res, err = mg.LookupCapture(t.Context(), c)
		t.Logf("LookupCapture = %+v, %v", res, err)
		match(t, "GET /v1/payment_intents/pi_123")
	})

	t.Run("disputes: retrieve and close are accepted and decode", func(t *testing.T) {
		d, err := g.GetDispute(t.Context(), "dp_123")
		if err != nil || d.ID != "dp_123" || d.Amount.AmountMinor <= 0 || d.Stage == "" {
			t.Errorf("GetDispute = %+v, %v; want the fixture's dispute decoded", d, err)
		}
		match(t, "GET /v1/disputes/dp_123")
		// stripe-mock's fixture is open (and stays so: it is stateless),
		// so the accept sends its close.
		d, err = g.AcceptDispute(t.Context(), "dp_123")
		if err != nil || d.ID != "dp_123" {
			t.Errorf("AcceptDispute = %+v, %v; want the fixture's dispute decoded", d, err)
		}
		match(t, "GET /v1/disputes/dp_123", "POST /v1/disputes/dp_123/close")
	})

	t.Run("stripe-mock rejects what the schema does not allow", func(t *testing.T) {
		// A control: the checks above mean something only if stripe-mock
		// validates what it is sent.
		backend := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
			URL: stripego.String(base), MaxNetworkRetries: stripego.Int64(0),
			LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
		})
		params := &stripego.PaymentIntentConfirmParams{}
		params.AddExtra("settle_no_such_parameter", "1")
		_, err := paymentintent.Client{B: backend, Key: secretKey}.Confirm("pi_123", params)
		var se *stripego.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != 400 || se.Type != stripego.ErrorTypeInvalidRequest {
			t.Fatalf("unknown parameter: err = %v, want 400 invalid_request_error", err)
		}
	})

	t.Run("a rejected key is refused and stays secret", func(t *testing.T) {
		// stripe-mock quotes a rejected Authorization header whole.
		const badKey = "settle_not_a_stripe_key_9f8e7d"
		var logs logtest.Buffer
		bad := newGateway(t, stripe.Config{BaseURL: base, SecretKey: badKey, Logger: logs.Logger()})
		res, err := bad.Charge(t.Context(), req)
		if res.Outcome != order.OutcomeRefused || err == nil {
			t.Fatalf("Charge with a bad key = %+v, %v; want refused with an error", res, err)
		}
		_, lerr := bad.Lookup(t.Context(), req)
		for _, s := range []string{err.Error(), errString(lerr), logs.String()} {
			if strings.Contains(s, badKey) {
				t.Errorf("the key leaked: %s", s)
			}
		}
	})

	if strings.Contains(logs.String(), secretKey) {
		t.Errorf("logs contain the secret key:\n%s", logs.String())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// stripeMock returns the base URL of a stripe-mock for the test.
func stripeMock(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRIPE_MOCK_URL"); u != "" {
		if p, err := url.Parse(u); err != nil || p.Host == "" {
			t.Fatalf("STRIPE_MOCK_URL %q is not a URL such as http://127.0.0.1:12111", u)
		}
		return u
	}
	bin := os.Getenv("STRIPE_MOCK_BIN")
	if bin == "" {
		bin = findStripeMock()
	}
	if bin == "" {
		msg := "stripe-mock not found: set STRIPE_MOCK_URL to a running one or STRIPE_MOCK_BIN to its binary, or install it with " +
			"`GOFLAGS= go install github.com/stripe/stripe-mock@" + stripeMockVersion + "`"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return startStripeMock(t, bin)
}

// findStripeMock looks for stripe-mock in PATH, GOBIN and GOPATH/bin.
func findStripeMock() string {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(d, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "stripe-mock")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

var listeningRE = regexp.MustCompile(`Listening for HTTP at address: (\S+)`)

// startStripeMock starts bin on free loopback ports for the test's
// lifetime and returns its HTTP base URL. Both listeners are bound
// explicitly: given only -http-addr, stripe-mock also serves HTTPS on
// :12112, on every interface.
func startStripeMock(t *testing.T, bin string) string {
	t.Helper()
	out := &addrWatcher{found: make(chan string, 1)}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		_ = <-exited //nolint:staticcheck // killed: its exit status is no news
	})
	select {
	case addr := <-out.found:
		return "http://" + addr
	case err := <-exited:
		t.Fatalf("stripe-mock %s exited: %v\n%s", bin, err, out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("stripe-mock %s did not say where it listens within 30s:\n%s", bin, out.String())
	}
	return ""
}

// addrWatcher collects stripe-mock's output and reports the address of its
// HTTP listener once it is printed.
type addrWatcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	found chan string
	done  bool
}

func (w *addrWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() < 1<<16 {
		w.buf.Write(p)
	}
	if !w.done {
		if m := listeningRE.FindStringSubmatch(w.buf.String()); m != nil {
			w.done = true
			w.found <- m[1]
		}
	}
	return len(p), nil
}

func (w *addrWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestStripeTestMode runs the behaviour that matters against Stripe itself
// in test mode, when STRIPE_SECRET_KEY holds a test key (sk_test_ or
// rk_test_); STRIPE_API_BASE may point elsewhere. It is skipped otherwise,
// and refuses a live key.
func TestStripeTestMode(t *testing.T) {
	key := os.Getenv("STRIPE_SECRET_KEY")
	if key == "" {
		t.Skip("set STRIPE_SECRET_KEY=sk_test_... to run against Stripe in test mode")
	}
	if !strings.HasPrefix(key, "sk_test_") && !strings.HasPrefix(key, "rk_test_") {
		t.Fatal("STRIPE_SECRET_KEY is not a test-mode key (sk_test_ or rk_test_); refusing to charge with it")
	}
	var logs logtest.Buffer
	g := newGateway(t, stripe.Config{SecretKey: key, BaseURL: os.Getenv("STRIPE_API_BASE"), Timeout: 30 * time.Second,
		MaxNetworkRetries: 2, Logger: logs.Logger()})

	t.Run("succeeds once", func(t *testing.T) {
		req := chargeReq(stripetest.TokenVisa)
		res, err := g.Charge(t.Context(), req)
		if err != nil || res.Outcome != order.OutcomeSucceeded || !strings.HasPrefix(res.ChargeID, "pi_") {
			t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
		}
		// Without the id, the replayed create finds the same PaymentIntent.
		if again, err := g.Lookup(t.Context(), req); err != nil || again != res {
			t.Fatalf("Lookup = %+v, %v; want %+v (the same PaymentIntent)", again, err, res)
		}
		byID := req
		byID.GatewayChargeID = res.ChargeID
		if again, err := g.Lookup(t.Context(), byID); err != nil || again != res {
			t.Fatalf("Lookup by id = %+v, %v; want %+v", again, err, res)
		}
		other := req
		other.Amount.AmountMinor++
		if res, err := g.Lookup(t.Context(), other); err == nil {
			t.Fatalf("Lookup with other parameters = %+v; want idempotency_error", res)
		}
	})
	t.Run("declines", func(t *testing.T) {
		req := chargeReq(stripetest.TokenDeclined)
		res, err := g.Charge(t.Context(), req)
		if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode == "" {
			t.Fatalf("Charge = %+v, %v; want declined", res, err)
		}
		if again, err := g.Lookup(t.Context(), req); err != nil || again.Outcome != order.OutcomeDeclined {
			t.Fatalf("Lookup = %+v, %v; want declined", again, err)
		}
	})
	if strings.Contains(logs.String(), key) {
		t.Error("logs contain the secret key")
	}
}

// TestContractListing checks against stripe-mock that the audit's
// listings send what Stripe's schema accepts (created range, limit,
// expand, ending_before) and that the lists decode into the records the
// audit matches. stripe-mock is stateless and answers every list with its
// one fixture, created 1234567890, and has_more false: a proxy says
// has_more on a first page, so that the adapter walks the window twice
// (a window of one page is read once), and turns the answer to a page
// walked with ending_before into a newer record, so that the second walk
// has something to list.
func TestContractListing(t *testing.T) {
	base := stripeMock(t)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		queries []string
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		mu.Lock()
		queries = append(queries, fmt.Sprintf("%s %s %d %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode,
			resp.Request.URL.RawQuery))
		mu.Unlock()
		q := resp.Request.URL.Query()
		first, back := !q.Has("starting_after") && !q.Has("ending_before"), q.Has("ending_before")
		if resp.StatusCode != http.StatusOK || !first && !back {
			return nil
		}
		var list struct {
			Data    []map[string]any `json:"data"`
			HasMore bool             `json:"has_more"`
			Object  string           `json:"object"`
			URL     string           `json:"url"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return err
		}
		resp.Body.Close()
		if first {
			list.HasMore = true
		}
		for _, item := range list.Data {
			if back {
				item["id"] = item["id"].(string) + "_newer"
				item["created"] = item["created"].(float64) + 1
			}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	sent := func() []url.Values {
		mu.Lock()
		defer mu.Unlock()
		var out []url.Values
		for _, q := range queries {
			t.Log(q)
			f := strings.Fields(q)
			if len(f) < 3 || f[2] != "200" {
				t.Errorf("stripe-mock answered %q; want 200", q)
				continue
			}
			v, err := url.ParseQuery(strings.Join(f[3:], ""))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		queries = nil
		return out
	}
	// check checks the two walks' parameters: the window in whole
	// seconds, Stripe's largest page, the expansion, the first walk's
	// next page after its first, and the second walk from the first's
	// oldest record.
	check := func(t *testing.T, got []url.Values, expand, oldest string) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("%d requests, want 3 (a walk of two pages to the oldest record, a walk back from it)", len(got))
		}
		for i, q := range got {
			if q.Get("created[gte]") != "1234564291" || q.Get("created[lt]") != "1234571490" || q.Get("limit") != "100" ||
				q.Get("expand[0]") != expand {
				t.Errorf("request %d sent %v; want created[gte]=1234564291 created[lt]=1234571490 limit=100 expand[0]=%s",
					i+1, q, expand)
			}
		}
		if got[0].Has("ending_before") || got[0].Has("starting_after") || got[1].Get("starting_after") != oldest ||
			got[1].Has("ending_before") || got[2].Get("ending_before") != oldest || got[2].Has("starting_after") {
			t.Errorf("cursors: %v, %v, %v; want none, then starting_after=%s, then ending_before=%[4]s", got[0], got[1], got[2], oldest)
		}
	}

	g := newGateway(t, stripe.Config{BaseURL: srv.URL, Timeout: 10 * time.Second})
	// Around stripe-mock's fixtures' creation time, with fractions of a
	// second that must round up.
	fixture := time.Unix(1234567890, 0)
	from, to := fixture.Add(-time.Hour+time.Second/2), fixture.Add(time.Hour-time.Second/2)

	t.Run("charges", func(t *testing.T) {
		var got []order.GatewayCharge
		err := g.ListCharges(t.Context(), from, to, func(c order.GatewayCharge) error {
			got = append(got, c)
			return nil
		})
		if err != nil {
			t.Fatalf("ListCharges: %v", err)
		}
		if len(got) != 2 {
			t.Fatalf("ListCharges listed %+v; want the fixture and its newer copy", got)
		}
		first := got[0]
		// The fixture: 10.99 USD, its confirm failed (requires_payment_method).
		if !strings.HasPrefix(first.ID, "pi_") || first.Amount != (order.Money{Currency: "USD", AmountMinor: 1099}) ||
			first.Outcome != order.OutcomeDeclined || first.DeclineCode == "" || first.Hold != "" || first.Captured != 0 ||
			!first.Created.Equal(fixture) {
			t.Errorf("first charge = %+v; want the fixture's PaymentIntent, declined", first)
		}
		if got[1].ID != first.ID+"_newer" || !got[1].Created.Equal(fixture.Add(time.Second)) {
			t.Errorf("second charge = %+v; want the newer copy, listed after the oldest", got[1])
		}
		check(t, sent(), "data.latest_charge", first.ID)
	})

	t.Run("refunds", func(t *testing.T) {
		var got []order.GatewayRefund
		err := g.ListRefunds(t.Context(), from, to, func(r order.GatewayRefund) error {
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Fatalf("ListRefunds: %v", err)
		}
		if len(got) != 2 {
			t.Fatalf("ListRefunds listed %+v; want the fixture and its newer copy", got)
		}
		first := got[0]
		// The fixture: 1.00 USD, succeeded, of a PaymentIntent (expanded).
		if !strings.HasPrefix(first.ID, "re_") || !strings.HasPrefix(first.ChargeID, "pi_") ||
			first.Amount != (order.Money{Currency: "USD", AmountMinor: 100}) || first.Outcome != order.OutcomeSucceeded ||
			!first.Created.Equal(fixture) {
			t.Errorf("first refund = %+v; want the fixture's Refund, succeeded, of its PaymentIntent", first)
		}
		check(t, sent(), "data.payment_intent", first.ID)
	})
}
