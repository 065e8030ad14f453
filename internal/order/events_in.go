package order

import "errors"

// EventReceiver is implemented by a gateway that pushes signed events
// about its objects (Stripe's webhooks, refpsp's events, Adyen's
// notifications). The webhook listener reads each request to the gateway's
// path, bounded, and hands it over: the adapter verifies the signature and
// reads the events, so that the listener knows no gateway's format.
type EventReceiver interface {
	// ReceiveEvents verifies that the request with body and header (as
	// net/http's Header, names canonical) is signed by the gateway, and
	// returns the events it carries: one for Stripe and refpsp, a batch
	// for Adyen. The listener names each event's Gateway. The error wraps
	// ErrEventSignature when the request, or any event of it, is not
	// verified, and nothing of it may be trusted; ErrEventIgnored when it
	// carries only events of types that change nothing; any other error is
	// a verified request that cannot be read. Events of types that change
	// nothing are left out of a batch.
	ReceiveEvents(body []byte, header map[string][]string) ([]GatewayEvent, error)
}

// EventAcknowledger is implemented by an EventReceiver whose gateway wants
// an answer of its own once every event of a request is recorded (Adyen
// wants "[accepted]"). Without it, the listener answers with its JSON.
type EventAcknowledger interface {
	// Acknowledge returns the 2xx answer's content type and body.
	Acknowledge() (contentType string, body []byte)
}

// The errors of ReceiveEvents the listener answers apart.
var (
	// ErrEventSignature: the request's signature is missing, wrong or out
	// of its time tolerance.
	ErrEventSignature = errors.New("gateway event has no valid signature")
	// ErrEventIgnored: a verified event of a type Settle does not use.
	ErrEventIgnored = errors.New("gateway event type ignored")
)
