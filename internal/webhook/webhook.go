// Package webhook takes in the events that gateways push (Stripe's
// webhooks, refpsp's equivalents) over HTTP. An event is verified first (a
// bad or missing signature is 400 and stores nothing), recorded once with
// what it triggers in one commit, and answered 2xx only after that commit,
// so that a gateway retries every event Settle has not made durable.
//
// An event never settles an order by itself: it makes its attempt's order
// due for the reconciler now, whose guarded lookup decides, exactly as for
// a timeout. A success reported for an attempt its order does not hold (a
// past attempt, or a PAID order's other one) moves nothing and raises a
// possible double charge for a person.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	stripewebhook "github.com/stripe/stripe-go/v76/webhook"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// DefaultMaxBody bounds an event's body when Config.MaxBody is zero. Stripe
// events about a PaymentIntent are a few kilobytes.
const DefaultMaxBody = 256 << 10

// DefaultTolerance is Config.Tolerance when it is zero: Stripe's own.
const DefaultTolerance = stripewebhook.DefaultTolerance

// Store records events; postgres.Store implements it.
type Store interface {
	// RecordGatewayEvent records ev once with what it triggers, in one
	// commit; a repeat is order.EventDuplicate and does nothing.
	RecordGatewayEvent(ctx context.Context, ev order.GatewayEvent) (order.RecordedEvent, error)
}

// Config configures the handler.
type Config struct {
	// StripeSecrets are the signing secrets (whsec_...) of the Stripe
	// endpoint; an event signed with any of them is accepted, so that a
	// secret can be rotated. With none, /webhooks/stripe is 404.
	StripeSecrets []string
	// RefpspSecrets are refpsp's signing secrets, as StripeSecrets.
	RefpspSecrets []string
	// Tolerance bounds how far a signature's timestamp may lie in the
	// past, which stops the replay of an old event, or in the future,
	// which would let an event signed once be replayed until then. Zero
	// is DefaultTolerance.
	Tolerance time.Duration
	// MaxBody bounds a body; a larger one is 413. Zero is DefaultMaxBody.
	MaxBody int64
	// OnEvent, when set, is told of every request: the gateway, the
	// event's type ("" when it could not be read) and the result (an
	// order.GatewayEventResult, or bad_signature, malformed, too_large,
	// ignored_type, error).
	OnEvent func(gateway, eventType, result string)
}

// Handler serves POST /webhooks/stripe and POST /webhooks/refpsp.
type Handler struct {
	store Store
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
}

// New returns a Handler.
func New(store Store, cfg Config, log *slog.Logger) *Handler {
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, string, string) {}
	}
	h := &Handler{store: store, cfg: cfg, log: log, mux: http.NewServeMux()}
	if len(cfg.StripeSecrets) > 0 {
		h.mux.HandleFunc("POST /webhooks/stripe", h.serve("stripe", h.stripeEvent))
	}
	if len(cfg.RefpspSecrets) > 0 {
		h.mux.HandleFunc("POST /webhooks/refpsp", h.serve("refpsp", h.refpspEvent))
	}
	return h
}

// ServeHTTP serves the endpoints of the configured gateways. Every answer
// says Connection: close, which makes net/http close the connection after
// it, except the answer to a verified event: a sender that cannot sign
// (an unknown path, a bad signature, a body too large) never keeps a
// connection open for another request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	h.mux.ServeHTTP(w, r)
}

// errIgnoredType is an event of a type that changes nothing for Settle.
var errIgnoredType = errors.New("event type ignored")

// errBadSignature wraps every failure of verification.
var errBadSignature = errors.New("bad signature")

// parseFunc verifies a body and its request's headers and returns the event
// it carries.
type parseFunc func(body []byte, r *http.Request) (order.GatewayEvent, error)

func (h *Handler) serve(gateway string, parse parseFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			h.answer(w, gateway, "", "too_large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			h.answer(w, gateway, "", "malformed", http.StatusBadRequest)
			return
		}
		ev, err := parse(body, r)
		if errors.Is(err, errBadSignature) {
			// Nothing is stored; the reason is not told to the sender.
			h.answer(w, gateway, "", "bad_signature", http.StatusBadRequest)
			return
		}
		// The gateway signed it: its connection stays open for more.
		w.Header().Del("Connection")
		switch {
		case errors.Is(err, errIgnoredType):
			h.answer(w, gateway, "", "ignored_type", http.StatusOK)
			return
		case err != nil:
			h.answer(w, gateway, "", "malformed", http.StatusBadRequest)
			return
		}
		rec, err := h.store.RecordGatewayEvent(r.Context(), ev)
		if err != nil {
			// Not recorded: a 5xx makes the gateway deliver it again.
			h.log.WarnContext(r.Context(), "gateway event not recorded", "gateway", gateway, "type", ev.Type, "error", err)
			h.answer(w, gateway, ev.Type, "error", http.StatusServiceUnavailable)
			return
		}
		// The event id and object id are the gateway's text; the log
		// carries only what Settle chose.
		level := slog.LevelInfo
		if rec.Result == order.EventReview {
			level = slog.LevelError
		}
		h.log.Log(r.Context(), level, "gateway event", "gateway", gateway, "type", ev.Type,
			"result", string(rec.Result), "order_id", rec.OrderID, "attempt_id", rec.AttemptID)
		h.answer(w, gateway, ev.Type, string(rec.Result), http.StatusOK)
	}
}

