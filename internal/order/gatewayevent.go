package order

import (
	"context"
	"time"
)

// GatewayEvent is an event a gateway pushed about one of its objects, once
// its signature has been verified. It is a hint, never a verdict: it makes
// the attempt it names due for the reconciler now, and the reconciler's
// guarded lookup decides what happened.
type GatewayEvent struct {
	// Gateway is the gateway's name ("stripe", "refpsp").
	Gateway string
	// ID is the gateway's id of the event; a gateway delivers an event at
	// least once, and a repeat has the same ID.
	ID string
	// Type is the gateway's name for the event ("payment_intent.succeeded").
	Type string
	// ObjectID is the gateway's id of the object the event is about.
	ObjectID string
	// AttemptID is our attempt id as the event carries it (the reference,
	// or the PaymentIntent's metadata), or "" when it carries none.
	AttemptID string
	// ChargeID is the gateway's id of the charge, matched against the
	// attempts' recorded gateway_charge_id when AttemptID is absent.
	ChargeID string
	// Succeeded says the event reports money moved: a success for an
	// attempt its order does not hold raises a possible double charge.
	Succeeded bool
	// About says what AttemptID names: an attempt (EventAboutAttempt, the
	// zero value), or a capture's, a void's or a refund's id
	// (gatewayevent_hold.go).
	About EventAbout

	// The event's own word on the operation it is about, for a gateway
	// whose Lookup answers from the events Settle recorded (Adyen has no
	// read of a payment's status; see EventLog). Adapters of gateways that
	// can be read leave them zero.
	//
	// Outcome is OutcomeSucceeded or OutcomeDeclined (with DeclineCode,
	// the gateway's reason), or "" when the event is only a hint.
	Outcome     Outcome
	DeclineCode string
	// FailedLater says the decline is of an operation the gateway had
	// accepted, or reported done (Adyen's CAPTURE_FAILED, REFUND_FAILED):
	// about an attempt whose order is still in flight, it raises a
	// capture_failed item at once, since the call in flight may yet
	// settle the order paid on the capture the gateway received.
	FailedLater bool
	// Amount is the amount the event reports, when it reports one.
	Amount Money
	// OccurredAt is when the gateway says it happened; zero if it did not.
	OccurredAt time.Time

	// Dispute, when set, says the event is about a dispute of the charge
	// that AttemptID (or ChargeID) names, and what the event says of it
	// (dispute.go). For a DisputeGateway it is a hint that names the
	// dispute to read (ID is enough); for the others it is the gateway's
	// word, applied only forward (DisputeRank).
	Dispute *GatewayDispute
}

// EventLog reads the verified gateway events Settle recorded, for a
// gateway whose Lookup answers from them; postgres.Store implements it.
type EventLog interface {
	// GatewayEventsAbout returns the events recorded from gateway whose
	// AttemptID is reference (an attempt's, a capture's, a void's or a
	// refund's id), in the order they were recorded, each once, with
	// every field ReceiveEvents set.
	GatewayEventsAbout(ctx context.Context, gateway, reference string) ([]GatewayEvent, error)
}

// GatewayEventResult is what recording a gateway event came to.
type GatewayEventResult string

// The results of recording a gateway event.
const (
	// EventWoken: the attempt's order, or the capture, void or refund in
	// flight the event is about, was made due for the reconciler now; or
	// the hold of an AUTHORIZED order, which the event reports ended with
	// no money moved (Adyen's EXPIRE), was made due for its lookup.
	EventWoken GatewayEventResult = "woken"
	// EventReview: a success for an attempt its order does not hold as in
	// flight, held or paid; a possible double charge was raised for review.
	EventReview GatewayEventResult = "review"
	// EventReviewCaptureFailed: a decline reported for the operation that
	// took the order's money (the attempt that paid it, or a succeeded
	// capture: Adyen's CAPTURE_FAILED after a capture it had received);
	// nothing moved, and a capture_failed item was raised for review.
	EventReviewCaptureFailed GatewayEventResult = "capture_failed"
	// EventReviewRefundFailed: a decline reported for a refund that
	// succeeded (Adyen's REFUND_FAILED after the REFUND that reported it
	// done): the money did not go back; the refund stays SUCCEEDED and a
	// refund_failed item was raised for review.
	EventReviewRefundFailed GatewayEventResult = "refund_failed"
	// EventIgnored: the event is about a known attempt (or capture, void,
	// refund) whose order it cannot change (already settled for it, or a
	// failure of a past one).
	EventIgnored GatewayEventResult = "ignored"
	// EventUnknownObject: nothing of ours matches the event.
	EventUnknownObject GatewayEventResult = "unknown_object"
	// EventDuplicate: the event was recorded before; nothing was done.
	EventDuplicate GatewayEventResult = "duplicate"
)

// RecordedEvent is what recording a gateway event did.
type RecordedEvent struct {
	Result GatewayEventResult
	// OrderID and AttemptID are what the event was matched to, if anything
	// (AttemptID is the capture's, void's or refund's id for an event
	// about one).
	OrderID   string
	AttemptID string
}
