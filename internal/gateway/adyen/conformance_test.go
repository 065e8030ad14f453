package adyen_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
		l.log.Record(evs...)
	}
	ct, ack := l.gw.Acknowledge()
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(ack)
}

// TestConformance runs the gateway conformance suite against the adapter
// and the fake Adyen, whose notifications reach a listener that verifies
// them with the adapter and records them for its lookups. The fake checks
// every request and answer against Adyen's definitions: none may fail.
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, func(t *testing.T) gatewaytest.Harness {
		log := &adyen.MemoryLog{}
		l := &listener{t: t, log: log}
		notify := httptest.NewServer(l)
		t.Cleanup(notify.Close)
		fake, err := adyenfake.New(adyenfake.Config{APIKey: apiKey, MerchantAccount: merchant, HMACKey: hmacKey,
			NotifyURL: notify.URL, NotifyUser: "adyen", NotifyPassword: "notify-secret",
			Notify:        adyenfake.NotifyFaults{MaxDelay: 100 * time.Millisecond, Reorder: 0.2, ReorderDelay: 300 * time.Millisecond, Duplicate: 0.3},
			ClientTimeout: 3 * callTimeout})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(fake)
		t.Cleanup(func() {
			srv.Close()
			fake.Close()
			if errs := fake.ContractErrors(); len(errs) > 0 {
				t.Errorf("the fake broke Adyen's definitions: %v", errs)
			}
		})
		newGateway := func(base string, obs gateway.Observer) *adyen.Gateway {
			g, err := adyen.New(adyen.Config{BaseURL: base + "/v71", APIKey: apiKey, MerchantAccount: merchant,
				HMACKeys: []string{hmacKey}, NotifyUser: "adyen", NotifyPassword: "notify-secret", Timeout: callTimeout,
				Observer: obs, Events: log, NoShowHorizon: horizon})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		gw := newGateway(srv.URL, nil)
		l.gw = gw
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
			Action:        "tok_3ds",
			Captures:      true,
			SingleCapture: true,
			CaptureLedger: func(captureID string) []gatewaytest.Entry {
				return mods(captureID, func(p adyenfake.Payment) []adyenfake.Modification { return p.Captures })
			},
		}
	})
}
