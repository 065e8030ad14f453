package adyen_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/order"
)

const (
	apiKey   = "AQE-conformance-key"
	merchant = "SettleConformance"
	hmacKey  = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	// callTimeout is the adapter's; horizon its no-show horizon, short
	// so that the technical cancel of an attempt never sent comes soon.
	callTimeout = time.Second
	horizon     = 3 * time.Second
)

// listener is Settle's notification endpoint in miniature: it verifies
// each batch with the adapter's ReceiveEvents, records the events in an
// in-memory log, and only then acknowledges.
type listener struct {
	t   *testing.T
	gw  *adyen.Gateway
	log *adyen.MemoryLog
	// drop, when set, loses the events it says (acknowledged, never
	// recorded), as a lost notification would be.
	drop func(order.GatewayEvent) bool
	mu   sync.Mutex
	lost []order.GatewayEvent
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable", http.StatusBadRequest)
		return
	}
	evs, err := l.gw.ReceiveEvents(body, r.Header)
	switch {
	case errors.Is(err, order.ErrEventIgnored):
	case err != nil:
		// Every notification of the fake is signed: a refusal is a bug of
		// the fake's signer or of the adapter's verifier.
		l.t.Errorf("ReceiveEvents refused the fake's notification: %v", err)
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	default:
		l.mu.Lock()
		for _, e := range evs {
			if l.drop != nil && l.drop(e) {
				l.lost = append(l.lost, e)
				continue
			}
			l.log.Record(e)
		}
		l.mu.Unlock()
	}
	ct, ack := l.gw.Acknowledge()
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(ack)
}

// fakeAdyen is the fake Adyen, a listener for its notifications and the
// adapter against it, for one test.
type fakeAdyen struct {
	fake *adyenfake.Server
	srv  *httptest.Server
	gw   *adyen.Gateway
	log  *adyen.MemoryLog
	l    *listener
	// newGateway is the adapter against base, with obs.
	newGateway func(base string, obs gateway.Observer) *adyen.Gateway
}

