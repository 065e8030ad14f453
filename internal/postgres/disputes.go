package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// Disputes (migration 00025) are changed in one transaction of a few
// simple statements, each naming its merchant, so that both engines run
// them as they are (on Citus, each on the merchant's shard): the order's
// row is locked first, and the dispute, its history, the order's dispute
// totals and the order's history row (the event out) are written under
// that lock. The refund claim takes the same lock and reads the totals
// from the row, which is what keeps a refund from racing a dispute.

//go:embed sql/dispute_attempt.sql
var disputeAttemptSQL string

//go:embed sql/dispute_by_gateway_id.sql
var disputeByGatewayIDSQL string

//go:embed sql/dispute_upsert.sql
var disputeUpsertSQL string

//go:embed sql/dispute_record_event.sql
var disputeRecordEventSQL string

//go:embed sql/dispute_event_result.sql
var disputeEventResultSQL string

//go:embed sql/dispute_history_append.sql
var disputeHistoryAppendSQL string

//go:embed sql/dispute_order_totals.sql
var disputeOrderTotalsSQL string

//go:embed sql/dispute_order_event.sql
var disputeOrderEventSQL string

//go:embed sql/citus/dispute_order_event.sql
var citusDisputeOrderEventSQL string

//go:embed sql/dispute_by_id.sql
var disputeByIDSQL string

//go:embed sql/dispute_events.sql
var disputeEventsSQL string

//go:embed sql/list_disputes.sql
var listDisputesSQL string

//go:embed sql/order_disputes.sql
var orderDisputesSQL string

//go:embed sql/dispute_counts.sql
var disputeCountsSQL string

var _ order.DisputeStore = (*Store)(nil)

// disputeRow is a dispute as the statements select it, its columns
// prefixed dispute_.
type disputeRow struct {
	ID                string     `db:"dispute_id"`
	MerchantID        string     `db:"dispute_merchant_id"`
	OrderID           string     `db:"dispute_order_id"`
	AttemptID         string     `db:"dispute_attempt_id"`
	Gateway           string     `db:"dispute_gateway"`
	GatewayDisputeID  string     `db:"dispute_gateway_dispute_id"`
	AmountMinor       int64      `db:"dispute_amount_minor"`
	Currency          string     `db:"dispute_currency"`
	Reason            string     `db:"dispute_reason"`
	NetworkReasonCode string     `db:"dispute_network_reason_code"`
	Status            string     `db:"dispute_status"`
	Stage             string     `db:"dispute_stage"`
	DueBy             *time.Time `db:"dispute_due_by"`
	WithdrawnMinor    int64      `db:"dispute_withdrawn_minor"`
	ReinstatedMinor   int64      `db:"dispute_reinstated_minor"`
	FeeMinor          int64      `db:"dispute_fee_minor"`
	CreatedAt         time.Time  `db:"dispute_created_at"`
	UpdatedAt         time.Time  `db:"dispute_updated_at"`
}

func (r disputeRow) dispute() order.Dispute {
	d := order.Dispute{
		ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, AttemptID: r.AttemptID, Gateway: r.Gateway,
		GatewayDisputeID: r.GatewayDisputeID, Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor},
		Reason: r.Reason, NetworkReasonCode: r.NetworkReasonCode, Status: order.DisputeStatus(r.Status),
		Stage: order.DisputeStage(r.Stage), Withdrawn: r.WithdrawnMinor, Reinstated: r.ReinstatedMinor,
		Fee: r.FeeMinor, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.DueBy != nil {
		d.DueBy = *r.DueBy
	}
	return d
}

// disputeEventRow is a row of dispute_events.sql.
type disputeEventRow struct {
	Seq             int64     `db:"seq"`
	DisputeID       string    `db:"dispute_id"`
	FromStatus      string    `db:"from_status"`
	ToStatus        string    `db:"to_status"`
	FromStage       string    `db:"from_stage"`
	ToStage         string    `db:"to_stage"`
	WithdrawnMinor  int64     `db:"withdrawn_minor"`
	ReinstatedMinor int64     `db:"reinstated_minor"`
	Event           string    `db:"event"`
	Actor           string    `db:"actor"`
	GatewayEventID  string    `db:"gateway_event_id"`
	CreatedAt       time.Time `db:"created_at"`
}

// disputedOrderRow is an order with its refund, hold and dispute totals,
// as the reads that show an order to a client and the refund claim select
// it.
type disputedOrderRow struct {
	refundedOrderRow
	OpenDisputes     int   `db:"open_disputes"`
	DisputedMinor    int64 `db:"disputed_minor"`
	ChargedBackMinor int64 `db:"charged_back_minor"`
}

