package reconcile

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// TestDecide covers every way a check can end: what the gateway said (or
// failed to say), the attempt's age against the no-show horizon, and the
// checks left in the schedule.
func TestDecide(t *testing.T) {
	t.Parallel()
	const horizon = time.Hour
	schedule := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}
	r, err := New(nil, nil, Config{Schedule: schedule, BatchSize: 1, Concurrency: 1, PollInterval: time.Second,
		LookupTimeout: time.Second, NoShowHorizon: horizon}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var (
		succeeded = order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}
		declined  = order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_2", DeclineCode: "card_declined"}
		notFound  = order.Result{Outcome: order.OutcomeNotFound}
		unknown   = order.Result{Outcome: order.OutcomeUnknown}
		timeout   = errors.New("lookup timed out")
		expired   = fmt.Errorf("key too old: %w", order.ErrLookupExpired)
		notYet    = fmt.Errorf("no notification yet: %w", order.ErrNotYetKnown)
	)
	// jittered is the range a recheck after d may fall in (±20%).
	jittered := func(d time.Duration) [2]time.Duration { return [2]time.Duration{d - d/5, d + d/5} }
	tests := []struct {
		name string
		// checked is how many checks came before this one.
		checked int
		// operator marks a check an operator asked for (ReconcileOrder),
		// not one of the schedule's.
		operator bool
		age      time.Duration
		res      order.Result
		err      error

		wantEvent   order.EventName // "" for a recheck
		wantOutcome order.Outcome
		wantReason  string // a part of the reason
		wantLastErr string // a part of LastError
		wantRecheck [2]time.Duration
		// wantUncounted: the check does not use up the schedule.
		wantUncounted bool
	}{
		{name: "found succeeded", age: time.Minute, res: succeeded,
			wantEvent: order.EventSucceed, wantOutcome: order.OutcomeSucceeded, wantReason: "gateway has the charge"},
		{name: "found succeeded on the last check", checked: 2, age: time.Minute, res: succeeded,
			wantEvent: order.EventSucceed, wantOutcome: order.OutcomeSucceeded, wantReason: "gateway has the charge"},
		{name: "found declined", age: time.Minute, res: declined,
			wantEvent: order.EventFail, wantOutcome: order.OutcomeDeclined, wantReason: "declined: card_declined"},
		{name: "not found past the horizon", age: horizon + time.Second, res: notFound,
			wantEvent: order.EventFail, wantOutcome: order.OutcomeNotFound, wantReason: "can no longer arrive"},
		{name: "not found within the horizon", age: 10 * time.Minute, res: notFound,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "may still arrive", wantUncounted: true,
			// Not before the horizon has passed: no sooner check could settle it.
			wantRecheck: [2]time.Duration{horizon - 10*time.Minute + time.Second, horizon - 10*time.Minute + time.Second}},
		{name: "not found within the horizon, horizon nearly past", age: horizon - time.Second, res: notFound,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "may still arrive", wantRecheck: jittered(schedule[0]), wantUncounted: true},
		// A "not found" while the request may still arrive is no failed
		// check: it never exhausts the schedule.
		{name: "not found within the horizon, one check left", checked: 2, age: 10 * time.Minute, res: notFound,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "may still arrive", wantUncounted: true,
			wantRecheck: [2]time.Duration{horizon - 10*time.Minute + time.Second, horizon - 10*time.Minute + time.Second}},
		// A gateway that reports outcomes only by notification, before
		// the horizon: as "not found", no failed check.
		{name: "not yet known within the horizon, one check left", checked: 2, age: 10 * time.Minute, res: unknown, err: notYet,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "no notification yet", wantUncounted: true,
			wantRecheck: [2]time.Duration{horizon - 10*time.Minute + time.Second, horizon - 10*time.Minute + time.Second}},
		// An operator's check learns what it can but uses up nothing.
		{name: "operator check, lookup error, one check left", checked: 2, operator: true, res: unknown, err: timeout,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "lookup timed out", wantRecheck: jittered(schedule[2]), wantUncounted: true},
		{name: "operator check, not found within the horizon, one check left", checked: 2, operator: true, age: time.Minute, res: notFound,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "may still arrive", wantUncounted: true,
			wantRecheck: [2]time.Duration{horizon - time.Minute + time.Second, horizon - time.Minute + time.Second}},
		{name: "operator check, found succeeded", checked: 2, operator: true, age: time.Minute, res: succeeded,
			wantEvent: order.EventSucceed, wantOutcome: order.OutcomeSucceeded, wantReason: "gateway has the charge", wantUncounted: true},
		{name: "lookup error, schedule left", res: unknown, err: timeout,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "lookup timed out", wantRecheck: jittered(schedule[1])},
		{name: "lookup error, one check left", checked: 1, res: unknown, err: timeout,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "lookup timed out", wantRecheck: jittered(schedule[2])},
		{name: "lookup error, schedule exhausted", checked: 2, res: unknown, err: timeout,
			wantEvent: order.EventEscalate, wantOutcome: order.OutcomeUnknown, wantReason: "after 3 checks: lookup timed out",
			wantLastErr: "lookup timed out"},
		{name: "lookup error past the horizon", age: 2 * horizon, res: unknown, err: timeout,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "lookup timed out", wantRecheck: jittered(schedule[1])},
		// A lookup the request budget refused asked nothing: no failed check.
		{name: "budget used up, one check left", checked: 2, res: order.Result{}, err: order.ErrBudgetExhausted,
			wantOutcome: order.OutcomeUnknown, wantLastErr: "request budget", wantRecheck: jittered(schedule[2]), wantUncounted: true},
		{name: "lookup expired, schedule left", res: unknown, err: expired,
			wantEvent: order.EventEscalate, wantOutcome: order.OutcomeUnknown, wantReason: "key too old", wantLastErr: "key too old"},
		{name: "answer outside the contract", res: unknown,
			wantOutcome: order.OutcomeUnknown, wantLastErr: `answered "unknown"`, wantRecheck: jittered(schedule[1])},
		{name: "answer outside the contract, schedule exhausted", checked: 2, res: unknown,
			wantEvent: order.EventEscalate, wantOutcome: order.OutcomeUnknown, wantReason: "after 3 checks", wantLastErr: `answered "unknown"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := order.Due{
				Order:      order.Order{ID: "ord_1", State: order.StateCharging, ReconcileCount: tt.checked},
				Attempt:    order.Attempt{ID: "att_1"},
				AttemptAge: tt.age,
			}
			st := r.decide(d, tt.res, tt.err, !tt.operator)
			if st.OrderID != "ord_1" || st.AttemptID != "att_1" || st.Actor != order.ActorReconciler {
				t.Errorf("settlement %+v does not name the order, the attempt and the reconciler", st)
			}
			if st.Checked == tt.wantUncounted {
				t.Errorf("counted as a check of the schedule: %v, want %v", st.Checked, !tt.wantUncounted)
			}
			if st.Event != tt.wantEvent {
				t.Fatalf("event %q, want %q", st.Event, tt.wantEvent)
			}
			if tt.wantEvent != "" {
				if want := order.MustNext(order.StateCharging, tt.wantEvent); st.To != want {
					t.Errorf("to %s, want %s", st.To, want)
				}
			} else if st.To != "" {
				t.Errorf("a recheck moves the order to %s", st.To)
			}
			if st.Result.Outcome != tt.wantOutcome {
				t.Errorf("outcome %q, want %q", st.Result.Outcome, tt.wantOutcome)
			}
			if tt.wantOutcome == tt.res.Outcome && st.Result != tt.res {
				t.Errorf("result %+v, want the gateway's %+v", st.Result, tt.res)
			}
			if !strings.Contains(st.Reason, tt.wantReason) || (tt.wantReason == "") != (st.Reason == "") {
				t.Errorf("reason %q, want one with %q", st.Reason, tt.wantReason)
			}
			if !strings.Contains(st.LastError, tt.wantLastErr) || (tt.wantLastErr == "") != (st.LastError == "") {
				t.Errorf("last error %q, want one with %q", st.LastError, tt.wantLastErr)
			}
			if st.RecheckIn < tt.wantRecheck[0] || st.RecheckIn > tt.wantRecheck[1] {
				t.Errorf("recheck in %s, want %s to %s", st.RecheckIn, tt.wantRecheck[0], tt.wantRecheck[1])
			}
		})
	}
}

// TestDecideKeepsTheGatewayID: the settle of a check writes the attempt's
// gateway id, so a check that cannot settle keeps the id recorded, or
// records the one its lookup learned; a later check reads the attempt by it.
func TestDecideKeepsTheGatewayID(t *testing.T) {
	t.Parallel()
	r, err := New(nil, nil, Config{Schedule: []time.Duration{time.Second, time.Second}, BatchSize: 1, Concurrency: 1,
		PollInterval: time.Second, LookupTimeout: time.Second, NoShowHorizon: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	timeout := errors.New("lookup timed out")
	tests := []struct {
		name     string
		recorded string
		res      order.Result
		checked  int
		want     string
	}{
		{"recorded, the lookup failed", "pi_1", order.Result{Outcome: order.OutcomeUnknown}, 0, "pi_1"},
		{"recorded, escalated", "pi_1", order.Result{Outcome: order.OutcomeUnknown}, 1, "pi_1"},
		{"learned by the lookup", "", order.Result{Outcome: order.OutcomeUnknown, ChargeID: "pi_2"}, 0, "pi_2"},
	}
	for _, tt := range tests {
		d := order.Due{Order: order.Order{ID: "ord_1", State: order.StateCharging, ReconcileCount: tt.checked},
			Attempt: order.Attempt{ID: "att_1", GatewayChargeID: tt.recorded}}
		if st := r.decide(d, tt.res, timeout, true); st.Result.ChargeID != tt.want {
			t.Errorf("%s: settlement's charge id %q, want %q", tt.name, st.Result.ChargeID, tt.want)
		}
	}
}

// TestAbandonedChallengeLookups: a customer who never completes the
// gateway's challenge costs a bounded number of lookups over the hour the
// attempt waits (it used to be one every ~5 s: about 720), and the expiry
// is still checked on time. The attempt's age stands in for the clock: it
// is what the database reports to each check.
func TestAbandonedChallengeLookups(t *testing.T) {
	t.Parallel()
	const expiry = time.Hour
	r, err := New(nil, nil, Config{Schedule: DefaultSchedule, BatchSize: 1, Concurrency: 1, PollInterval: time.Second,
		LookupTimeout: time.Second, NoShowHorizon: 70 * time.Second, ActionExpiry: expiry}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	waiting := order.Result{Outcome: order.OutcomeRequiresAction, NextAction: order.NextAction{RedirectURL: "https://gw.example/3ds"}}
	canceled := order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "canceled"}
	most := 0
	// The waits are jittered: the bound must hold for every draw.
	for range 200 {
		// The charge path asks for the first check after the schedule's
		// first step.
		age, lookups := DefaultSchedule[0], 0
		for {
			lookups++
			d := order.Due{Order: order.Order{ID: "ord_1", State: order.StateRequiresAction, ReconcileCount: 0},
				Attempt: order.Attempt{ID: "att_1"}, AttemptAge: age}
			if r.expired(d) {
				if st := r.decide(d, canceled, nil, true); st.Event != order.EventFail {
					t.Fatalf("the check after the expiry settled with %q, want %q", st.Event, order.EventFail)
				}
				if age > expiry+2*time.Second {
					t.Fatalf("the expiry was checked %s late", age-expiry)
				}
				break
			}
			st := r.decide(d, waiting, nil, true)
			if st.Event != "" || st.Checked || st.RecheckIn <= 0 {
				t.Fatalf("at %s: %+v; want an uncounted recheck", age, st)
			}
			if st.RecheckIn > DefaultActionRecheckMax+DefaultActionRecheckMax/5 {
				t.Fatalf("at %s: the next check in %s, past the cap %s", age, st.RecheckIn, DefaultActionRecheckMax)
			}
			age += st.RecheckIn
		}
		most = max(most, lookups)
	}
	// Half the age each time, capped at five minutes: about 10 checks up
	// to ten minutes, 10 more up to the hour, then the expiry's; jitter
	// adds a few.
	if most > 32 {
		t.Errorf("an abandoned challenge cost up to %d lookups over %s; want at most 32", most, expiry)
	}
	t.Logf("an abandoned challenge costs at most %d lookups over %s", most, expiry)
}

// TestDecideRefundPastTheBudget: a refund lookup the request budget refused
// asked nothing, so it is no failed check: even with the schedule's last
// check left it does not escalate, and it rechecks at the same step.
func TestDecideRefundPastTheBudget(t *testing.T) {
	t.Parallel()
	schedule := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}
	r, err := New(nil, nil, Config{Schedule: schedule, BatchSize: 1, Concurrency: 1, PollInterval: time.Second,
		LookupTimeout: time.Second, NoShowHorizon: time.Hour}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d := order.DueRefund{Refund: order.Refund{ID: "ref_1", MerchantID: "m", ReconcileCount: 2}}
	st := r.decideRefund(d, order.Result{}, order.ErrBudgetExhausted)
	if st.Checked || st.Event != "" || st.To != "" || st.Result.Outcome != order.OutcomeUnknown {
		t.Fatalf("settlement %+v, want an uncounted recheck with the outcome unknown", st)
	}
	if !strings.Contains(st.LastError, "request budget") {
		t.Errorf("last error %q, want the budget named", st.LastError)
	}
	if lo, hi := schedule[2]-schedule[2]/5, schedule[2]+schedule[2]/5; st.RecheckIn < lo || st.RecheckIn > hi {
		t.Errorf("recheck in %s, want %s to %s", st.RecheckIn, lo, hi)
	}
	// A lookup that failed for another reason is a check, and the last one.
	if st := r.decideRefund(d, order.Result{}, errors.New("lookup timed out")); st.Event != order.EventEscalate {
		t.Errorf("a failed lookup with the schedule spent: event %q, want %q", st.Event, order.EventEscalate)
	}
}