// newAdyen starts the fake with notifications delayed, reordered and
// duplicated, and the adapter with the clock now (nil: time.Now). The
// test fails if the fake broke Adyen's definitions.
func newAdyen(t *testing.T, now func() time.Time, mod ...func(*adyenfake.Config)) *fakeAdyen {
	a := &fakeAdyen{log: &adyen.MemoryLog{}}
	a.l = &listener{t: t, log: a.log}
	notify := httptest.NewServer(a.l)
	t.Cleanup(notify.Close)
	cfg := adyenfake.Config{APIKey: apiKey, MerchantAccount: merchant, HMACKey: hmacKey,
		NotifyURL: notify.URL, NotifyUser: "adyen", NotifyPassword: "notify-secret",
		Notify:        adyenfake.NotifyFaults{MaxDelay: 100 * time.Millisecond, Reorder: 0.2, ReorderDelay: 300 * time.Millisecond, Duplicate: 0.3},
		ClientTimeout: 3 * callTimeout}
	for _, m := range mod {
		m(&cfg)
	}
	fake, err := adyenfake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.fake = fake
	a.srv = httptest.NewServer(fake)
	t.Cleanup(func() {
		a.srv.Close()
		fake.Close()
		if errs := fake.ContractErrors(); len(errs) > 0 {
			t.Errorf("the fake broke Adyen's definitions: %v", errs)
		}
	})
	a.newGateway = func(base string, obs gateway.Observer) *adyen.Gateway {
		g, err := adyen.New(adyen.Config{BaseURL: base + "/v71", APIKey: apiKey, MerchantAccount: merchant,
			HMACKeys: []string{hmacKey}, NotifyUser: "adyen", NotifyPassword: "notify-secret", Timeout: callTimeout,
			Observer: obs, Events: a.log, NoShowHorizon: horizon, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a.gw = a.newGateway(a.srv.URL, nil)
	a.l.gw = a.gw
	return a
}

// TestConformance runs the gateway conformance suite against the adapter
// and the fake Adyen, whose notifications reach a listener that verifies
// them with the adapter and records them for its lookups. The fake checks
// every request and answer against Adyen's definitions: none may fail.
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, func(t *testing.T) gatewaytest.Harness {
		a := newAdyen(t, nil)
		fake, srv, gw := a.fake, a.srv, a.gw
		newGateway := a.newGateway
		ledger := func(match func(p adyenfake.Payment) []gatewaytest.Entry) []gatewaytest.Entry {
			var out []gatewaytest.Entry
			for _, p := range fake.Ledger() {
				out = append(out, match(p)...)
			}
			return out
		}
		mods := func(ref string, pick func(p adyenfake.Payment) []adyenfake.Modification) []gatewaytest.Entry {
			return ledger(func(p adyenfake.Payment) []gatewaytest.Entry {
				var out []gatewaytest.Entry
				for _, m := range pick(p) {
					if m.Reference == ref {
						out = append(out, gatewaytest.Entry{ChargeID: m.PSPReference, Succeeded: m.Status == adyenfake.ModSucceeded})
					}
				}
				return out
			})
		}
		return gatewaytest.Harness{
			Gateway:     gw,
			OK:          "tok_ok",
			Decline:     "tok_decline",
			Timeout:     "tok_timeout",
			CallTimeout: callTimeout,
			Ledger: func(attemptID string) []gatewaytest.Entry {
				return ledger(func(p adyenfake.Payment) []gatewaytest.Entry {
					if p.Reference != attemptID {
						return nil
					}
					// Money moved once something was captured.
					return []gatewaytest.Entry{{ChargeID: p.PSPReference, Succeeded: p.AmountCaptured > 0,
						Open: p.Status == adyenfake.StatusRedirectShopper}}
				})
			},
			DedupesCharges:  true,
			Notified:        true,
			Unreachable:     newGateway("http://"+gatewaytest.ClosedAddr(t), nil),
			Observed:        func(obs gateway.Observer) order.Gateway { return newGateway(srv.URL, obs) },
			RefundFailLater: "tok_refund_fail",
			RefundLedger: func(refundID string) []gatewaytest.Entry {
				return mods(refundID, func(p adyenfake.Payment) []adyenfake.Modification { return p.Refunds })
			},
			Action: "tok_3ds",
			Skip: map[string]string{
				// Adyen releases the rest of an authorization after a
				// partial capture unless the account has multiple partial
				// captures; the fake models such an account.
				"partial final capture releases the rest": "the fake Adyen keeps the rest of a hold after a partial capture " +
					"(multiple partial captures), where Adyen's default releases it",
				// Adyen's reports book by the whole second: a window cannot
				// part the suite's charges, all made within one. The
				// listing's window is tested in report_test.go.
				"a listing's window": "Adyen's reports book rows by the whole second, and the suite's charges are made within one",
			},
			// The reports have no pages: a day's report is one download.
			Lister:        gw,
			Captures:      true,
			SingleCapture: true,
			CaptureLedger: func(captureID string) []gatewaytest.Entry {
				return mods(captureID, func(p adyenfake.Payment) []adyenfake.Modification { return p.Captures })
			},
		}
	})
}

// settledLookup asks Lookup until the notifications let it say.
func settledLookup(t *testing.T, gw *adyen.Gateway, req order.ChargeRequest) order.Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := gw.Lookup(t.Context(), req)
		if err == nil {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup still cannot say: %+v, %v", res, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestThreeDSecure takes a payment through the fake's 3-D Secure page and
// back with CompleteAction: authenticated, an automatic order is captured at
// once and a manual one holds; failed, it is declined.
func TestThreeDSecure(t *testing.T) {
	for _, tt := range []struct {
		name    string
		result  string
		capture order.CaptureMode
		want    order.Outcome
		code    string
	}{
		{"authenticated, automatic", "authorised", order.CaptureAutomatic, order.OutcomeSucceeded, ""},
		{"authenticated, manual", "authorised", order.CaptureManual, order.OutcomeSucceeded, ""},
		{"not authenticated", "refused", order.CaptureAutomatic, order.OutcomeDeclined, "3d_not_authenticated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newAdyen(t, nil)
			req := order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), Amount: order.Money{Currency: "EUR", AmountMinor: 4200},
				PaymentMethod: "tok_3ds", CustomerPresent: true, ReturnURL: "https://shop.example/return", CreatedAt: time.Now(), Capture: tt.capture}
			res, err := a.gw.Charge(t.Context(), req)
			if err != nil || res.Outcome != order.OutcomeRequiresAction || res.NextAction.RedirectURL == "" {
				t.Fatalf("Charge = %+v, %v; want requires_action with a page to redirect to", res, err)
			}
			// The shopper on the challenge page, sent back to the return URL.
			page, err := url.Parse(res.NextAction.RedirectURL)
			if err != nil {
				t.Fatal(err)
			}
			page.RawQuery = url.Values{"result": {tt.result}}.Encode()
			noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := noFollow.Get(page.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			back, err := url.Parse(resp.Header.Get("Location"))
			if err != nil || resp.StatusCode != http.StatusFound || back.Host != "shop.example" {
				t.Fatalf("the challenge page answered %d to %q; want a redirect to the return URL", resp.StatusCode, resp.Header.Get("Location"))
			}
			res, err = a.gw.CompleteAction(t.Context(), req, back.Query().Get("redirectResult"))
			if res.Outcome != tt.want || res.DeclineCode != tt.code || (err != nil) {
				t.Fatalf("CompleteAction = %+v, %v; want %s %q", res, err, tt.want, tt.code)
			}
			var p adyenfake.Payment
			for _, q := range a.fake.Ledger() {
				if q.Reference == req.AttemptID {
					p = q
				}
			}
			switch {
			case tt.want == order.OutcomeDeclined:
				if p.AmountAuthorised != 0 || p.AmountCaptured != 0 {
					t.Errorf("ledger %+v; want nothing held or taken", p)
				}
			case tt.capture == order.CaptureManual:
				if res.Hold == nil || res.Hold.State != order.HoldOpen || p.AmountCaptured != 0 || p.AmountAuthorised != 4200 {
					t.Errorf("CompleteAction's hold %+v, ledger %+v; want 4200 held, nothing taken", res.Hold, p)
				}
			default:
				if res.ChargeID != p.PSPReference || p.AmountCaptured != 4200 {
					t.Errorf("CompleteAction's charge %s, ledger %+v; want the payment captured in full", res.ChargeID, p)
				}
			}
			// The notifications say the same.
			if got := settledLookup(t, a.gw, req); got.Outcome != tt.want {
				t.Errorf("Lookup = %+v; want %s", got, tt.want)
			}
		})
	}
}

