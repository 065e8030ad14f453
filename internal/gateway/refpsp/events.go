package refpsp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Events
//
// The gateway pushes an event when the outcome of a charge, a capture or a
// void is known, and when an authorization lapses:
//
//	POST <the merchant's endpoint>
//	Refpsp-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">
//
//	{"id": "evt_...", "type": "charge.succeeded", "created": <unix seconds>,
//	 "data": {"object": <the charge object>}}
//
// The signature has the shape of Stripe's: the key is the endpoint's
// signing secret, and while a secret is rotated the header carries one v1
// per secret. An event is delivered at least once, in no particular order;
// a repeat has the same id.
//
// The events of captures and voids carry the capture or void object
// beside the charge: {"data": {"object": <the authorization as it then
// stood>, "capture": <the capture object>}} (or "void"). Their types are
// capture.succeeded, capture.failed, void.succeeded and void.failed; an
// authorization's are charge.authorized, charge.declined and
// authorization.expired (data.object the charge).
//
// A dispute's events (dispute.opened, dispute.updated, dispute.closed)
// carry the dispute object beside the charge (dispute.go).
//
// Client.ReceiveEvents verifies and reads an event for Settle's webhook
// listener (order.EventReceiver).

// SignatureHeader is the header that carries an event's signature.
const SignatureHeader = "Refpsp-Signature"

// The types of the events the gateway sends.
const (
	// EventSucceeded: the charge succeeded; money moved.
	EventSucceeded = "charge.succeeded"
	// EventDeclined: the charge was declined.
	EventDeclined = "charge.declined"
	// EventAuthorized: the charge, made with "capture": false, holds its
	// amount.
	EventAuthorized = "charge.authorized"
	// EventAuthorizationExpired: the authorization lapsed (its status is
	// expired, or captured when something of it was).
	EventAuthorizationExpired = "authorization.expired"
	// EventCaptureSucceeded and EventCaptureFailed: a capture's outcome.
	EventCaptureSucceeded = "capture.succeeded"
	EventCaptureFailed    = "capture.failed"
	// EventVoidSucceeded and EventVoidFailed: a void's outcome.
	EventVoidSucceeded = "void.succeeded"
	EventVoidFailed    = "void.failed"
)

// Event is an event as the gateway sends it.
type Event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		// Object is the charge the event is about, or the
		// authorization a capture or a void is of.
		Object ChargeObject `json:"object"`
		// Capture and Void are the capture or the void of an event
		// about one.
		Capture *CaptureObject `json:"capture,omitempty"`
		Void    *VoidObject    `json:"void,omitempty"`
		// Dispute is the dispute of a dispute's event (dispute.go).
		Dispute *DisputeObject `json:"dispute,omitempty"`
	} `json:"data"`
}

// The errors of Verify.
var (
	ErrNotSigned    = errors.New("refpsp: event has no signature header")
	ErrBadSignature = errors.New("refpsp: event has no valid signature")
	ErrStale        = errors.New("refpsp: event signature's timestamp is outside the tolerance")
)

// Sign returns the signature header of body signed at t with each secret
// (several while a secret is rotated).
func Sign(body []byte, t time.Time, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	h := "t=" + ts
	for _, s := range secrets {
		h += ",v1=" + hex.EncodeToString(mac(ts, body, s))
	}
	return h
}

// Verify checks that header signs body with one of secrets, at a time no
// further than tolerance from now (either way: a timestamp from the future
// is as suspect as a stale one).
func Verify(body []byte, header string, secrets []string, tolerance time.Duration, now time.Time) error {
	if header == "" {
		return ErrNotSigned
	}
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return ErrBadSignature
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	for _, s := range secrets {
		want := mac(ts, body, s)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				return nil
			}
		}
	}
	return ErrBadSignature
}

