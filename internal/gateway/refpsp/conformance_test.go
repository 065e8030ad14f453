package refpsp_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// TestConformance runs the gateway conformance suite against the refpsp
// adapter and the simulator, once as the dangerous kind of gateway that
// ignores repeated references and once as one that deduplicates them.
func TestConformance(t *testing.T) {
	const callTimeout = time.Second
	for _, dedupe := range []bool{false, true} {
		name := "sim"
		if dedupe {
			name = "sim with dedupe"
		}
		t.Run(name, func(t *testing.T) {
			gatewaytest.Run(t, func(t *testing.T) gatewaytest.Harness {
				s := sim.New(sim.Options{Dedupe: dedupe, ClientTimeout: 10 * time.Second, RefundSettleDelay: time.Second})
				srv := httptest.NewServer(s)
				t.Cleanup(srv.Close)
				return gatewaytest.Harness{
					Gateway:     newClient(t, srv.URL, callTimeout),
					OK:          "tok_ok",
					Decline:     "tok_decline",
					Timeout:     "tok_timeout",
					CallTimeout: callTimeout,
					Ledger: func(attemptID string) []gatewaytest.Entry {
						var out []gatewaytest.Entry
						for _, c := range s.Ledger() {
							if c.Reference == attemptID {
								out = append(out, gatewaytest.Entry{ChargeID: c.ID, Succeeded: c.Status == "succeeded",
									Open: c.Status == "requires_action"})
							}
						}
						return out
					},
					DedupesCharges: dedupe,
					LookupCancels:  false,
					Unreachable:    newClient(t, "http://"+gatewaytest.ClosedAddr(t), callTimeout),
					Observed: func(obs gateway.Observer) order.Gateway {
						c, err := refpsp.New(refpsp.Config{BaseURL: srv.URL, APIKey: apiKey, Timeout: callTimeout, Observer: obs})
						if err != nil {
							t.Fatal(err)
						}
						return c
					},
					RefundTimeout:   "tok_refund_timeout",
					RefundFailLater: "tok_refund_fail_later",
					Action:          "tok_3ds",
					Captures:        true,
					CaptureTimeout:  "tok_capture_timeout",
					Lapse:           "tok_lapse_1500",
					CaptureLedger: func(captureID string) []gatewaytest.Entry {
						var out []gatewaytest.Entry
						for _, c := range s.Captures() {
							if c.Reference == captureID {
								out = append(out, gatewaytest.Entry{ChargeID: c.ID, Succeeded: c.Status == "succeeded"})
							}
						}
						return out
					},
					OpenDispute: func(t *testing.T, chargeID string, amount int64) string {
						d, err := s.OpenDispute(chargeID, amount, "fraudulent")
						if err != nil {
							t.Fatal(err)
						}
						return d.ID
					},
					DecideDispute: func(t *testing.T, id string, won bool) {
						if _, err := s.ResolveDispute(id, won); err != nil {
							t.Fatal(err)
						}
					},
					UnknownDispute: "dp_sim_999999",
					Lister:         newLister(t, srv.URL, callTimeout),
					RefundLedger: func(refundID string) []gatewaytest.Entry {
						var out []gatewaytest.Entry
						for _, r := range s.Refunds() {
							if r.Reference == refundID {
								out = append(out, gatewaytest.Entry{ChargeID: r.ID, Succeeded: r.Status == "succeeded"})
							}
						}
						return out
					},
				}
			})
		})
	}
}

// newLister returns a client of the gateway at url that lists two records
// a page, so that a listing takes several.
func newLister(t *testing.T, url string, timeout time.Duration) *refpsp.Client {
	t.Helper()
	c, err := refpsp.New(refpsp.Config{BaseURL: url, APIKey: apiKey, Timeout: timeout, ListPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
