package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// refundedOrderRow is an order with its refund totals and its hold's
// (capture manual), as the statements that show an order to a client or
// run the refund, capture and void paths select it.
type refundedOrderRow struct {
	orderRow
	RefundedMinor   int64      `db:"refunded_minor"`
	RefundingMinor  int64      `db:"refunding_minor"`
	CaptureMode     string     `db:"capture_mode"`
	AuthorizedMinor int64      `db:"authorized_minor"`
	CapturedMinor   int64      `db:"captured_minor"`
	CapturingMinor  int64      `db:"capturing_minor"`
	Voiding         bool       `db:"voiding"`
	HoldClosed      bool       `db:"hold_closed"`
	CaptureBefore   *time.Time `db:"capture_before"`
}

func (r refundedOrderRow) order() order.Order {
	o := r.orderRow.order()
	o.Refunded, o.Refunding = r.RefundedMinor, r.RefundingMinor
	o.Capture = order.CaptureMode(r.CaptureMode)
	o.AuthorizedMinor, o.CapturedMinor, o.CapturingMinor = r.AuthorizedMinor, r.CapturedMinor, r.CapturingMinor
	o.Voiding, o.HoldClosed = r.Voiding, r.HoldClosed
	if r.CaptureBefore != nil {
		o.CaptureBefore = *r.CaptureBefore
	}
	return o
}

// refundRow is a refund as the statements select it: its columns prefixed
// refund_, so that a row can hold an order and a refund, with the ids as
// text and a NULL outcome (first call in flight) as ”.
type refundRow struct {
	ID              string     `db:"refund_id"`
	MerchantID      string     `db:"refund_merchant_id"`
	OrderID         string     `db:"refund_order_id"`
	RequestID       string     `db:"refund_request_id"`
	RequestedMinor  int64      `db:"refund_requested_minor"`
	AmountMinor     int64      `db:"refund_amount_minor"`
	Currency        string     `db:"refund_currency"`
	Reason          string     `db:"refund_reason"`
	Actor           string     `db:"refund_actor"`
	State           string     `db:"refund_state"`
	Outcome         string     `db:"refund_outcome"`
	DeclineCode     string     `db:"refund_decline_code"`
	GatewayRefundID string     `db:"refund_gateway_refund_id"`
	ReconcileAt     *time.Time `db:"refund_reconcile_at"`
	ReconcileCount  int        `db:"refund_reconcile_count"`
	LastError       string     `db:"refund_last_error"`
	CreatedAt       time.Time  `db:"refund_created_at"`
	UpdatedAt       time.Time  `db:"refund_updated_at"`
}

func (r refundRow) refund() order.Refund {
	rf := order.Refund{
		ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, RequestID: r.RequestID, Requested: r.RequestedMinor,
		Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor}, Reason: r.Reason,
		Actor: order.Actor(r.Actor), State: order.RefundState(r.State), Outcome: order.Outcome(r.Outcome),
		DeclineCode: r.DeclineCode, GatewayRefundID: r.GatewayRefundID, ReconcileCount: r.ReconcileCount,
		LastError: r.LastError, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ReconcileAt != nil {
		rf.ReconcileAt = *r.ReconcileAt
	}
	return rf
}

// refundClaimRow is what refund_claims.sql returns for the i-th claim
// (from 1); a refund ID of ” means no refund.
type refundClaimRow struct {
	I        int    `db:"i"`
	Claimed  bool   `db:"claimed"`
	ChargeID string `db:"charge_id"`
	disputedOrderRow
	refundRow
}

func (r refundClaimRow) result() order.RefundClaimResult {
	res := order.RefundClaimResult{Order: r.order(), Claimed: r.Claimed, ChargeID: r.ChargeID}
	if r.ID != "" {
		rf := r.refund()
		res.Refund = &rf
	}
	return res
}

// refundableStates are the states the refund claim admits a refund in,
// from the transition table.
var refundableStates = statesWhere(order.State.Refundable)

