package order

import (
	"errors"
	"testing"
)

// TestTransitionTable checks every (state, event) pair: the allowed edges
// lead where DESIGN.md says, and every other pair is refused.
func TestTransitionTable(t *testing.T) {
	allowed := map[edge]State{
		{StatePending, EventCharge}:              StateCharging,
		{StatePending, EventCancel}:              StateCanceled,
		{StateCharging, EventSucceed}:            StatePaid,
		{StateCharging, EventFail}:               StatePending,
		{StateCharging, EventEscalate}:           StateNeedsReview,
		{StateNeedsReview, EventResolvePaid}:     StatePaid,
		{StateNeedsReview, EventResolvePending}:  StatePending,
		{StateNeedsReview, EventResolveCanceled}: StateCanceled,
	}
	for _, from := range States {
		for _, ev := range Events {
			to, err := Next(from, ev)
			want, ok := allowed[edge{from, ev}]
			switch {
			case ok && (err != nil || to != want):
				t.Errorf("%s --%s--> got (%s, %v), want %s", from, ev, to, err, want)
			case !ok && err == nil:
				t.Errorf("%s --%s--> %s allowed, want refused", from, ev, to)
			case !ok:
				if se := (*StateError)(nil); !errors.As(err, &se) || se.Current != from {
					t.Errorf("%s --%s--> error %v does not name the current state", from, ev, err)
				}
			}
		}
	}
	for _, s := range []State{StatePaid, StateCanceled} {
		for _, ev := range Events {
			if _, err := Next(s, ev); err == nil {
				t.Errorf("terminal state %s allows %s", s, ev)
			}
		}
	}
}