// TestTechnicalCancel is the reconciler's way with an authorization whose
// answer and notification were both lost: Lookup cannot say until the
// no-show horizon, then technical-cancels by the attempt's reference, and
// the TECHNICAL_CANCEL proves nothing is held. An AUTHORISATION that
// arrives after that changes nothing, and nothing was ever captured.
func TestTechnicalCancel(t *testing.T) {
	var offset atomic.Int64
	a := newAdyen(t, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	a.l.drop = func(e order.GatewayEvent) bool { return e.Type == adyen.EventAuthorisation }
	req := order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
		PaymentMethod: "tok_timeout", CreatedAt: time.Now()}
	res, err := a.gw.Charge(t.Context(), req)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown (the answer was lost)", res, err)
	}
	// Before the horizon: Lookup cannot say, and sends nothing.
	if res, err := a.gw.Lookup(t.Context(), req); err == nil || res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Lookup before the horizon = %+v, %v; want an error", res, err)
	}
	if tc := a.fake.TechnicalCancels(); len(tc) != 0 {
		t.Fatalf("technical cancels %+v before the horizon; want none", tc)
	}
	offset.Store(int64(2 * horizon))
	if got := settledLookup(t, a.gw, req); got.Outcome != order.OutcomeNotFound {
		t.Fatalf("Lookup past the horizon = %+v; want not found once the technical cancel succeeded", got)
	}
	tc := a.fake.TechnicalCancels()
	if len(tc) != 1 || tc[0].Reference != req.AttemptID+":cancel" || tc[0].PaymentReference != req.AttemptID || tc[0].Status != adyenfake.ModSucceeded {
		t.Errorf("technical cancels %+v; want one, by the attempt's reference, succeeded", tc)
	}
	for _, p := range a.fake.Ledger() {
		if p.Reference == req.AttemptID && (p.Status != adyenfake.StatusCancelled || p.AmountCaptured != 0) {
			t.Errorf("ledger %+v; want the authorization cancelled, nothing captured", p)
		}
	}
	// The lost AUTHORISATION arrives after all.
	a.l.mu.Lock()
	lost := a.l.lost
	a.l.mu.Unlock()
	if len(lost) == 0 {
		t.Fatal("the fake sent no AUTHORISATION")
	}
	a.log.Record(lost...)
	if got, err := a.gw.Lookup(t.Context(), req); err != nil || got.Outcome != order.OutcomeNotFound {
		t.Errorf("Lookup after a late AUTHORISATION = %+v, %v; want not found still", got, err)
	}
}

