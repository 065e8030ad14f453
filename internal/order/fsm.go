package order

import (
	"context"
	"fmt"

	"github.com/looplab/fsm"
)

// EventName names a move in the transition table.
type EventName string

// The events of the transition table.
const (
	// EventCharge claims a PENDING order for an attempt.
	EventCharge EventName = "charge"
	// EventSucceed: the gateway charged the customer.
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
)

// Events lists every event of the transition table.
var Events = []EventName{EventCharge, EventSucceed, EventFail, EventCancel, EventEscalate,
	EventResolvePaid, EventResolvePending, EventResolveCanceled}

// transitions is the only place that says which move is allowed.
var transitions = fsm.Events{
	{Name: string(EventCharge), Src: []string{string(StatePending)}, Dst: string(StateCharging)},
	{Name: string(EventSucceed), Src: []string{string(StateCharging)}, Dst: string(StatePaid)},
	{Name: string(EventFail), Src: []string{string(StateCharging)}, Dst: string(StatePending)},
	{Name: string(EventCancel), Src: []string{string(StatePending)}, Dst: string(StateCanceled)},
	{Name: string(EventEscalate), Src: []string{string(StateCharging)}, Dst: string(StateNeedsReview)},
	{Name: string(EventResolvePaid), Src: []string{string(StateNeedsReview)}, Dst: string(StatePaid)},
	{Name: string(EventResolvePending), Src: []string{string(StateNeedsReview)}, Dst: string(StatePending)},
	{Name: string(EventResolveCanceled), Src: []string{string(StateNeedsReview)}, Dst: string(StateCanceled)},
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
			m := fsm.NewFSM(string(from), transitions, nil)
			if err := m.Event(context.Background(), string(ev)); err == nil {
				t[edge{from, ev}] = State(m.Current())
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