func (r disputedOrderRow) order() order.Order {
	o := r.refundedOrderRow.order()
	o.OpenDisputes, o.Disputed, o.ChargedBack = r.OpenDisputes, r.DisputedMinor, r.ChargedBackMinor
	return o
}

// disputeAttemptRow is what dispute_attempt.sql returns.
type disputeAttemptRow struct {
	MerchantID string `db:"merchant_id"`
	OrderID    string `db:"order_id"`
	AttemptID  string `db:"attempt_id"`
}

// ApplyDispute implements order.DisputeStore. An event whose attempt (or
// charge) is not Settle's is recorded under merchant "" as
// order.EventUnknownObject.
func (s *Store) ApplyDispute(ctx context.Context, c order.DisputeChange) (order.DisputeApplied, error) {
	g := c.Dispute
	rank := order.DisputeRank(g.Stage, g.Status)
	if rank == 0 || g.ID == "" {
		return order.DisputeApplied{}, &order.ValidationError{Field: "dispute", Reason: "names no dispute, stage or status"}
	}
	ev := c.Event
	var at disputeAttemptRow
	switch {
	case c.MerchantID != "":
		// An operator's call: the dispute is known, and names its order.
		var err error
		at, err = s.disputeOrder(ctx, c.MerchantID, ev.Gateway, g.ID)
		if err != nil {
			return order.DisputeApplied{}, err
		}
	default:
		var attemptID *string
		if _, err := uuid.Parse(ev.AttemptID); err == nil {
			attemptID = &ev.AttemptID
		}
		err := retry(ctx, func() (err error) {
			at, err = queryOne[disputeAttemptRow](ctx, s.pool, disputeAttemptSQL,
				pgx.StrictNamedArgs{"attempt_id": attemptID, "charge_id": ev.ChargeID})
			return err
		})
		if errors.Is(err, order.ErrNotFound) {
			return s.unknownDispute(ctx, ev)
		}
		if err != nil {
			return order.DisputeApplied{}, fmt.Errorf("find the attempt of dispute %s: %w", g.ID, err)
		}
	}

	e, err := s.engine(ctx)
	if err != nil {
		return order.DisputeApplied{}, err
	}
	var out order.DisputeApplied
	err = withTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = order.DisputeApplied{}
		if _, err := queryOne[orderRow](ctx, tx, lockOrderSQL,
			pgx.StrictNamedArgs{"merchant_id": at.MerchantID, "id": at.OrderID}); err != nil {
			return err
		}
		if ev.ID != "" {
			_, err := queryOne[struct {
				EventID string `db:"event_id"`
			}](ctx, tx, disputeRecordEventSQL, s.disputeEventArgs(ev, at, order.EventDisputeStale))
			if errors.Is(err, order.ErrNotFound) {
				out.Result = order.EventDuplicate
				return nil
			}
			if err != nil {
				return err
			}
		}
		var before *order.Dispute
		prev, err := queryOne[disputeRow](ctx, tx, disputeByGatewayIDSQL, pgx.StrictNamedArgs{
			"merchant_id": at.MerchantID, "gateway": ev.Gateway, "gateway_dispute_id": g.ID})
		switch {
		case err == nil:
			d := prev.dispute()
			before = &d
		case !errors.Is(err, order.ErrNotFound):
			return err
		}
		var attemptID *string
		if at.AttemptID != "" {
			attemptID = &at.AttemptID
		}
		var dueBy *time.Time
		if !g.DueBy.IsZero() {
			dueBy = &g.DueBy
		}
		moved, err := queryOne[disputeRow](ctx, tx, disputeUpsertSQL, pgx.StrictNamedArgs{
			"merchant_id": at.MerchantID, "id": order.NewID(), "order_id": at.OrderID, "attempt_id": attemptID,
			"gateway": ev.Gateway, "gateway_dispute_id": g.ID, "amount_minor": g.Amount.AmountMinor,
			"currency": g.Amount.Currency, "reason": g.Reason, "network_reason_code": g.NetworkReasonCode,
			"status": string(g.Status), "stage": string(g.Stage), "rank": rank, "due_by": dueBy,
			"withdrawn_minor": g.Withdrawn, "reinstated_minor": g.Reinstated, "fee_minor": g.Fee,
		})
		changed := err == nil
		switch {
		case changed:
			d := moved.dispute()
			out.Dispute, out.Result = &d, order.EventDispute
		case errors.Is(err, order.ErrNotFound):
			// The guard held nothing new: the dispute is at or past it.
			out.Dispute, out.Result = before, order.EventDisputeStale
		default:
			return err
		}
		if out.Dispute == nil {
			return fmt.Errorf("dispute %s neither created nor found", g.ID)
		}
		d := *out.Dispute
		name := c.Name
		if name == "" && changed {
			name = disputeEventName(before, d)
		}
		if name == "" {
			return nil
		}
		var fromStatus, fromStage string
		if before != nil {
			fromStatus, fromStage = string(before.Status), string(before.Stage)
		}
		if _, err := tx.Exec(ctx, disputeHistoryAppendSQL, pgx.StrictNamedArgs{
			"merchant_id": at.MerchantID, "order_id": at.OrderID, "dispute_id": d.ID, "from_status": fromStatus,
			"to_status": string(d.Status), "from_stage": fromStage, "to_stage": string(d.Stage),
			"withdrawn_minor": d.Withdrawn, "reinstated_minor": d.Reinstated, "event": name,
			"actor": string(c.Actor), "gateway_event_id": ev.ID,
		}); err != nil {
			return err
		}
		if !changed {
			return nil
		}
		st, err := queryOne[struct {
			State string `db:"state"`
		}](ctx, tx, disputeOrderTotalsSQL, pgx.StrictNamedArgs{"merchant_id": at.MerchantID, "order_id": at.OrderID})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, e.statements().disputeOrderEvent, pgx.StrictNamedArgs{
			"merchant_id": at.MerchantID, "order_id": at.OrderID, "state": st.State, "event": "dispute_" + name,
			"actor": string(c.Actor), "reason": string(d.Status), "attempt_id": attemptID, "dispute_id": d.ID,
		}); err != nil {
			return err
		}
		if ev.ID != "" {
			if _, err := tx.Exec(ctx, disputeEventResultSQL, pgx.StrictNamedArgs{
				"merchant_id": at.MerchantID, "gateway": ev.Gateway, "event_id": ev.ID,
				"result": string(order.EventDispute)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return order.DisputeApplied{}, fmt.Errorf("apply dispute %s: %w", g.ID, err)
	}
	return out, nil
}

// disputeEventName names the history row of a dispute that moved from
// before (nil: it is new) to d: opened, closed (it reached WON, LOST or
// WARNING_CLOSED from open, or is new and already closed), or updated.
func disputeEventName(before *order.Dispute, d order.Dispute) string {
	switch {
	case before == nil && d.Status.Open():
		return order.DisputeOpened
	case before == nil, before.Status.Open() && !d.Status.Open():
		return order.DisputeClosed
	default:
		return order.DisputeUpdated
	}
}

// disputeOrder finds the order and attempt of merchantID's dispute that
// gateway names gatewayDisputeID.
func (s *Store) disputeOrder(ctx context.Context, merchantID, gateway, gatewayDisputeID string) (disputeAttemptRow, error) {
	var r disputeRow
	err := retry(ctx, func() (err error) {
		// Outside a transaction the row lock is released at once; only
		// the order and attempt are used.
		r, err = queryOne[disputeRow](ctx, s.pool, disputeByGatewayIDSQL, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "gateway": gateway, "gateway_dispute_id": gatewayDisputeID})
		return err
	})
	if err != nil {
		return disputeAttemptRow{}, fmt.Errorf("find dispute %s: %w", gatewayDisputeID, err)
	}
	return disputeAttemptRow{MerchantID: r.MerchantID, OrderID: r.OrderID, AttemptID: r.AttemptID}, nil
}

