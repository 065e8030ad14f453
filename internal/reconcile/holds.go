package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// HoldStore is what the reconciler needs of storage for authorizations
// (capture manual): their captures and voids of unknown outcome, and the
// holds past their capture_before. A Store that implements it has them
// settled too.
type HoldStore interface {
	// ClaimDueCaptures and ClaimDueVoids lease due CAPTURING captures and
	// VOIDING voids, as ClaimDueRefunds leases refunds.
	ClaimDueCaptures(ctx context.Context, limit int, lease time.Duration) ([]order.DueCapture, error)
	ClaimDueVoids(ctx context.Context, limit int, lease time.Duration) ([]order.DueVoid, error)
	// SettleCapture and SettleVoid are order.HoldStore's guarded settles.
	SettleCapture(ctx context.Context, st order.CaptureSettlement) (order.Order, order.Capture, bool, error)
	SettleVoid(ctx context.Context, st order.VoidSettlement) (order.Order, order.Void, bool, error)
	// ClaimDueHolds leases AUTHORIZED orders past their capture_before
	// whose next lookup has come.
	ClaimDueHolds(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error)
	// ExpireHold moves an AUTHORIZED order whose hold lapsed to EXPIRED,
	// guarded by nothing captured, being captured or voided.
	ExpireHold(ctx context.Context, merchantID, orderID, attemptID string, actor order.Actor, reason string) (bool, error)
	// RecheckHold pushes the next lookup of an AUTHORIZED order's hold.
	RecheckHold(ctx context.Context, merchantID, orderID string, recheckIn time.Duration, why string) error
}

// The kinds of an authorization: a capture or a void in flight, settled by
// the refunds' rules (never failed on a timeout; "not found" means "not
// done" only past the no-show horizon; after the schedule, NEEDS_REVIEW);
// and a hold past its capture_before, looked up by its charge: the
// gateway's word alone moves it (lapsed: EXPIRED), never the clock.

// dueCapture is a leased capture, as RunOnce checks it.
type dueCapture struct{ order.DueCapture }

func (d *dueCapture) lookup(ctx context.Context, r *Reconciler) (order.Result, error) {
	gw, ok := r.gateways[d.Gateway].(order.Capturer)
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here, or does not capture", d.Gateway)
	}
	c := d.Capture
	line := order.GatewayCall{Op: "lookup_capture", Gateway: d.Gateway, OrderID: c.OrderID, AttemptID: c.ID}
	return r.ask(ctx, line, func(ctx context.Context) (order.Result, error) {
		return gw.LookupCapture(ctx, order.CaptureRequest{CaptureID: c.ID, OrderID: c.OrderID, ChargeAttemptID: d.ChargeAttemptID,
			ChargeID: d.ChargeID, Amount: c.Amount, Final: c.Final, CreatedAt: time.Now().Add(-d.Age)})
	})
}

func (d *dueCapture) settle(ctx context.Context, r *Reconciler, res order.Result, err error) error {
	c := d.Capture
	st := order.CaptureSettlementFor(c.MerchantID, c.ID, res, 0)
	st.Actor, st.Checked, st.Lease = order.ActorReconciler, true, c.ReconcileAt
	v := r.decideOp(res, err, c.ReconcileCount+1, d.Age, "capture")
	st.Reason, st.LastError, st.Checked = v.reason, v.lastError, v.checked
	switch v.event {
	case "":
		st.Event, st.To = "", ""
		st.Result = order.Result{Outcome: order.OutcomeUnknown}
		st.RecheckIn = v.recheckIn
	case order.EventSucceed:
	default:
		st.Event = v.event
		st.To, _ = order.NextCapture(order.CaptureCapturing, v.event)
		if v.event == order.EventEscalate {
			st.Result = order.Result{Outcome: order.OutcomeUnknown}
		}
	}
	_, _, ok, err := r.holds.SettleCapture(ctx, st)
	if err != nil {
		return fmt.Errorf("settle capture %s: %w", c.ID, err)
	}
	r.told(ok, "capture", st.Event)
	if ok && st.Event != "" {
		order.OperationTransition{Kind: "capture", OrderID: c.OrderID, ID: c.ID, From: string(order.CaptureCapturing),
			To: string(st.To), Event: st.Event, Actor: st.Actor}.Log(ctx, r.log)
	}
	return nil
}

// dueVoid is a leased void, as RunOnce checks it.
type dueVoid struct{ order.DueVoid }

