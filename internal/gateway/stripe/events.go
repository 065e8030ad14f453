package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/settlepay/settle/internal/order"
)

// Events
//
// Stripe posts an event to Settle's webhook endpoint when a PaymentIntent
// changes, signed in its Stripe-Signature header with the endpoint's
// signing secret (one v1 per secret while a secret is rolled).
// ReceiveEvents verifies it with stripe-go's webhook package and reads the
// PaymentIntent it is about, for Settle's webhook listener
// (order.EventReceiver). A dispute's events (charge.dispute.*) carry the
// Dispute, read as dispute.go says.

// DefaultWebhookTolerance is Config.WebhookTolerance when it is zero:
// Stripe's own.
const DefaultWebhookTolerance = stripewebhook.DefaultTolerance

// CheckWebhookSecret returns why s is not a Stripe endpoint signing secret
// as Stripe issues them, nil if it is one: "whsec_" and at least 32 letters
// and digits (the Dashboard's and the API's have 32, the Stripe CLI's 64
// hexadecimal digits). The error never holds the secret.
func CheckWebhookSecret(s string) error {
	rest, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return errors.New(`not a Stripe signing secret: it starts with "whsec_" (the endpoint's "Signing secret" in the Dashboard, not an API key)`)
	}
	for _, c := range rest {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		default:
			return errors.New(`not a Stripe signing secret: after "whsec_" come only letters and digits`)
		}
	}
	if len(rest) < 32 {
		return fmt.Errorf(`not a Stripe signing secret: %d characters after "whsec_", Stripe issues at least 32`, len(rest))
	}
	return nil
}

// eventTypes are the Stripe events that matter, and whether each reports
// money moved. Their types are the only text of an event's that reaches
// logs and metrics. An authorization's events (hold.go) make it due for a
// lookup like the others: payment_intent.amount_capturable_updated when
// the hold is placed (nothing moved yet), charge.captured when some of it
// is taken, charge.expired when it lapsed uncaptured, and
// payment_intent.canceled when it was released.
var eventTypes = map[string]bool{
	"payment_intent.succeeded":                 true,
	"payment_intent.payment_failed":            false,
	"payment_intent.canceled":                  false,
	"payment_intent.requires_action":           false,
	"payment_intent.processing":                false,
	"payment_intent.amount_capturable_updated": false,
	"charge.captured":                          true,
	"charge.expired":                           false,
}

// errFutureTimestamp is a signature dated further ahead than the
// tolerance.
var errFutureTimestamp = errors.New("stripe: signature timestamp is in the future")

var _ order.EventReceiver = (*Gateway)(nil)

// ReceiveEvents is order.EventReceiver's: a request carries one event.
func (g *Gateway) ReceiveEvents(body []byte, header map[string][]string) ([]order.GatewayEvent, error) {
	ev, err := g.receiveEvent(body, header)
	if err != nil {
		return nil, err
	}
	return []order.GatewayEvent{ev}, nil
}

// receiveEvent verifies an event signed with one of Config.WebhookSecrets
// within Config.WebhookTolerance and returns it as the domain's event:
// about the PaymentIntent it carries (or the PaymentIntent of the Charge
// it carries), matched by the attempt id in its metadata, or else by the
// PaymentIntent's id.
func (g *Gateway) receiveEvent(body []byte, header map[string][]string) (order.GatewayEvent, error) {
	sig := http.Header(header).Get("Stripe-Signature")
	// stripe-go (v76: ValidatePayloadWithTolerance, ConstructEventWithOptions
	// alike) refuses only a timestamp older than the tolerance; one ahead
	// of it is refused here.
	if at, ok := signedAt(sig); ok && at.After(time.Now().Add(g.webhookTolerance)) {
		return order.GatewayEvent{}, errors.Join(order.ErrEventSignature, errFutureTimestamp)
	}
	err := errors.New("stripe: no webhook secret is configured")
	for _, secret := range g.webhookSecrets {
		// stripe-go checks every v1 signature of the header (Stripe sends
		// one per secret while a secret is rolled) against this secret.
		if err = stripewebhook.ValidatePayloadWithTolerance(body, sig, secret, g.webhookTolerance); err == nil {
			break
		}
	}
	if err != nil {
		return order.GatewayEvent{}, errors.Join(order.ErrEventSignature, err)
	}
	// The event is read without stripe-go's API version check: only the
	// PaymentIntent's id and metadata are used, which every version has.
	var e stripego.Event
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" || e.Data == nil {
		return order.GatewayEvent{}, errors.New("stripe: malformed event")
	}
	if disputeEvents[string(e.Type)] {
		return disputeEvent(e)
	}
	succeeded, ok := eventTypes[string(e.Type)]
	if !ok {
		return order.GatewayEvent{}, order.ErrEventIgnored
	}
	if strings.HasPrefix(string(e.Type), "charge.") {
		// About the PaymentIntent's Charge: the attempt is the
		// PaymentIntent's (the Charge carries its id, and its metadata).
		var ch stripego.Charge
		if err := json.Unmarshal(e.Data.Raw, &ch); err != nil || ch.ID == "" || ch.PaymentIntent == nil || ch.PaymentIntent.ID == "" {
			return order.GatewayEvent{}, errors.New("stripe: malformed charge")
		}
		return order.GatewayEvent{
			ID: e.ID, Type: string(e.Type), ObjectID: ch.ID,
			AttemptID: ch.Metadata["attempt_id"], ChargeID: ch.PaymentIntent.ID, Succeeded: succeeded,
		}, nil
	}
	var pi stripego.PaymentIntent
	if err := json.Unmarshal(e.Data.Raw, &pi); err != nil || pi.ID == "" {
		return order.GatewayEvent{}, errors.New("stripe: malformed payment intent")
	}
	return order.GatewayEvent{
		ID: e.ID, Type: string(e.Type), ObjectID: pi.ID,
		AttemptID: pi.Metadata["attempt_id"], ChargeID: pi.ID, Succeeded: succeeded,
	}, nil
}

// signedAt returns the time a Stripe-Signature header is signed at, read
// as stripe-go reads it (the last t=); false when it names none that
// stripe-go would accept.
func signedAt(header string) (time.Time, bool) {
	var (
		at time.Time
		ok bool
	)
	for pair := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(pair, "=")
		if k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		at, ok = time.Unix(sec, 0), true
	}
	return at, ok
}