// unknownDispute records, once, an event about a dispute of a charge that
// is not Settle's, under merchant "".
func (s *Store) unknownDispute(ctx context.Context, ev order.GatewayEvent) (order.DisputeApplied, error) {
	if ev.ID == "" {
		return order.DisputeApplied{Result: order.EventUnknownObject}, nil
	}
	var res order.GatewayEventResult
	err := retry(ctx, func() error {
		_, err := queryOne[struct {
			EventID string `db:"event_id"`
		}](ctx, s.pool, disputeRecordEventSQL, s.disputeEventArgs(ev, disputeAttemptRow{}, order.EventUnknownObject))
		switch {
		case errors.Is(err, order.ErrNotFound):
			res = order.EventDuplicate
		case err == nil:
			res = order.EventUnknownObject
		default:
			return err
		}
		return nil
	})
	if err != nil {
		return order.DisputeApplied{}, fmt.Errorf("record dispute event %s: %w", ev.ID, err)
	}
	return order.DisputeApplied{Result: res}, nil
}

// disputeEventArgs are dispute_record_event.sql's arguments for ev, matched
// to at. The reference is left empty: the lookups of a gateway that answers
// from its recorded events (order.EventLog, Adyen's) read the events about
// an operation by its reference, and a dispute's event says nothing of
// whether the operation succeeded. The matched attempt is kept.
func (s *Store) disputeEventArgs(ev order.GatewayEvent, at disputeAttemptRow, result order.GatewayEventResult) pgx.StrictNamedArgs {
	var attemptID, orderID *string
	if at.AttemptID != "" {
		attemptID = &at.AttemptID
	}
	if at.OrderID != "" {
		orderID = &at.OrderID
	}
	var occurredAt *time.Time
	if !ev.OccurredAt.IsZero() {
		occurredAt = &ev.OccurredAt
	}
	var amount int64
	var currency string
	if ev.Dispute != nil {
		amount, currency = ev.Dispute.Amount.AmountMinor, ev.Dispute.Amount.Currency
	}
	return pgx.StrictNamedArgs{
		"merchant_id": at.MerchantID, "gateway": ev.Gateway, "event_id": ev.ID, "event_type": ev.Type,
		"object_id": ev.ObjectID, "attempt_id": attemptID, "order_id": orderID, "result": string(result),
		"reference": "", "charge_id": ev.ChargeID, "amount_minor": amount, "currency": currency,
		"occurred_at": occurredAt,
	}
}

