package stripe_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// paidIntent charges a PaymentIntent at the fake and returns its id.
func paidIntent(t *testing.T, g *stripe.Gateway) string {
	t.Helper()
	res, err := g.Charge(t.Context(), chargeReq(stripetest.TokenVisa))
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
	}
	return res.ChargeID
}

// TestDisputeEvents: every charge.dispute.* event, verified like the
// others, becomes an event about the disputed PaymentIntent with the
// dispute as Stripe shows it, each status mapped onto Settle's status
// and stage, the deadline and the balance transactions read; an unknown
// status is refused with an error naming it; a bad signature is refused.
func TestDisputeEvents(t *testing.T) {
	t.Parallel()
	fake, base := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: base, WebhookSecrets: []string{webhookSecret}})
	pi := paidIntent(t, g)
	d, err := fake.OpenDispute(pi, 0, "fraudulent", true)
	if err != nil {
		t.Fatal(err)
	}
	receive := func(typ string) (order.GatewayEvent, error) {
		t.Helper()
		body, err := fake.DisputeEvent("evt_"+typ+"_"+d.ID, typ, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return receiveOne(g, body, signature(sign(body, time.Now(), webhookSecret)))
	}
	gbp := func(n int64) order.Money { return order.Money{Currency: "GBP", AmountMinor: n} }
	for _, step := range []struct {
		status, event string
		want          order.GatewayDispute
	}{
		{"warning_needs_response", "charge.dispute.created", order.GatewayDispute{
			Status: order.DisputeNeedsResponse, Stage: order.DisputeInquiry}},
		{"warning_under_review", "charge.dispute.updated", order.GatewayDispute{
			Status: order.DisputeUnderReview, Stage: order.DisputeInquiry}},
		{"needs_response", "charge.dispute.funds_withdrawn", order.GatewayDispute{
			Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback, Withdrawn: 1250, Fee: stripetest.DisputeFee}},
		{"under_review", "charge.dispute.updated", order.GatewayDispute{
			Status: order.DisputeUnderReview, Stage: order.DisputeChargeback, Withdrawn: 1250, Fee: stripetest.DisputeFee}},
		{"won", "charge.dispute.funds_reinstated", order.GatewayDispute{
			Status: order.DisputeWon, Stage: order.DisputeChargeback, Withdrawn: 1250, Reinstated: 1250}},
		{"won", "charge.dispute.closed", order.GatewayDispute{
			Status: order.DisputeWon, Stage: order.DisputeChargeback, Withdrawn: 1250, Reinstated: 1250}},
		{"lost", "charge.dispute.closed", order.GatewayDispute{
			Status: order.DisputeLost, Stage: order.DisputeChargeback, Withdrawn: 1250, Reinstated: 1250}},
		{"warning_closed", "charge.dispute.closed", order.GatewayDispute{
			Status: order.DisputeWarningClosed, Stage: order.DisputeInquiry, Withdrawn: 1250, Reinstated: 1250}},
	} {
		if err := fake.SetDisputeStatus(d.ID, step.status, false); err != nil {
			t.Fatal(err)
		}
		ev, err := receive(step.event)
		if err != nil {
			t.Fatalf("%s %s: %v", step.event, step.status, err)
		}
		want := step.want
		want.ID, want.Amount, want.Reason, want.NetworkReasonCode, want.DueBy = d.ID, gbp(1250), "fraudulent", "10.4", d.DueBy
		if ev.Dispute == nil || *ev.Dispute != want {
			t.Errorf("%s %s: dispute %+v, want %+v", step.event, step.status, ev.Dispute, want)
		}
		if ev.ID != "evt_"+step.event+"_"+d.ID || ev.Type != step.event || ev.ObjectID != d.ID || ev.ChargeID != pi || ev.AttemptID != "" || ev.Succeeded {
			t.Errorf("%s: event %+v, want one about %s for the PaymentIntent %s", step.event, ev, d.ID, pi)
		}
	}

	// A status Stripe may add later is refused, and says which.
	if err := fake.SetDisputeStatus(d.ID, "prevented", true); err != nil {
		t.Fatal(err)
	}
	if _, err := receive("charge.dispute.updated"); err == nil || !strings.Contains(err.Error(), `"prevented"`) ||
		errors.Is(err, order.ErrEventIgnored) || errors.Is(err, order.ErrEventSignature) {
		t.Errorf("an unknown status: %v, want an error naming it", err)
	}

	// Bad signatures are refused, as for any event.
	body, _ := fake.DisputeEvent("evt_x", "charge.dispute.created", d.ID)
	for name, sig := range map[string]string{
		"none": "", "wrong secret": sign(body, time.Now(), "whsec_wrong"),
		"stale": sign(body, time.Now().Add(-time.Hour), webhookSecret), "another body": sign([]byte("{}"), time.Now(), webhookSecret),
	} {
		if _, err := receiveOne(g, body, signature(sig)); !errors.Is(err, order.ErrEventSignature) {
			t.Errorf("signature %s: %v, want order.ErrEventSignature", name, err)
		}
	}

	// A dispute that names no PaymentIntent is not Settle's: ignored, so
	// that Stripe does not send it again for days.
	bare := fmt.Appendf(nil, `{"id":"evt_bare","object":"event","type":"charge.dispute.created","created":%d,
		"data":{"object":{"id":"dp_bare","object":"dispute","amount":100,"currency":"gbp","status":"needs_response","charge":"ch_1","payment_intent":null}}}`,
		time.Now().Unix())
	if _, err := receiveOne(g, bare, signature(sign(bare, time.Now(), webhookSecret))); !errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("a dispute of a bare Charge: %v, want order.ErrEventIgnored", err)
	}
	// A signed dispute event that cannot be read is an error of its own.
	odd := fmt.Appendf(nil, `{"id":"evt_odd","object":"event","type":"charge.dispute.created","created":%d,"data":{"object":{"id":""}}}`, time.Now().Unix())
	if _, err := receiveOne(g, odd, signature(sign(odd, time.Now(), webhookSecret))); err == nil ||
		errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("a dispute event without a dispute: %v, want an error of its own", err)
	}
}

