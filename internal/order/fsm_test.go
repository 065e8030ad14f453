package order

import (
	"errors"
	"testing"
)

// TestTransitionTable checks every (state, event) pair: the allowed edges
// lead where DESIGN.md says, and every other pair is refused.
func TestTransitionTable(t *testing.T) {
	allowed := map[edge]State{
		{StatePending, EventCharge}:                  StateCharging,
		{StatePending, EventCancel}:                  StateCanceled,
		{StateCharging, EventSucceed}:                StatePaid,
		{StateCharging, EventFail}:                   StatePending,
		{StateCharging, EventEscalate}:               StateNeedsReview,
		{StateCharging, EventRequireAction}:          StateRequiresAction,
		{StateRequiresAction, EventSucceed}:          StatePaid,
		{StateRequiresAction, EventFail}:             StatePending,
		{StateRequiresAction, EventEscalate}:         StateNeedsReview,
		{StateNeedsReview, EventResolvePaid}:         StatePaid,
		{StateNeedsReview, EventSucceed}:             StatePaid,
		{StateNeedsReview, EventResolvePending}:      StatePending,
		{StateNeedsReview, EventResolveCanceled}:     StateCanceled,
		{StatePaid, EventRefundPartial}:              StatePartiallyRefunded,
		{StatePaid, EventRefundFull}:                 StateRefunded,
		{StatePartiallyRefunded, EventRefundPartial}: StatePartiallyRefunded,
		{StatePartiallyRefunded, EventRefundFull}:    StateRefunded,
		// Capture manual (#28).
		{StateCharging, EventAuthorize}:       StateAuthorized,
		{StateRequiresAction, EventAuthorize}: StateAuthorized,
		{StateNeedsReview, EventAuthorize}:    StateAuthorized,
		{StateAuthorized, EventCapture}:       StatePaid,
		{StateAuthorized, EventVoid}:          StateVoided,
		{StateAuthorized, EventExpire}:        StateExpired,
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
	for _, s := range []State{StateRefunded, StateCanceled, StateVoided, StateExpired} {
		for _, ev := range Events {
			if _, err := Next(s, ev); err == nil {
				t.Errorf("terminal state %s allows %s", s, ev)
			}
		}
	}
}

// TestRefundTransitionTable checks every (state, event) pair of a refund.
func TestRefundTransitionTable(t *testing.T) {
	allowed := map[refundEdge]RefundState{
		{RefundPending, EventRefund}:               RefundRefunding,
		{RefundRefunding, EventSucceed}:            RefundSucceeded,
		{RefundRefunding, EventFail}:               RefundFailed,
		{RefundRefunding, EventEscalate}:           RefundNeedsReview,
		{RefundNeedsReview, EventResolveSucceeded}: RefundSucceeded,
		{RefundNeedsReview, EventResolveFailed}:    RefundFailed,
	}
	for _, from := range RefundStates {
		for _, ev := range RefundEvents {
			to, err := NextRefund(from, ev)
			want, ok := allowed[refundEdge{from, ev}]
			switch {
			case ok && (err != nil || to != want):
				t.Errorf("%s --%s--> got (%s, %v), want %s", from, ev, to, err, want)
			case !ok && err == nil:
				t.Errorf("%s --%s--> %s allowed, want refused", from, ev, to)
			}
		}
	}
}

// TestCaptureAndVoidTransitionTables checks every (state, event) pair of
// a capture and of a void: the refunds' table with their in-flight state.
func TestCaptureAndVoidTransitionTables(t *testing.T) {
	captures := map[CaptureState]map[EventName]CaptureState{
		CapturePending:   {EventStart: CaptureCapturing},
		CaptureCapturing: {EventSucceed: CaptureSucceeded, EventFail: CaptureFailed, EventEscalate: CaptureNeedsReview},
	}
	for _, from := range CaptureStates {
		for _, ev := range opEvents {
			to, err := NextCapture(from, ev)
			want, ok := captures[from][ev]
			if ok != (err == nil) || to != want {
				t.Errorf("capture %s --%s--> (%s, %v), want %q", from, ev, to, err, want)
			}
		}
	}
	voids := map[VoidState]map[EventName]VoidState{
		VoidPending: {EventStart: VoidVoiding},
		VoidVoiding: {EventSucceed: VoidSucceeded, EventFail: VoidFailed, EventEscalate: VoidNeedsReview},
	}
	for _, from := range VoidStates {
		for _, ev := range opEvents {
			to, err := NextVoid(from, ev)
			want, ok := voids[from][ev]
			if ok != (err == nil) || to != want {
				t.Errorf("void %s --%s--> (%s, %v), want %q", from, ev, to, err, want)
			}
		}
	}
}