// Dispute implements order.DisputeStore.
func (s *Store) Dispute(ctx context.Context, scope order.Scope, id string) (order.Dispute, []order.DisputeEvent, error) {
	var (
		d   order.Dispute
		evs []order.DisputeEvent
	)
	err := withSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := queryOne[disputeRow](ctx, tx, disputeByIDSQL, pgx.StrictNamedArgs{
			"id": id, "any_merchant": scope.IsAnyMerchant(), "merchant_id": scope.MerchantID()})
		if err != nil {
			return err
		}
		d = r.dispute()
		rows, err := queryAll[disputeEventRow](ctx, tx, disputeEventsSQL,
			pgx.StrictNamedArgs{"merchant_id": d.MerchantID, "dispute_id": d.ID})
		if err != nil {
			return err
		}
		evs = make([]order.DisputeEvent, len(rows))
		for i, e := range rows {
			evs[i] = order.DisputeEvent{Seq: e.Seq, DisputeID: e.DisputeID, From: order.DisputeStatus(e.FromStatus),
				To: order.DisputeStatus(e.ToStatus), FromStage: order.DisputeStage(e.FromStage),
				ToStage: order.DisputeStage(e.ToStage), Withdrawn: e.WithdrawnMinor, Reinstated: e.ReinstatedMinor,
				Name: e.Event, Actor: order.Actor(e.Actor), GatewayEventID: e.GatewayEventID, CreatedAt: e.CreatedAt}
		}
		return nil
	})
	if err != nil {
		return order.Dispute{}, nil, err
	}
	return d, evs, nil
}

// Disputes implements order.DisputeStore.
func (s *Store) Disputes(ctx context.Context, scope order.Scope, f order.DisputeFilter) ([]order.Dispute, error) {
	var dueBefore *time.Time
	if !f.DueBefore.IsZero() {
		dueBefore = &f.DueBefore
	}
	var after *string
	if f.AfterID != "" {
		after = &f.AfterID
	}
	var rows []disputeRow
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[disputeRow](ctx, s.pool, listDisputesSQL, pgx.StrictNamedArgs{
			"any_merchant": scope.IsAnyMerchant(), "merchant_id": scope.MerchantID(), "status": string(f.Status),
			"due_before": dueBefore, "after_id": after, "limit": f.Limit})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list disputes: %w", err)
	}
	return disputes(rows), nil
}

// OrderDisputes implements order.DisputeStore.
func (s *Store) OrderDisputes(ctx context.Context, merchantID, orderID string) ([]order.Dispute, error) {
	var rows []disputeRow
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[disputeRow](ctx, s.pool, orderDisputesSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": orderID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read disputes of order %s: %w", orderID, err)
	}
	return disputes(rows), nil
}

func disputes(rows []disputeRow) []order.Dispute {
	out := make([]order.Dispute, len(rows))
	for i, r := range rows {
		out[i] = r.dispute()
	}
	return out
}

// CountDisputes returns every merchant's disputes by status, and how many
// wait on a response due within within (database time).
func (s *Store) CountDisputes(ctx context.Context, within time.Duration) (order.DisputeCounts, error) {
	type row struct {
		Status  string `db:"status"`
		N       int64  `db:"n"`
		DueSoon int64  `db:"due_soon"`
	}
	var rows []row
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[row](ctx, s.pool, disputeCountsSQL, pgx.StrictNamedArgs{"within": within})
		return err
	})
	if err != nil {
		return order.DisputeCounts{}, fmt.Errorf("count disputes: %w", err)
	}
	c := order.DisputeCounts{ByStatus: map[order.DisputeStatus]int64{}}
	for _, r := range rows {
		c.ByStatus[order.DisputeStatus(r.Status)] = r.N
		c.DueSoon += r.DueSoon
	}
	return c, nil
}