// statesWhere names the states of the transition table for which ok holds,
// as a claim statement takes them.
func statesWhere(ok func(order.State) bool) []string {
	var out []string
	for _, s := range order.States {
		if ok(s) {
			out = append(out, string(s))
		}
	}
	return out
}

// refundClaimed is one refund claim's result in a group, or the error of
// that claim alone (its order does not exist).
type refundClaimed struct {
	res order.RefundClaimResult
	err error
}

// ClaimRefund implements order.RefundStore: on PostgreSQL the claim shares
// a statement with whatever other refund claims are waiting (see package
// batch). A claim that made no refund and saw none may have met a refund
// of its request id that a concurrent claim committed after the
// statement's snapshot was taken (its insert then did nothing): it runs
// once more, in a statement whose snapshot holds it, so that the order and
// the refund of the reply are read together. The refund read alone would
// go with an order read earlier, which the refund's settle may have moved
// since.
func (s *Store) ClaimRefund(ctx context.Context, c order.RefundClaim) (order.RefundClaimResult, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.RefundClaimResult{}, err
	}
	r, err := e.claimRefund(ctx, c)
	if err != nil {
		return order.RefundClaimResult{}, err
	}
	return r.res, r.err
}

// refundSettledRow is what refund_settle.sql on Citus and order_refund.sql
// return.
type refundSettledRow struct {
	disputedOrderRow
	refundRow
}

// refundSettlesRow is what refund_settles.sql returns for the i-th
// settlement (from 1) whose guard held.
type refundSettlesRow struct {
	I int `db:"i"`
	refundSettledRow
}

// refundSettled is one refund settlement's result in a group: the order
// and the refund as the statement left them, and whether its guard held.
type refundSettled struct {
	order   order.Order
	refund  order.Refund
	applied bool
}

// refundSettleStates returns the state a refund settlement requires of
// its refund (st.From, REFUNDING when empty) and the one it moves the
// refund to (st.To, or REFUNDING for a recheck, which has no event).
func refundSettleStates(st order.RefundSettlement) (from, to order.RefundState) {
	from, to = cmp.Or(st.From, order.RefundRefunding), st.To
	if st.Event == "" {
		to = order.RefundRefunding
	}
	return from, to
}

// SettleRefund implements order.RefundStore: on PostgreSQL the settlement
// shares a statement with whatever other refund settlements are waiting
// (see package batch), one per order.
func (s *Store) SettleRefund(ctx context.Context, st order.RefundSettlement) (order.Order, order.Refund, bool, error) {
	if st.OrderID == "" {
		return order.Order{}, order.Refund{}, false, fmt.Errorf("settle refund %s: no order id", st.RefundID)
	}
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, order.Refund{}, false, err
	}
	r, err := e.settleRefund(ctx, st)
	if err != nil {
		return order.Order{}, order.Refund{}, false, err
	}
	return r.order, r.refund, r.applied, nil
}

//go:embed sql/refund_by_id.sql
var refundByIDSQL string

// Refund implements order.RefundStore.
func (s *Store) Refund(ctx context.Context, merchantID, id string) (order.Refund, error) {
	var r refundRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[refundRow](ctx, s.pool, refundByIDSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id})
		return err
	})
	return r.refund(), err
}

//go:embed sql/order_refund.sql
var orderRefundSQL string

// OrderRefund implements order.RefundStore.
func (s *Store) OrderRefund(ctx context.Context, merchantID, refundID string) (order.Order, order.Refund, error) {
	var r refundSettledRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[refundSettledRow](ctx, s.pool, orderRefundSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "refund_id": refundID})
		return err
	})
	return r.order(), r.refund(), err
}

//go:embed sql/order_refunds.sql
var orderRefundsSQL string

//go:embed sql/order_refund_events.sql
var orderRefundEventsSQL string

