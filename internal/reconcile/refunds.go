package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// RefundStore is what the reconciler needs of storage for refunds. A Store
// that implements it has its unknown refunds settled too.
type RefundStore interface {
	// ClaimDueRefunds leases up to limit due REFUNDING refunds, pushing
	// their reconcile_at forward by lease, skipping refunds others hold.
	ClaimDueRefunds(ctx context.Context, limit int, lease time.Duration) ([]order.DueRefund, error)
	// SettleRefund is order.RefundStore's guarded settle.
	SettleRefund(ctx context.Context, s order.RefundSettlement) (order.Order, order.Refund, bool, error)
}

// The refunds' kind: a REFUNDING refund leased by
// RefundStore.ClaimDueRefunds, looked up by its reference, decided by
// decideRefund, settled by RefundStore.SettleRefund; with the charges'
// lease, schedule and review rules: a refund is never assumed failed on a
// timeout; "not found" means "not refunded" only past the no-show horizon;
// after the schedule it goes to NEEDS_REVIEW.

// dueRefund is a leased refund, as RunOnce checks it.
type dueRefund struct{ order.DueRefund }

func (d *dueRefund) lookup(ctx context.Context, r *Reconciler) (order.Result, error) {
	return r.lookupRefund(ctx, d.DueRefund)
}

func (d *dueRefund) settle(ctx context.Context, r *Reconciler, res order.Result, err error) error {
	return r.settleRefund(ctx, d.Refund.OrderID, r.decideRefund(d.DueRefund, res, err))
}

// claimDueRefunds leases one batch of due refunds, if the store keeps
// refunds.
func (r *Reconciler) claimDueRefunds(ctx context.Context) ([]order.DueRefund, error) {
	if r.refunds == nil {
		return nil, nil
	}
	due, err := r.refunds.ClaimDueRefunds(ctx, r.cfg.BatchSize, r.lease())
	if err != nil {
		return nil, fmt.Errorf("claim due refunds: %w", err)
	}
	return due, nil
}

func (r *Reconciler) lookupRefund(ctx context.Context, d order.DueRefund) (order.Result, error) {
	gw, ok := r.gateways[d.Gateway].(order.Refunder)
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here, or does not refund", d.Gateway)
	}
	line := order.GatewayCall{Op: "lookup_refund", Gateway: d.Gateway, OrderID: d.Refund.OrderID, AttemptID: d.Refund.ID}
	return r.ask(ctx, line, func(ctx context.Context) (order.Result, error) {
		return gw.LookupRefund(ctx, order.RefundRequest{
			RefundID: d.Refund.ID, OrderID: d.Refund.OrderID, ChargeAttemptID: d.ChargeAttemptID, ChargeID: d.ChargeID,
			Amount: d.Refund.Amount, CreatedAt: time.Now().Add(-d.Age),
		})
	})
}

// decideRefund turns what the gateway said about a refund into its
// settlement, by the rules of decide.
func (r *Reconciler) decideRefund(d order.DueRefund, res order.Result, err error) order.RefundSettlement {
	st := order.RefundSettlementFor(d.Refund.MerchantID, d.Refund.OrderID, d.Refund.ID, res, 0)
	st.Actor, st.Checked, st.Lease = order.ActorReconciler, true, d.Refund.ReconcileAt
	checks := d.Refund.ReconcileCount + 1
	switch {
	case errors.Is(err, order.ErrLookupExpired):
		return escalateRefund(st, err.Error())
	case errors.Is(err, order.ErrBudgetExhausted):
		// Nothing was asked: no failed check, and the same step again, as
		// for a charge.
		st.Checked = false
		st.Event, st.To, st.Reason = "", "", ""
		st.Result = order.Result{Outcome: order.OutcomeUnknown}
		st.LastError = "not looked up: the gateway's request budget was used up"
		st.RecheckIn = jitter(r.cfg.Schedule[min(checks, len(r.cfg.Schedule)-1)])
		return st
	case err != nil:
		st.LastError = err.Error()
	case res.Outcome == order.OutcomeSucceeded:
		st.Reason = "gateway has the refund"
		return st
	case res.Outcome == order.OutcomeDeclined:
		st.Reason = "gateway failed the refund: " + res.DeclineCode
		return st
	case res.Outcome == order.OutcomeNotFound && d.Age > r.cfg.NoShowHorizon:
		st.Event, st.To = order.EventFail, order.MustNextRefund(order.RefundRefunding, order.EventFail)
		st.Reason = "gateway has no refund and the request can no longer arrive"
		return st
	case res.Outcome == order.OutcomeNotFound:
		st.LastError = "gateway has no refund yet; the request may still arrive"
	default:
		st.LastError = fmt.Sprintf("gateway refund lookup answered %q", res.Outcome)
	}
	st.Event, st.To, st.Reason = "", "", ""
	st.Result = order.Result{Outcome: order.OutcomeUnknown}
	if checks >= len(r.cfg.Schedule) {
		return escalateRefund(st, fmt.Sprintf("outcome still unknown after %d checks: %s", checks, st.LastError))
	}
	st.RecheckIn = jitter(r.cfg.Schedule[checks])
	if res.Outcome == order.OutcomeNotFound && err == nil {
		st.RecheckIn = max(st.RecheckIn, r.cfg.NoShowHorizon-d.Age+time.Second)
	}
	return st
}

func escalateRefund(st order.RefundSettlement, why string) order.RefundSettlement {
	st.Result = order.Result{Outcome: order.OutcomeUnknown}
	st.LastError, st.Reason = why, why
	st.Event, st.To = order.EventEscalate, order.MustNextRefund(order.RefundRefunding, order.EventEscalate)
	return st
}

func (r *Reconciler) settleRefund(ctx context.Context, orderID string, st order.RefundSettlement) error {
	_, _, ok, err := r.refunds.SettleRefund(ctx, st)
	if err != nil {
		return fmt.Errorf("settle refund %s: %w", st.RefundID, err)
	}
	switch {
	case !ok:
		r.cfg.OnCheck("lost_race")
	case st.Event == "":
		r.cfg.OnCheck("recheck")
	default:
		r.cfg.OnCheck("refund_" + string(st.Event))
		order.RefundTransition{OrderID: orderID, RefundID: st.RefundID, From: order.RefundRefunding, To: st.To, Event: st.Event,
			Actor: st.Actor}.Log(ctx, r.log)
	}
	return nil
}