// TestFaults charges attempts while the fake answers late, 500 before or
// after processing, drops connections and holds keys in flight, at random
// (seeded), payments, captures and technical cancels alike, and settles
// each unknown one by Lookup as the reconciler would. Whatever the
// faults, an attempt reported succeeded was captured once, in full, and
// one reported not found or declined took nothing.
func TestFaults(t *testing.T) {
	a := newAdyen(t, nil, func(c *adyenfake.Config) {
		c.Seed = 29
		c.Random = adyenfake.RandomFaults{TimeoutAfter: 0.1, FiveXXBefore: 0.1, FiveXXAfter: 0.1, DropAfter: 0.1, Slow: 0.1,
			SlowMax: 2 * callTimeout}
	})
	const attempts = 24
	results := make([]order.Result, attempts)
	reqs := make([]order.ChargeRequest, attempts)
	var unknown atomic.Int32
	var wg sync.WaitGroup
	for i := range attempts {
		reqs[i] = order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), Amount: order.Money{Currency: "GBP", AmountMinor: 1000 + int64(i)},
			PaymentMethod: "tok_ok", CreatedAt: time.Now(), CustomerPresent: true, ReturnURL: "https://shop.example/return"}
		wg.Go(func() {
			res, err := a.gw.Charge(t.Context(), reqs[i])
			if res.Outcome == order.OutcomeUnknown {
				unknown.Add(1)
			}
			deadline := time.Now().Add(60 * time.Second)
			for (res.Outcome == order.OutcomeUnknown || err != nil) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				req := reqs[i]
				req.GatewayChargeID = res.ChargeID
				res, err = a.gw.Lookup(t.Context(), req)
			}
			results[i] = res
		})
	}
	wg.Wait()
	if unknown.Load() == 0 {
		t.Fatal("no charge met a fault: the test proves nothing")
	}
	ledger := a.fake.Ledger()
	counts := map[order.Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	t.Logf("%d of %d charges unknown at first; settled: %v", unknown.Load(), attempts, counts)
	for i, req := range reqs {
		res := results[i]
		var payments []adyenfake.Payment
		for _, p := range ledger {
			if p.Reference == req.AttemptID {
				payments = append(payments, p)
			}
		}
		var captured int64
		for _, p := range payments {
			captured += p.AmountCaptured
		}
		switch res.Outcome {
		case order.OutcomeSucceeded:
			if len(payments) != 1 || captured != req.Amount.AmountMinor || res.ChargeID != payments[0].PSPReference {
				t.Errorf("attempt %d succeeded (%s), the ledger: %+v; want one payment, captured once in full", i, res.ChargeID, payments)
			}
		case order.OutcomeNotFound, order.OutcomeDeclined, order.OutcomeNotSent:
			if captured != 0 {
				t.Errorf("attempt %d %s, but the ledger took %d: %+v", i, res.Outcome, captured, payments)
			}
		default:
			t.Errorf("attempt %d still %s after a minute of lookups; ledger %+v", i, res.Outcome, payments)
		}
		if len(payments) > 1 {
			t.Errorf("attempt %d made %d payments: %+v", i, len(payments), payments)
		}
	}
}