func (d *dueVoid) lookup(ctx context.Context, r *Reconciler) (order.Result, error) {
	gw, ok := r.gateways[d.Gateway].(order.Capturer)
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here, or does not void", d.Gateway)
	}
	v := d.Void
	line := order.GatewayCall{Op: "lookup_void", Gateway: d.Gateway, OrderID: v.OrderID, AttemptID: v.ID}
	return r.ask(ctx, line, func(ctx context.Context) (order.Result, error) {
		return gw.LookupVoid(ctx, order.VoidRequest{VoidID: v.ID, OrderID: v.OrderID, ChargeAttemptID: d.ChargeAttemptID,
			ChargeID: d.ChargeID, CreatedAt: time.Now().Add(-d.Age)})
	})
}

func (d *dueVoid) settle(ctx context.Context, r *Reconciler, res order.Result, err error) error {
	vd := d.Void
	st := order.VoidSettlementFor(vd.MerchantID, vd.ID, res, 0)
	st.Actor = order.ActorReconciler
	v := r.decideOp(res, err, vd.ReconcileCount+1, d.Age, "void")
	st.Reason, st.LastError, st.Checked = v.reason, v.lastError, v.checked
	switch v.event {
	case "":
		st.Event, st.To = "", ""
		st.Result = order.Result{Outcome: order.OutcomeUnknown}
		st.RecheckIn = v.recheckIn
	case order.EventSucceed:
	default:
		st.Event = v.event
		st.To, _ = order.NextVoid(order.VoidVoiding, v.event)
		if v.event == order.EventEscalate {
			st.Result = order.Result{Outcome: order.OutcomeUnknown}
		}
	}
	_, _, ok, err := r.holds.SettleVoid(ctx, st)
	if err != nil {
		return fmt.Errorf("settle void %s: %w", vd.ID, err)
	}
	r.told(ok, "void", st.Event)
	if ok && st.Event != "" {
		order.OperationTransition{Kind: "void", OrderID: vd.OrderID, ID: vd.ID, From: string(order.VoidVoiding),
			To: string(st.To), Event: st.Event, Actor: st.Actor}.Log(ctx, r.log)
	}
	return nil
}

// verdict is what a lookup of a capture or a void comes to: an event
// (EventSucceed, EventFail on a proof, EventEscalate once the schedule is
// spent), or none, to check again after recheckIn.
type verdict struct {
	event     order.EventName
	reason    string
	lastError string
	checked   bool
	recheckIn time.Duration
}

// decideOp is the decision table of a capture's or a void's lookup (the
// refunds' table, decideRefund): checks counts this one, age is the
// operation's.
func (r *Reconciler) decideOp(res order.Result, err error, checks int, age time.Duration, kind string) verdict {
	v := verdict{checked: true}
	switch {
	case errors.Is(err, order.ErrLookupExpired):
		return verdict{event: order.EventEscalate, reason: err.Error(), lastError: err.Error(), checked: true}
	case errors.Is(err, order.ErrBudgetExhausted):
		return verdict{lastError: "not looked up: the gateway's request budget was used up",
			recheckIn: jitter(r.cfg.Schedule[min(checks, len(r.cfg.Schedule)-1)])}
	case err != nil:
		v.lastError = err.Error()
	case res.Outcome == order.OutcomeSucceeded:
		return verdict{event: order.EventSucceed, reason: "gateway has the " + kind, checked: true}
	case res.Outcome == order.OutcomeDeclined:
		return verdict{event: order.EventFail, reason: "gateway refused the " + kind + ": " + res.DeclineCode, checked: true}
	case res.Outcome == order.OutcomeNotFound && age > r.cfg.NoShowHorizon:
		return verdict{event: order.EventFail, reason: "gateway has no " + kind + " and the request can no longer arrive", checked: true}
	case res.Outcome == order.OutcomeNotFound:
		v.lastError = "gateway has no " + kind + " yet; the request may still arrive"
	default:
		v.lastError = fmt.Sprintf("gateway %s lookup answered %q", kind, res.Outcome)
	}
	if checks >= len(r.cfg.Schedule) {
		why := fmt.Sprintf("outcome still unknown after %d checks: %s", checks, v.lastError)
		return verdict{event: order.EventEscalate, reason: why, lastError: why, checked: true}
	}
	v.recheckIn = jitter(r.cfg.Schedule[checks])
	if res.Outcome == order.OutcomeNotFound && err == nil {
		v.recheckIn = max(v.recheckIn, r.cfg.NoShowHorizon-age+time.Second)
	}
	return v
}