// refundEventRow is a refund event as order_refund_events.sql selects it.
type refundEventRow struct {
	Seq       int64     `db:"seq"`
	OrderID   string    `db:"order_id"`
	RefundID  string    `db:"refund_id"`
	From      string    `db:"from_state"`
	To        string    `db:"to_state"`
	Name      string    `db:"event"`
	Actor     string    `db:"actor"`
	Reason    string    `db:"reason"`
	CreatedAt time.Time `db:"created_at"`
}

// Refunds returns a merchant's order's refunds and their history, oldest
// first, read in one snapshot.
func (s *Store) Refunds(ctx context.Context, merchantID, orderID string) ([]order.Refund, []order.RefundEvent, error) {
	var (
		refunds []order.Refund
		events  []order.RefundEvent
	)
	err := withSnapshot(ctx, s.pool, func(tx pgx.Tx) (err error) {
		refunds, events, err = refundsOf(ctx, tx, merchantID, orderID)
		return err
	})
	return refunds, events, err
}

// refundsOf is Refunds, read through q.
func refundsOf(ctx context.Context, q querier, merchantID, orderID string) ([]order.Refund, []order.RefundEvent, error) {
	args := pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": orderID}
	rs, err := queryAll[refundRow](ctx, q, orderRefundsSQL, args)
	if err != nil {
		return nil, nil, err
	}
	evs, err := queryAll[refundEventRow](ctx, q, orderRefundEventsSQL, args)
	if err != nil {
		return nil, nil, err
	}
	refunds := make([]order.Refund, len(rs))
	for i, r := range rs {
		refunds[i] = r.refund()
	}
	events := make([]order.RefundEvent, len(evs))
	for i, e := range evs {
		events[i] = order.RefundEvent{Seq: e.Seq, OrderID: e.OrderID, RefundID: e.RefundID,
			From: order.RefundState(e.From), To: order.RefundState(e.To), Name: e.Name, Actor: order.Actor(e.Actor),
			Reason: e.Reason, CreatedAt: e.CreatedAt}
	}
	return refunds, events, nil
}

// dueRefundRow is a leased refund with what its lookup needs.
type dueRefundRow struct {
	refundRow
	Gateway          string  `db:"gateway"`
	ChargeAttemptID  string  `db:"charge_attempt_id"`
	ChargeID         string  `db:"charge_id"`
	RefundAgeSeconds float64 `db:"refund_age_seconds"`
}

// ClaimDueRefunds leases up to limit REFUNDING refunds whose reconcile_at
// has come, oldest first, skipping those another reconciler holds.
func (s *Store) ClaimDueRefunds(ctx context.Context, limit int, lease time.Duration) ([]order.DueRefund, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimDueRefunds(ctx, limit, lease)
}

func (r dueRefundRow) due() order.DueRefund {
	return order.DueRefund{Refund: r.refund(), Gateway: r.Gateway, ChargeAttemptID: r.ChargeAttemptID,
		ChargeID: r.ChargeID, Age: time.Duration(r.RefundAgeSeconds * float64(time.Second))}
}

//go:embed sql/refund_count_by_state.sql
var refundCountByStateSQL string

// refundStats counts refunds by state, with when the oldest REFUNDING
// refund was made, within the scope of scopeArgs args.
func (s *Store) refundStats(ctx context.Context, args pgx.StrictNamedArgs) (order.RefundStats, error) {
	st := order.RefundStats{ByState: map[order.RefundState]int64{}}
	rows, err := queryAll[struct {
		State  string    `db:"state"`
		Count  int64     `db:"count"`
		Oldest time.Time `db:"oldest"`
	}](ctx, s.pool, refundCountByStateSQL, args)
	for _, r := range rows {
		st.ByState[order.RefundState(r.State)] = r.Count
		if r.State == string(order.RefundRefunding) {
			st.OldestRefunding = r.Oldest
		}
	}
	return st, err
}
