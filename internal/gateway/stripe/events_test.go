package stripe_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/order"
)

const (
	webhookSecret    = "whsec_stripeCurrent0123456789abcdefghi"
	oldWebhookSecret = "whsec_stripeOld0123456789abcdefghijklm"
)

// event is a Stripe event about the PaymentIntent pi, whose metadata
// names attempt.
func event(id, typ, pi, attempt string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"api_version":"2023-10-16","created":%d,
		"data":{"object":{"id":%q,"object":"payment_intent","amount":1250,"currency":"gbp","metadata":{"attempt_id":%q}}}}`,
		id, typ, time.Now().Unix(), pi, attempt)
}

func sign(body []byte, at time.Time, secret string) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

// signature is a request's header carrying sig as Stripe-Signature.
func signature(sig string) map[string][]string {
	h := http.Header{}
	if sig != "" {
		h.Set("Stripe-Signature", sig)
	}
	return h
}

// TestReceiveEvent: the adapter accepts an event only with a valid
// signature of one of its webhook secrets within the tolerance, in the
// past or (which stripe-go does not check) the future; reads a
// PaymentIntent's event as the domain's event, matched by the attempt id
// in its metadata or by its id; and tells an event of another type, and
// one it cannot read, from one it cannot verify.
func TestReceiveEvent(t *testing.T) {
	t.Parallel()
	g := newGateway(t, stripe.Config{BaseURL: "http://127.0.0.1:1", WebhookSecrets: []string{webhookSecret, oldWebhookSecret}})
	body := event("evt_1", "payment_intent.succeeded", "pi_1", "att-1")
	now := time.Now()
	for _, tc := range []struct{ name, sig string }{
		{"no signature", ""},
		{"wrong secret", sign(body, now, "whsec_wrong")},
		{"stale timestamp", sign(body, now.Add(-10*time.Minute), webhookSecret)},
		{"timestamp from the future", sign(body, now.Add(10*time.Minute), webhookSecret)},
		{"timestamp years ahead", sign(body, now.AddDate(5, 0, 0), webhookSecret)},
		{"future timestamp beside a valid one", "t=" + fmt.Sprint(now.Unix()) + "," + sign(body, now.AddDate(5, 0, 0), webhookSecret)},
		{"signature of another body", sign([]byte("{}"), now, webhookSecret)},
	} {
		if _, err := receiveOne(g, body, signature(tc.sig)); !errors.Is(err, order.ErrEventSignature) {
			t.Errorf("%s: %v, want order.ErrEventSignature", tc.name, err)
		}
	}

	processing := event("evt_2", "payment_intent.processing", "pi_2", "")
	for _, tc := range []struct {
		name, sig string
		body      []byte
		want      order.GatewayEvent
	}{
		{"current secret", sign(body, now, webhookSecret), body,
			order.GatewayEvent{ID: "evt_1", Type: "payment_intent.succeeded", ObjectID: "pi_1", AttemptID: "att-1", ChargeID: "pi_1", Succeeded: true}},
		{"old secret", sign(body, now, oldWebhookSecret), body,
			order.GatewayEvent{ID: "evt_1", Type: "payment_intent.succeeded", ObjectID: "pi_1", AttemptID: "att-1", ChargeID: "pi_1", Succeeded: true}},
		{"no attempt id, a clock 4 minutes ahead", sign(processing, now.Add(4*time.Minute), webhookSecret), processing,
			order.GatewayEvent{ID: "evt_2", Type: "payment_intent.processing", ObjectID: "pi_2", ChargeID: "pi_2"}},
		{"a clock 4 minutes behind", sign(processing, now.Add(-4*time.Minute), webhookSecret), processing,
			order.GatewayEvent{ID: "evt_2", Type: "payment_intent.processing", ObjectID: "pi_2", ChargeID: "pi_2"}},
	} {
		got, err := receiveOne(g, tc.body, signature(tc.sig))
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}

	other := event("evt_3", "charge.refunded", "pi_1", "")
	if _, err := receiveOne(g, other, signature(sign(other, now, webhookSecret))); !errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("an event of another type: %v, want order.ErrEventIgnored", err)
	}
	for _, bad := range [][]byte{[]byte("not json"), event("", "payment_intent.succeeded", "pi_1", ""), event("evt_4", "payment_intent.succeeded", "", "")} {
		_, err := receiveOne(g, bad, signature(sign(bad, now, webhookSecret)))
		if err == nil || errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
			t.Errorf("signed but unreadable %q: %v, want an error of its own", bad, err)
		}
	}

	// With no secret, nothing verifies.
	bare := newGateway(t, stripe.Config{BaseURL: "http://127.0.0.1:1"})
	if _, err := receiveOne(bare, body, signature(sign(body, now, webhookSecret))); !errors.Is(err, order.ErrEventSignature) {
		t.Errorf("an adapter without secrets: %v, want order.ErrEventSignature", err)
	}
}

// TestWebhookSecretRules: a webhook secret has the form Stripe issues
// (whsec_ and at least 32 letters and digits), at check and at New, and
// the error never holds it.
func TestWebhookSecretRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		ok     bool
	}{
		{"a", false},
		{"whsec_", false},
		{"whsec_" + strings.Repeat("A", 31), false},
		{"sk_test_" + strings.Repeat("A", 32), false},
		{"whsec_" + strings.Repeat("A", 31) + " ", false},
		{"whsec_" + strings.Repeat("aB3", 10) + "xy", true},      // the Dashboard's
		{"whsec_" + strings.Repeat("0123456789abcdef", 4), true}, // the Stripe CLI's
		{webhookSecret, true},
	} {
		err := stripe.CheckWebhookSecret(tc.secret)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok %v", tc.secret, err, tc.ok)
		}
		if err != nil && len(tc.secret) > len("whsec_") && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%q: the error %q holds the secret", tc.secret, err)
		}
		_, err = stripe.New(stripe.Config{SecretKey: secretKey, WebhookSecrets: []string{tc.secret}})
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "webhook secret 1 of 1")) {
			t.Errorf("New with %q: %v, want ok %v", tc.secret, err, tc.ok)
		}
	}
}

// receiveOne is ReceiveEvents for a request that carries one event.
func receiveOne(r order.EventReceiver, body []byte, header map[string][]string) (order.GatewayEvent, error) {
	evs, err := r.ReceiveEvents(body, header)
	if err != nil {
		return order.GatewayEvent{}, err
	}
	if len(evs) != 1 {
		return order.GatewayEvent{}, fmt.Errorf("%d events, want one", len(evs))
	}
	return evs[0], nil
}
