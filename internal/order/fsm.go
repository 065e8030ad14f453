package order

import (
	"context"
	"errors"
	"fmt"

	"github.com/looplab/fsm"
)

// EventName names a move in the transition table.
type EventName string

// The events of the transition table.
const (
	// EventCharge claims a PENDING order for an attempt.
	EventCharge EventName = "charge"
	// EventSucceed: the gateway charged the customer (found by the charge
	// path, or by the reconciler, also for an order in review).
	EventSucceed EventName = "succeed"
	// EventFail: the gateway proved no charge happened (declined, not sent,
	// rejected, or not found past the no-show horizon).
	EventFail EventName = "fail"
	// EventCancel abandons a PENDING order.
	EventCancel EventName = "cancel"
	// EventEscalate hands an order whose outcome could not be learned to a person.
	EventEscalate EventName = "escalate"
	// EventResolvePaid, EventResolvePending and EventResolveCanceled are an
	// operator's decisions for an order in NEEDS_REVIEW.
	EventResolvePaid     EventName = "resolve_paid"
	EventResolvePending  EventName = "resolve_pending"
	EventResolveCanceled EventName = "resolve_canceled"
	// EventRefundPartial and EventRefundFull record a refund that
	// succeeded: some of what was paid has gone back, or all of it.
	EventRefundPartial EventName = "refund_partial"
	EventRefundFull    EventName = "refund_full"
	// EventRequireAction records that the gateway asks the customer to act
	// (3-D Secure) before it charges.
	EventRequireAction EventName = "require_action"
	// EventAuthorize: the gateway authorized a capture-manual order's
	// charge (found by the charge path, or by the reconciler).
	EventAuthorize EventName = "authorize"
	// EventCapture: the first capture of an authorization succeeded.
	EventCapture EventName = "capture"
	// EventVoid: a void released the authorization.
	EventVoid EventName = "void"
	// EventExpire: the gateway says the authorization lapsed.
	EventExpire EventName = "expire"
)

// Events lists every event of the transition table.
var Events = []EventName{EventCharge, EventSucceed, EventFail, EventCancel, EventEscalate,
	EventResolvePaid, EventResolvePending, EventResolveCanceled, EventRefundPartial, EventRefundFull,
	EventRequireAction, EventAuthorize, EventCapture, EventVoid, EventExpire}

// transitions is the only place that says which move is allowed.
var transitions = fsm.Events{
	{Name: string(EventCharge), Src: []string{string(StatePending)}, Dst: string(StateCharging)},
	// From NEEDS_REVIEW too: the reconciler keeps looking up an order in
	// review, and a charge the gateway shows late is the truth. From
	// REQUIRES_ACTION: the customer completed the gateway's challenge.
	{Name: string(EventSucceed), Src: []string{string(StateCharging), string(StateNeedsReview), string(StateRequiresAction)}, Dst: string(StatePaid)},
	{Name: string(EventFail), Src: []string{string(StateCharging), string(StateRequiresAction)}, Dst: string(StatePending)},
	{Name: string(EventRequireAction), Src: []string{string(StateCharging)}, Dst: string(StateRequiresAction)},
	{Name: string(EventCancel), Src: []string{string(StatePending)}, Dst: string(StateCanceled)},
	{Name: string(EventEscalate), Src: []string{string(StateCharging), string(StateRequiresAction)}, Dst: string(StateNeedsReview)},
	{Name: string(EventResolvePaid), Src: []string{string(StateNeedsReview)}, Dst: string(StatePaid)},
	{Name: string(EventResolvePending), Src: []string{string(StateNeedsReview)}, Dst: string(StatePending)},
	{Name: string(EventResolveCanceled), Src: []string{string(StateNeedsReview)}, Dst: string(StateCanceled)},
	{Name: string(EventRefundPartial), Src: []string{string(StatePaid), string(StatePartiallyRefunded)},
		Dst: string(StatePartiallyRefunded)},
	{Name: string(EventRefundFull), Src: []string{string(StatePaid), string(StatePartiallyRefunded)},
		Dst: string(StateRefunded)},
	// A capture-manual order's charge: the same sources as EventSucceed.
	{Name: string(EventAuthorize), Src: []string{string(StateCharging), string(StateNeedsReview), string(StateRequiresAction)},
		Dst: string(StateAuthorized)},
	{Name: string(EventCapture), Src: []string{string(StateAuthorized)}, Dst: string(StatePaid)},
	{Name: string(EventVoid), Src: []string{string(StateAuthorized)}, Dst: string(StateVoided)},
	{Name: string(EventExpire), Src: []string{string(StateAuthorized)}, Dst: string(StateExpired)},
}

// The history rows of a capture that moves no order: a capture after the
// first (the order is already PAID) and a capture that failed. Like
// EventCreate they are not moves of the transition table; each is written
// into the order's history (from and to its state as it stands) so that
// the merchant is sent capture.succeeded or capture.failed.
const (
	EventCaptured      EventName = "captured"
	EventCaptureFailed EventName = "capture_failed"
)