func (h *Handler) answer(w http.ResponseWriter, gateway, eventType, result string, code int) {
	h.cfg.OnEvent(gateway, eventType, result)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"result": result})
	w.Write(append(b, '\n'))
}

// stripeTypes are the Stripe events that matter, and whether each reports
// money moved. Their types are the only text of an event's that reaches
// logs and metrics.
var stripeTypes = map[string]bool{
	"payment_intent.succeeded":       true,
	"payment_intent.payment_failed":  false,
	"payment_intent.canceled":        false,
	"payment_intent.requires_action": false,
	"payment_intent.processing":      false,
}

// errFutureTimestamp is a signature dated further ahead than the
// tolerance.
var errFutureTimestamp = errors.New("signature timestamp is in the future")

func (h *Handler) stripeEvent(body []byte, r *http.Request) (order.GatewayEvent, error) {
	header := r.Header.Get("Stripe-Signature")
	// stripe-go (v76: ValidatePayloadWithTolerance, ConstructEventWithOptions
	// alike) refuses only a timestamp older than the tolerance; one ahead
	// of it is refused here.
	if at, ok := stripeTimestamp(header); ok && at.After(time.Now().Add(h.cfg.Tolerance)) {
		return order.GatewayEvent{}, errors.Join(errBadSignature, errFutureTimestamp)
	}
	var err error
	for _, secret := range h.cfg.StripeSecrets {
		// stripe-go checks every v1 signature of the header (Stripe sends
		// one per secret while a secret is rolled) against this secret.
		if err = stripewebhook.ValidatePayloadWithTolerance(body, header, secret, h.cfg.Tolerance); err == nil {
			break
		}
	}
	if err != nil {
		return order.GatewayEvent{}, errors.Join(errBadSignature, err)
	}
	// The event is read without stripe-go's API version check: only the
	// PaymentIntent's id and metadata are used, which every version has.
	var e stripe.Event
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" || e.Data == nil {
		return order.GatewayEvent{}, errors.New("malformed event")
	}
	succeeded, ok := stripeTypes[string(e.Type)]
	if !ok {
		return order.GatewayEvent{}, errIgnoredType
	}
	var pi stripe.PaymentIntent
	if err := json.Unmarshal(e.Data.Raw, &pi); err != nil || pi.ID == "" {
		return order.GatewayEvent{}, errors.New("malformed payment intent")
	}
	return order.GatewayEvent{
		Gateway: "stripe", ID: e.ID, Type: string(e.Type), ObjectID: pi.ID,
		AttemptID: pi.Metadata["attempt_id"], ChargeID: pi.ID, Succeeded: succeeded,
	}, nil
}

// stripeTimestamp returns the time a Stripe-Signature header is signed
// at, read as stripe-go reads it (the last t=); false when it names none
// that stripe-go would accept.
func stripeTimestamp(header string) (time.Time, bool) {
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

// MinRefpspSecretLen is the shortest refpsp signing secret accepted: 32
// bytes, the size of the HMAC-SHA256 key that signs its events.
const MinRefpspSecretLen = 32

// CheckRefpspSecret returns why s cannot be a refpsp signing secret, nil
// if it can. The error never holds the secret.
func CheckRefpspSecret(s string) error {
	if len(s) < MinRefpspSecretLen {
		return fmt.Errorf("a secret of %d bytes is too short: use at least %d random bytes (for example `openssl rand -hex 32`)", len(s), MinRefpspSecretLen)
	}
	return nil
}

// CheckStripeSecret returns why s is not a Stripe endpoint signing secret
// as Stripe issues them, nil if it is one: "whsec_" and at least 32 letters
// and digits (the Dashboard's and the API's have 32, the Stripe CLI's 64
// hexadecimal digits). The error never holds the secret.
func CheckStripeSecret(s string) error {
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

// refpspTypes are refpsp's events, as stripeTypes.
var refpspTypes = map[string]bool{refpsp.EventSucceeded: true, refpsp.EventDeclined: false}

func (h *Handler) refpspEvent(body []byte, r *http.Request) (order.GatewayEvent, error) {
	if err := refpsp.Verify(body, r.Header.Get(refpsp.SignatureHeader), h.cfg.RefpspSecrets, h.cfg.Tolerance, time.Now()); err != nil {
		return order.GatewayEvent{}, errors.Join(errBadSignature, err)
	}
	var e refpsp.Event
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" || e.Data.Object.Reference == "" {
		return order.GatewayEvent{}, errors.New("malformed event")
	}
	succeeded, ok := refpspTypes[e.Type]
	if !ok {
		return order.GatewayEvent{}, errIgnoredType
	}
	return order.GatewayEvent{
		Gateway: "refpsp", ID: e.ID, Type: e.Type, ObjectID: e.Data.Object.ID,
		AttemptID: e.Data.Object.Reference, ChargeID: e.Data.Object.ID, Succeeded: succeeded,
	}, nil
}
