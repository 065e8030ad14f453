package order

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
	// zero value), or a capture's or a void's id (gatewayevent_hold.go).
	About EventAbout
}

// GatewayEventResult is what recording a gateway event came to.
type GatewayEventResult string

// The results of recording a gateway event.
const (
	// EventWoken: the attempt's order was made due for the reconciler now.
	EventWoken GatewayEventResult = "woken"
	// EventReview: a success for an attempt its order does not hold as in
	// flight or paid; a possible double charge was raised for review.
	EventReview GatewayEventResult = "review"
	// EventIgnored: the event is about a known attempt whose order it
	// cannot change (already settled for it, or a failure of a past one).
	EventIgnored GatewayEventResult = "ignored"
	// EventUnknownObject: no attempt of ours matches the event.
	EventUnknownObject GatewayEventResult = "unknown_object"
	// EventDuplicate: the event was recorded before; nothing was done.
	EventDuplicate GatewayEventResult = "duplicate"
)

// RecordedEvent is what recording a gateway event did.
type RecordedEvent struct {
	Result GatewayEventResult
	// OrderID and AttemptID are what the event was matched to, if anything.
	OrderID   string
	AttemptID string
}
