package stripe_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// TestConformance runs the gateway conformance suite against the Stripe
// adapter and the stateful Stripe fake, once on an account with
// multicapture (Config.Multicapture) and once on one without.
func TestConformance(t *testing.T) {
	for _, multi := range []bool{false, true} {
		name := "single capture"
		if multi {
			name = "multicapture"
		}
		t.Run(name, func(t *testing.T) { conformance(t, multi) })
	}
}

func conformance(t *testing.T, multi bool) {
	const callTimeout = time.Second
	gatewaytest.Run(t, func(t *testing.T) gatewaytest.Harness {
		fake := stripetest.New(stripetest.Options{Hold: 3 * time.Second})
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		return gatewaytest.Harness{
			Gateway:     newGateway(t, stripe.Config{BaseURL: srv.URL, Timeout: callTimeout, MaxNetworkRetries: 2, Multicapture: multi}),
			OK:          stripetest.TokenVisa,
			Decline:     stripetest.TokenDeclined,
			Timeout:     stripetest.TokenTimeout,
			CallTimeout: callTimeout,
			Ledger: func(attemptID string) []gatewaytest.Entry {
				var out []gatewaytest.Entry
				for _, pi := range fake.Intents(attemptID) {
					out = append(out, gatewaytest.Entry{ChargeID: pi.ID, Succeeded: pi.Status == "succeeded",
						Open: pi.Status == "requires_action"})
				}
				return out
			},
			DedupesCharges: true,
			LookupCancels:  true,
			Unreachable:    newGateway(t, stripe.Config{BaseURL: "http://" + gatewaytest.ClosedAddr(t), Timeout: callTimeout}),
			Observed: func(obs gateway.Observer) order.Gateway {
				return newGateway(t, stripe.Config{BaseURL: srv.URL, Timeout: callTimeout, MaxNetworkRetries: 2, Observer: obs})
			},
			RefundTimeout:        stripetest.TokenRefundTimeout,
			RefundFailLater:      stripetest.TokenRefundFail,
			Action:               stripetest.TokenRequiresAction,
			Captures:             true,
			CaptureTimeout:       stripetest.TokenHoldTimeout,
			Expire:               func(chargeID string) { fake.Expire(chargeID) },
			SingleCapture:        !multi,
			VoidEndsCapturedHold: true,
			LookupReplays:        true,
			CaptureLedger: func(captureID string) []gatewaytest.Entry {
				var out []gatewaytest.Entry
				for _, c := range fake.Captures() {
					if c.IdempotencyKey == captureID+":capture" {
						out = append(out, gatewaytest.Entry{ChargeID: c.PaymentIntent, Succeeded: true})
					}
				}
				return out
			},
			OpenDispute: func(t *testing.T, pi string, amount int64) string {
				d, err := fake.OpenDispute(pi, amount, "fraudulent", false)
				if err != nil {
					t.Fatal(err)
				}
				return d.ID
			},
			DecideDispute: func(t *testing.T, id string, won bool) {
				status := "lost"
				if won {
					status = "won"
				}
				if err := fake.SetDisputeStatus(id, status, false); err != nil {
					t.Fatal(err)
				}
			},
			UnknownDispute: "dp_nosuch",
			RefundLedger: func(refundID string) []gatewaytest.Entry {
				var out []gatewaytest.Entry
				for _, r := range fake.Refunds() {
					if r.IdempotencyKey == refundID {
						out = append(out, gatewaytest.Entry{ChargeID: r.ID, Succeeded: r.Status == "succeeded"})
					}
				}
				return out
			},
		}
	})
}
