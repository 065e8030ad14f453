package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// The attempts' kind: a CHARGING or REQUIRES_ACTION order leased by
// Store.ClaimDue (or ClaimOrder, for CheckNow), looked up by its current
// attempt, decided by decide, settled by Store.Settle. The slow recheck of
// orders in review (runReviews) is the attempts' too.

// dueAttempt is a leased attempt, as RunOnce checks it.
type dueAttempt struct {
	order.Due
	// wokenAt is when a gateway's event asked for this check, if one did
	// (woken).
	wokenAt time.Time
	woken   bool
}

func (d *dueAttempt) lookup(ctx context.Context, r *Reconciler) (order.Result, error) {
	// A check a gateway's event asked for is not one of the schedule's: it
	// uses none of it. The wake is taken when the check starts.
	d.wokenAt, d.woken = r.takeWoken(d.Order.ID)
	return r.lookup(ctx, d.Due)
}

func (d *dueAttempt) settle(ctx context.Context, r *Reconciler, res order.Result, err error) error {
	_, err = r.settle(ctx, r.decide(d.Due, res, err, !d.woken), d.wokenAt)
	return err
}

// errNotInReview aborts a review's transition whose order has moved on.
var errNotInReview = errors.New("order no longer in review for this attempt")

// runReviews looks up, once every ReviewCadence, the current attempt of
// each order in NEEDS_REVIEW: a charge the gateway shows moves the order to
// PAID (event succeed, by the reconciler, which the operator sees in its
// history); anything else leaves it to a person until the next look.
func (r *Reconciler) runReviews(ctx context.Context) error {
	if r.reviews == nil {
		return nil
	}
	due, err := r.reviews.ClaimReviewDue(ctx, r.cfg.BatchSize, r.cfg.ReviewCadence)
	if err != nil {
		return fmt.Errorf("claim orders in review: %w", err)
	}
	var errs []error
	for _, d := range due {
		if d.Order.Capture == order.CaptureManual {
			// An authorization found in review would need its hold
			// recorded, which a transition does not: a person resolves it.
			r.cfg.OnCheck("review_recheck")
			continue
		}
		res, err := r.lookup(ctx, d)
		if err != nil || res.Outcome != order.OutcomeSucceeded {
			r.cfg.OnCheck("review_recheck")
			continue
		}
		reason := "gateway has the charge (found while the order was in review)"
		_, err = r.reviews.Transition(ctx, order.ForMerchant(d.Order.MerchantID), d.Order.ID, func(o order.Order) (order.Move, error) {
			if o.State != order.StateNeedsReview || o.CurrentAttempt != d.Attempt.ID {
				return order.Move{}, errNotInReview
			}
			to, err := order.Next(o.State, order.EventSucceed)
			return order.Move{Event: order.EventSucceed, To: to, Actor: order.ActorReconciler, Reason: reason,
				Attempt: &order.Result{Outcome: order.OutcomeSucceeded, ChargeID: res.ChargeID}}, err
		})
		switch {
		case errors.Is(err, errNotInReview):
			r.cfg.OnCheck("lost_race")
		case err != nil:
			errs = append(errs, fmt.Errorf("settle order %s in review: %w", d.Order.ID, err))
		default:
			r.cfg.OnCheck(string(order.EventSucceed))
			order.Transition{OrderID: d.Order.ID, AttemptID: d.Attempt.ID, From: order.StateNeedsReview, To: order.StatePaid,
				Event: order.EventSucceed, Actor: order.ActorReconciler}.Log(ctx, r.log)
		}
	}
	return errors.Join(errs...)
}

// CheckNow checks one CHARGING order at once, due or not, and returns it as
// it then stands; for an order in any other state (or none) it reports
// false and checks nothing. It reports false too when the check's settle
// lost to another (a late answer to the charge, a returning customer): the
// caller reads the order as that left it.
func (r *Reconciler) CheckNow(ctx context.Context, id string) (order.Order, bool, error) {
	due, ok, err := r.store.ClaimOrder(ctx, id, r.lease())
	if err != nil || !ok {
		return order.Order{}, false, err
	}
	res, err := r.lookup(ctx, due)
	o, err := r.settle(ctx, r.decide(due, res, err, false), time.Time{})
	if err != nil || o.ID == "" {
		// A settle that lost its race returns no order.
		return order.Order{}, false, err
	}
	return o, true, nil
}