// TestDisputeGateway: GetDispute reads the dispute as it stands;
// AcceptDispute closes an open one (lost), and a second accept, or an
// accept of a dispute closed otherwise, returns it as it stands without
// closing it again; unknown ids and statuses are errors.
func TestDisputeGateway(t *testing.T) {
	t.Parallel()
	fake, base := newFake(t, stripetest.Options{})
	g := newGateway(t, stripe.Config{BaseURL: base})
	var dg order.DisputeGateway = g
	pi := paidIntent(t, g)
	d, err := fake.OpenDispute(pi, 1000, "product_not_received", false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dg.GetDispute(t.Context(), d.ID)
	want := order.GatewayDispute{ID: d.ID, Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1000}, Reason: "product_not_received", NetworkReasonCode: "10.4",
		DueBy: d.DueBy, Withdrawn: 1000, Fee: stripetest.DisputeFee}
	if err != nil || got != want {
		t.Fatalf("GetDispute = %+v, %v; want %+v", got, err, want)
	}

	for i := range 2 {
		got, err = dg.AcceptDispute(t.Context(), d.ID)
		if err != nil || got.Status != order.DisputeLost || got.Stage != order.DisputeChargeback {
			t.Fatalf("AcceptDispute #%d = %+v, %v; want LOST", i+1, got, err)
		}
	}
	if n := fake.Disputes()[0].Closes; n != 1 {
		t.Errorf("the dispute was closed %d times, want once", n)
	}

	won, _ := fake.OpenDispute(pi, 250, "duplicate", false)
	if err := fake.SetDisputeStatus(won.ID, "won", false); err != nil {
		t.Fatal(err)
	}
	if got, err := dg.AcceptDispute(t.Context(), won.ID); err != nil || got.Status != order.DisputeWon {
		t.Errorf("AcceptDispute of a won dispute = %+v, %v; want it WON as it stands", got, err)
	}

	if _, err := dg.GetDispute(t.Context(), "dp_nosuch"); err == nil || !strings.Contains(err.Error(), "resource_missing") {
		t.Errorf("GetDispute of an unknown dispute: %v, want Stripe's resource_missing", err)
	}
	if _, err := dg.GetDispute(t.Context(), "pi_123"); err == nil {
		t.Error("GetDispute of a PaymentIntent's id: no error")
	}
	if err := fake.SetDisputeStatus(won.ID, "prevented", true); err != nil {
		t.Fatal(err)
	}
	if _, err := dg.GetDispute(t.Context(), won.ID); err == nil || !strings.Contains(err.Error(), `"prevented"`) {
		t.Errorf("GetDispute of an unknown status: %v, want an error naming it", err)
	}
}