// told tells OnCheck what a check of kind came to.
func (r *Reconciler) told(ok bool, kind string, ev order.EventName) {
	switch {
	case !ok:
		r.cfg.OnCheck("lost_race")
	case ev == "":
		r.cfg.OnCheck("recheck")
	default:
		r.cfg.OnCheck(kind + "_" + string(ev))
	}
}

// dueHold is an AUTHORIZED order past its capture_before, as RunOnce
// checks it.
type dueHold struct{ order.Due }

func (d *dueHold) lookup(ctx context.Context, r *Reconciler) (order.Result, error) {
	a := d.Attempt
	name := d.Order.AttemptGateway(a)
	gw, ok := r.gateways[name]
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here", name)
	}
	line := order.GatewayCall{Op: "lookup_hold", Gateway: name, OrderID: d.Order.ID, AttemptID: a.ID}
	return r.ask(ctx, line, func(ctx context.Context) (order.Result, error) {
		req := order.LookupRequest(d.Order, a)
		req.CreatedAt = time.Now().Add(-d.AttemptAge)
		return gw.Lookup(ctx, req)
	})
}

// settle moves the order by the gateway's word on its hold: lapsed →
// EXPIRED; open → look again after the review cadence; captured or voided
// by what Settle does not know of, or no answer → look again, the reason
// kept for a person (a capture or void in flight settles the order
// itself).
func (d *dueHold) settle(ctx context.Context, r *Reconciler, res order.Result, err error) error {
	o := d.Order
	var why string
	recheck := jitter(r.cfg.ReviewCadence)
	switch {
	case err != nil:
		why, recheck = "hold lookup failed: "+err.Error(), jitter(r.cfg.Schedule[min(o.ReconcileCount, len(r.cfg.Schedule)-1)])
	case res.Outcome != order.OutcomeSucceeded || res.Hold == nil:
		why = fmt.Sprintf("hold lookup answered %q without the authorization", res.Outcome)
	case res.Hold.State == order.HoldExpired:
		ok, err := r.holds.ExpireHold(ctx, o.MerchantID, o.ID, d.Attempt.ID, order.ActorReconciler, "the gateway let the authorization lapse")
		if err != nil {
			return fmt.Errorf("expire order %s: %w", o.ID, err)
		}
		if ok {
			r.cfg.OnCheck(string(order.EventExpire))
			order.Transition{OrderID: o.ID, AttemptID: d.Attempt.ID, From: order.StateAuthorized, To: order.StateExpired,
				Event: order.EventExpire, Actor: order.ActorReconciler}.Log(ctx, r.log)
			return nil
		}
		r.cfg.OnCheck("lost_race")
		return nil
	case res.Hold.State == order.HoldOpen:
		why = "the authorization is still open past capture_before"
	default:
		why = fmt.Sprintf("the gateway says the authorization is %s, which Settle has no record of: a person decides", res.Hold.State)
		r.log.WarnContext(ctx, "authorization moved at the gateway without Settle", "order_id", o.ID, "hold", string(res.Hold.State))
	}
	r.cfg.OnCheck("hold_recheck")
	return r.holds.RecheckHold(ctx, o.MerchantID, o.ID, recheck, why)
}

// claimDueHoldWork leases one batch of each kind of an authorization's
// work, if the store keeps them.
func (r *Reconciler) claimDueHoldWork(ctx context.Context) ([]operation, error) {
	if r.holds == nil {
		return nil, nil
	}
	var ops []operation
	caps, err1 := r.holds.ClaimDueCaptures(ctx, r.cfg.BatchSize, r.lease())
	for _, d := range caps {
		ops = append(ops, &dueCapture{d})
	}
	voids, err2 := r.holds.ClaimDueVoids(ctx, r.cfg.BatchSize, r.lease())
	for _, d := range voids {
		ops = append(ops, &dueVoid{d})
	}
	holds, err3 := r.holds.ClaimDueHolds(ctx, r.cfg.BatchSize, r.lease())
	for _, d := range holds {
		ops = append(ops, &dueHold{d})
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return ops, fmt.Errorf("claim due captures, voids and holds: %w", err)
	}
	return ops, nil
}
