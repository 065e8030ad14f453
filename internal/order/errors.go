package order

import (
	"errors"
	"fmt"
)

// ErrNotFound means there is no such order for the caller. An order of
// another merchant is not found either.
var ErrNotFound = errors.New("order not found")

// ErrEventNotFound means the merchant has no such event.
var ErrEventNotFound = errors.New("event not found")

// ValidationError is bad input: Field names the request field.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

// ConflictError is the reuse of a key (merchant reference, request_id) with
// other parameters.
type ConflictError struct {
	Msg string
}

func (e *ConflictError) Error() string { return e.Msg }

// MsgRequestIDOtherOrder is the conflict of a request_id already used for
// another order of the merchant.
const MsgRequestIDOtherOrder = "request_id was already used for another order"

// StateError is a move the transition table does not allow from the order's
// current state.
type StateError struct {
	Current State
	Event   EventName
}

func (e *StateError) Error() string {
	return fmt.Sprintf("cannot %s an order in state %s", e.Event, e.Current)
}

// ErrUnavailable means the database could not be reached or gave up; the
// call may be retried with the same keys.
var ErrUnavailable = errors.New("storage unavailable")

// ErrMisrouted means a distributed database kept running a call away from
// the node that holds its merchant's data (on Citus, on the coordinator
// instead of the merchant's worker), where it refused to write, even on
// fresh connections. Nothing was written. It is a kind of ErrUnavailable:
// transient, and the call may be retried with the same keys; operators are
// told, since it should not last.
var ErrMisrouted = fmt.Errorf("%w: the distributed database did not run the call on its merchant's node", ErrUnavailable)

// ChargeFoundError refuses an operator's resolution of an order as unpaid
// (PENDING or CANCELED): the gateway reports that one of its attempts
// charged the customer.
type ChargeFoundError struct {
	AttemptID string
	// ChargeID is the gateway's id of the charge, when it told us.
	ChargeID string
}

func (e *ChargeFoundError) Error() string {
	return fmt.Sprintf("the gateway reports a charge for attempt %s (gateway charge id %q): the customer was charged; resolve the order PAID with that charge", e.AttemptID, e.ChargeID)
}

// GatewayUnsureError refuses an operator's resolution of an order as
// unpaid when the gateway could not say whether an attempt charged.
type GatewayUnsureError struct {
	AttemptID string
	// Err is the gateway's failure, for logs only.
	Err error
}

func (e *GatewayUnsureError) Error() string {
	return fmt.Sprintf("the gateway could not say whether attempt %s charged the customer; try again later", e.AttemptID)
}

func (e *GatewayUnsureError) Unwrap() error { return e.Err }

// ErrGatewayRefused means the gateway refused Settle's credentials or
// request: a configuration error at Settle, not a decline of the card.
// Nothing was charged, and the order is back in PENDING; the charge will
// be refused again until an operator fixes the configuration.
var ErrGatewayRefused = errors.New("the gateway refused Settle's credentials or request")