// takeWoken reports whether a gateway's event made order id due lately
// (within a lease: a wake older than that was another reconciler's to
// check), and when; it forgets the wake, which one check answers.
func (r *Reconciler) takeWoken(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.woken[id]
	delete(r.woken, id)
	if !ok || time.Since(at) > r.lease() {
		return time.Time{}, false
	}
	return at, true
}

// settle settles what a check learned, and tells OnCheck and the log what
// it came to; wokenAt is when a gateway's event asked for the check, if
// one did.
func (r *Reconciler) settle(ctx context.Context, st order.Settlement, wokenAt time.Time) (order.Order, error) {
	o, ok, err := r.store.Settle(ctx, st)
	if err != nil {
		return order.Order{}, fmt.Errorf("settle order %s attempt %s: %w", st.OrderID, st.AttemptID, err)
	}
	switch {
	case !ok:
		r.cfg.OnCheck("lost_race")
	case st.Event == "":
		r.cfg.OnCheck("recheck")
	default:
		r.cfg.OnCheck(string(st.Event))
		if !wokenAt.IsZero() {
			r.cfg.OnEventSettled(time.Since(wokenAt))
		}
		order.Transition{OrderID: st.OrderID, AttemptID: st.AttemptID, From: cmp.Or(st.From, order.StateCharging), To: st.To,
			Event: st.Event, Actor: st.Actor}.Log(ctx, r.log)
	}
	return o, nil
}

// lookup asks the attempt's gateway about the attempt of d.
func (r *Reconciler) lookup(ctx context.Context, d order.Due) (order.Result, error) {
	name := d.Order.AttemptGateway(d.Attempt)
	gw, ok := r.gateways[name]
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here", name)
	}
	line := order.GatewayCall{Op: "lookup", Gateway: name, OrderID: d.Order.ID, AttemptID: d.Attempt.ID}
	return r.ask(ctx, line, func(ctx context.Context) (order.Result, error) {
		req := order.LookupRequest(d.Order, d.Attempt)
		// From the attempt's age in database time, so that no two clocks
		// are compared.
		req.CreatedAt = time.Now().Add(-d.AttemptAge)
		// Past the expiry, an attempt still waiting for the customer is
		// canceled, which proves it uncharged; before it, it is only read.
		// An off-session attempt waits for nobody: it is canceled at once.
		req.CancelAwaitingAction = r.expired(d) || d.Attempt.AwaitsNobody()
		return gw.Lookup(ctx, req)
	})
}

