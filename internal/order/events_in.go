package order

import "errors"

// EventReceiver is implemented by a gateway that pushes signed events
// about its objects (Stripe's webhooks, refpsp's events). The webhook
// listener reads each request to the gateway's path, bounded, and hands it
// over: the adapter verifies the signature and reads the event, so that
// the listener knows no gateway's format.
type EventReceiver interface {
	// ReceiveEvent verifies that the request with body and header (as
	// net/http's Header, names canonical) is signed by the gateway, and
	// returns the event it carries. The listener names the event's
	// Gateway. The error wraps ErrEventSignature when the request is not
	// verified, and nothing of it may be trusted; ErrEventIgnored when it
	// is a verified event of a type that changes nothing; any other error
	// is a verified event that cannot be read.
	ReceiveEvent(body []byte, header map[string][]string) (GatewayEvent, error)
}

// The errors of ReceiveEvent the listener answers apart.
var (
	// ErrEventSignature: the request's signature is missing, wrong or out
	// of its time tolerance.
	ErrEventSignature = errors.New("gateway event has no valid signature")
	// ErrEventIgnored: a verified event of a type Settle does not use.
	ErrEventIgnored = errors.New("gateway event type ignored")
)