func mac(ts string, body []byte, secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// DefaultEventTolerance is Config.EventTolerance when it is zero.
const DefaultEventTolerance = 5 * time.Minute

// MinEventSecretLen is the shortest event signing secret accepted: 32
// bytes, the size of the HMAC-SHA256 key that signs the events.
const MinEventSecretLen = 32

// CheckEventSecret returns why s cannot be an event signing secret, nil
// if it can. The error never holds the secret.
func CheckEventSecret(s string) error {
	if len(s) < MinEventSecretLen {
		return fmt.Errorf("a secret of %d bytes is too short: use at least %d random bytes (for example `openssl rand -hex 32`)", len(s), MinEventSecretLen)
	}
	return nil
}

// eventTypes are the events that matter, and whether each reports money
// moved (or held, for an authorization). Their types are the only text of
// an event's that reaches logs and metrics.
var eventTypes = map[string]bool{
	EventSucceeded: true, EventDeclined: false, EventAuthorized: true, EventAuthorizationExpired: false,
	EventCaptureSucceeded: true, EventCaptureFailed: false, EventVoidSucceeded: false, EventVoidFailed: false,
	EventDisputeOpened: false, EventDisputeUpdated: false, EventDisputeClosed: false,
}

var _ order.EventReceiver = (*Client)(nil)

// ReceiveEvents is order.EventReceiver's: a request carries one event.
func (c *Client) ReceiveEvents(body []byte, header map[string][]string) ([]order.GatewayEvent, error) {
	ev, err := c.receiveEvent(body, header)
	if err != nil {
		return nil, err
	}
	return []order.GatewayEvent{ev}, nil
}

// receiveEvent verifies an event signed with one of Config.EventSecrets
// within Config.EventTolerance and returns it as the domain's event: about
// the charge with the event's reference as its attempt id, or about the
// capture or void with its reference as its id (GatewayEvent.About says
// which; ObjectID and ChargeID are then the gateway's capture or void id).
func (c *Client) receiveEvent(body []byte, header map[string][]string) (order.GatewayEvent, error) {
	if err := Verify(body, http.Header(header).Get(SignatureHeader), c.eventSecrets, c.eventTolerance, time.Now()); err != nil {
		return order.GatewayEvent{}, errors.Join(order.ErrEventSignature, err)
	}
	var e Event
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" || e.Data.Object.Reference == "" {
		return order.GatewayEvent{}, errors.New("refpsp: malformed event")
	}
	succeeded, ok := eventTypes[e.Type]
	if !ok {
		return order.GatewayEvent{}, order.ErrEventIgnored
	}
	ge := order.GatewayEvent{
		ID: e.ID, Type: e.Type, ObjectID: e.Data.Object.ID,
		AttemptID: e.Data.Object.Reference, ChargeID: e.Data.Object.ID, Succeeded: succeeded,
	}
	switch e.Type {
	case EventCaptureSucceeded, EventCaptureFailed:
		if e.Data.Capture == nil || e.Data.Capture.Reference == "" {
			return order.GatewayEvent{}, errors.New("refpsp: malformed event: a capture's event carries no capture")
		}
		ge.About, ge.AttemptID, ge.ObjectID, ge.ChargeID = order.EventAboutCapture, e.Data.Capture.Reference, e.Data.Capture.ID, e.Data.Capture.ID
	case EventVoidSucceeded, EventVoidFailed:
		if e.Data.Void == nil || e.Data.Void.Reference == "" {
			return order.GatewayEvent{}, errors.New("refpsp: malformed event: a void's event carries no void")
		}
		ge.About, ge.AttemptID, ge.ObjectID, ge.ChargeID = order.EventAboutVoid, e.Data.Void.Reference, e.Data.Void.ID, e.Data.Void.ID
	case EventDisputeOpened, EventDisputeUpdated, EventDisputeClosed:
		if e.Data.Dispute == nil {
			return order.GatewayEvent{}, errors.New("refpsp: malformed event: a dispute's event carries no dispute")
		}
		d, err := e.Data.Dispute.Dispute()
		if err != nil {
			return order.GatewayEvent{}, fmt.Errorf("refpsp: event %s: %w", clip(e.ID), err)
		}
		if e.Data.Dispute.ChargeID != e.Data.Object.ID {
			return order.GatewayEvent{}, errors.New("refpsp: malformed event: the dispute is of another charge than the event's")
		}
		ge.ObjectID, ge.Dispute = d.ID, &d
	}
	return ge, nil
}