// decide turns what the gateway said into a settlement. Only a scheduled
// check that could not learn the outcome uses up the schedule: an
// operator's ReconcileOrder (scheduled false) and a "not found" while the
// request may still arrive are not failed checks, and never send an order
// to NEEDS_REVIEW, however many of them come (13 operator checks within a
// second used to exhaust the schedule of a charge still in flight).
func (r *Reconciler) decide(d order.Due, res order.Result, err error, scheduled bool) order.Settlement {
	st := order.Settlement{MerchantID: d.Order.MerchantID, OrderID: d.Order.ID, AttemptID: d.Attempt.ID, Actor: order.ActorReconciler, Checked: scheduled, Result: res,
		Lease: d.Order.ReconcileAt}
	// The settle writes the attempt's gateway id: keep the one recorded
	// unless this check learned it. The next check reads the attempt by it.
	st.Result.ChargeID = cmp.Or(res.ChargeID, d.Attempt.GatewayChargeID)
	st.From = d.Order.State
	switch {
	case errors.Is(err, order.ErrLookupExpired):
		return escalate(st, err.Error())
	case errors.Is(err, order.ErrNotYetKnown):
		// Like a "not found" while the request may still arrive.
		st.Checked = false
		st.LastError = err.Error()
	case errors.Is(err, order.ErrBudgetExhausted):
		// Nothing was asked: no failed check.
		st.Checked = false
		st.LastError = "not looked up: the gateway's request budget was used up"
	case err != nil:
		st.LastError = err.Error()
	case res.Outcome == order.OutcomeSucceeded:
		// A capture-manual order's charge authorized: AUTHORIZED with its
		// hold (Result.Hold), not PAID.
		return move(st, d.Order.SucceedEvent(), "gateway has the charge")
	case res.Outcome == order.OutcomeDeclined && st.From == order.StateRequiresAction && r.expired(d):
		// A fail, so that the merchant hears that the payment did not go
		// through (order.payment_failed), with the reason in the history.
		return move(st, order.EventFail, "expired: the customer did not act in time; the gateway canceled the attempt: "+res.DeclineCode)
	case res.Outcome == order.OutcomeDeclined:
		return move(st, order.EventFail, "gateway declined: "+res.DeclineCode)
	case res.Outcome == order.OutcomeRequiresAction:
		// Waiting for the customer is not a failed check. Look again
		// ever less often, and no later than the expiry.
		st.Checked = false
		st.Result.NextAction = order.NextAction{}
		st.RecheckIn = min(r.actionRecheck(d.AttemptAge), max(r.cfg.ActionExpiry-d.AttemptAge, 0)+time.Second)
		if st.From == order.StateCharging {
			return move(st, order.EventRequireAction, "the gateway asks the customer to act")
		}
		st.LastError = "waiting for the customer to act"
		return st
	case res.Outcome == order.OutcomeNotFound && d.AttemptAge > r.cfg.NoShowHorizon:
		return move(st, order.EventFail, "gateway has no charge and the request can no longer arrive")
	case res.Outcome == order.OutcomeNotFound:
		st.Checked = false
		st.LastError = "gateway has no charge yet; the request may still arrive"
	default:
		st.LastError = fmt.Sprintf("gateway lookup answered %q", res.Outcome)
	}
	// Still unknown: check again later, or hand it to a person. An
	// off-session attempt keeps its mark, so that the next check cancels
	// it too.
	st.Result = order.Result{Outcome: order.OutcomeUnknown, ChargeID: st.Result.ChargeID}
	if d.Attempt.AwaitsNobody() {
		st.Result.DeclineCode = d.Attempt.DeclineCode
	}
	checks := d.Order.ReconcileCount
	if st.Checked {
		checks++
	}
	if checks >= len(r.cfg.Schedule) {
		return escalate(st, fmt.Sprintf("outcome still unknown after %d checks: %s", checks, st.LastError))
	}
	st.RecheckIn = jitter(r.cfg.Schedule[checks])
	if (res.Outcome == order.OutcomeNotFound && err == nil) || errors.Is(err, order.ErrNotYetKnown) {
		// No sooner than the horizon can settle it.
		st.RecheckIn = max(st.RecheckIn, r.cfg.NoShowHorizon-d.AttemptAge+time.Second)
	}
	return st
}

func move(st order.Settlement, ev order.EventName, reason string) order.Settlement {
	st.Event, st.To, st.Reason = ev, order.MustNext(cmp.Or(st.From, order.StateCharging), ev), reason
	return st
}

// actionRecheck is the wait before the next check of an attempt that has
// waited age for the customer: half its age, so that the waits grow
// exponentially (each check 1.5 times as far from the charge as the one
// before), at least the schedule's first step and at most
// ActionRecheckMax, with jitter. A customer who returns is answered at
// once by their checkout's call (GetOrder, ChargeOrder), and a gateway's
// event makes the order due now: these checks only find the ones nobody
// reports, and the expiry.
func (r *Reconciler) actionRecheck(age time.Duration) time.Duration {
	return jitter(min(max(age/2, r.cfg.Schedule[0]), r.cfg.ActionRecheckMax))
}

// expired reports whether the attempt of d has waited longer than a
// customer is given to act.
func (r *Reconciler) expired(d order.Due) bool { return d.AttemptAge > r.cfg.ActionExpiry }

func escalate(st order.Settlement, why string) order.Settlement {
	st.Result = order.Result{Outcome: order.OutcomeUnknown, ChargeID: st.Result.ChargeID}
	st.LastError = why
	return move(st, order.EventEscalate, why)
}