// Capturable reports whether an order in state s may be captured: it is
// authorized, or already PAID (or refunded in part) by an earlier capture
// that left the hold open. The claim checks the rest (the hold's totals).
func (s State) Capturable() bool {
	return s == StateAuthorized || s == StatePaid || s == StatePartiallyRefunded
}

// Refundable reports whether an order in state s may be refunded.
func (s State) Refundable() bool {
	_, err := Next(s, EventRefundPartial)
	return err == nil
}

// The events of a refund's transition table. A refund is created PENDING
// (EventCreate) and moves to REFUNDING in the same commit, when it is
// admitted; EventSucceed, EventFail and EventEscalate settle it as they do
// an order's charge.
const (
	// EventRefund claims a PENDING refund for its gateway call.
	EventRefund EventName = "refund"
	// EventResolveSucceeded and EventResolveFailed are an operator's
	// decisions for a refund in NEEDS_REVIEW.
	EventResolveSucceeded EventName = "resolve_succeeded"
	EventResolveFailed    EventName = "resolve_failed"
)

// RefundEvents lists every event of the refunds' transition table.
var RefundEvents = []EventName{EventRefund, EventSucceed, EventFail, EventEscalate, EventResolveSucceeded,
	EventResolveFailed}

// refundTransitions says which move a refund may make.
var refundTransitions = fsm.Events{
	{Name: string(EventRefund), Src: []string{string(RefundPending)}, Dst: string(RefundRefunding)},
	{Name: string(EventSucceed), Src: []string{string(RefundRefunding)}, Dst: string(RefundSucceeded)},
	{Name: string(EventFail), Src: []string{string(RefundRefunding)}, Dst: string(RefundFailed)},
	{Name: string(EventEscalate), Src: []string{string(RefundRefunding)}, Dst: string(RefundNeedsReview)},
	{Name: string(EventResolveSucceeded), Src: []string{string(RefundNeedsReview)}, Dst: string(RefundSucceeded)},
	{Name: string(EventResolveFailed), Src: []string{string(RefundNeedsReview)}, Dst: string(RefundFailed)},
}

type refundEdge struct {
	from  RefundState
	event EventName
}

// refundTable is refundTransitions expanded, like table.
var refundTable = func() map[refundEdge]RefundState {
	t := make(map[refundEdge]RefundState)
	for _, from := range RefundStates {
		for _, ev := range RefundEvents {
			if to, ok := run(string(from), refundTransitions, ev); ok {
				t[refundEdge{from, ev}] = RefundState(to)
			}
		}
	}
	return t
}()

// NextRefund returns the state that event ev leads a refund to from state
// from, or a *RefundStateError when the table does not allow the move.
func NextRefund(from RefundState, ev EventName) (RefundState, error) {
	to, ok := refundTable[refundEdge{from, ev}]
	if !ok {
		return "", &RefundStateError{Current: from, Event: ev}
	}
	return to, nil
}

// MustNextRefund is NextRefund for moves that the caller's guard has
// established.
func MustNextRefund(from RefundState, ev EventName) RefundState {
	to, err := NextRefund(from, ev)
	if err != nil {
		panic(fmt.Sprintf("order: refund transition table refuses %s from %s", ev, from))
	}
	return to
}

// run makes event ev from state from in a state machine of events, and
// returns the state it leads to. A move to the state it starts from (a
// partial refund after another) is a move: looplab/fsm reports it as
// NoTransitionError, having found the edge.
func run(from string, events fsm.Events, ev EventName) (string, bool) {
	m := fsm.NewFSM(from, events, nil)
	err := m.Event(context.Background(), string(ev))
	if err != nil && !errors.As(err, new(fsm.NoTransitionError)) {
		return "", false
	}
	return m.Current(), true
}

type edge struct {
	from  State
	event EventName
}

// table is the transition table above, expanded once by running the state
// machine from every state, so that each check is a map lookup rather than
// a new fsm.FSM on the charge path.
var table = func() map[edge]State {
	t := make(map[edge]State)
	for _, from := range States {
		for _, ev := range Events {
			if to, ok := run(string(from), transitions, ev); ok {
				t[edge{from, ev}] = State(to)
			}
		}
	}
	return t
}()

// Next returns the state that event ev leads to from state from, or a
// *StateError when the table does not allow the move.
func Next(from State, ev EventName) (State, error) {
	to, ok := table[edge{from, ev}]
	if !ok {
		return "", &StateError{Current: from, Event: ev}
	}
	return to, nil
}

// MustNext is Next for moves the caller's own guard has already established,
// such as settling a CHARGING order; a refused move there is a programming
// error.
func MustNext(from State, ev EventName) State {
	to, err := Next(from, ev)
	if err != nil {
		panic(fmt.Sprintf("order: transition table refuses %s from %s", ev, from))
	}
	return to
}

// EventCreate records the creation of an order in its history. It is not a
// move of the transition table: every history starts with it, in PENDING.
const EventCreate EventName = "create"
