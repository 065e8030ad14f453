package postgres

import (
	"context"
	_ "embed"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

//go:embed sql/list_orders.sql
var listOrdersSQL string

// ListOrders returns orders for an operator, newest state change first.
func (s *Store) ListOrders(ctx context.Context, f order.ListFilter) ([]order.Order, error) {
	var after *time.Time
	if !f.AfterUpdated.IsZero() {
		after = &f.AfterUpdated
	}
	var out []order.Order
	err := retry(ctx, func() error {
		rows, err := queryAll[refundedOrderRow](ctx, s.pool, listOrdersSQL, pgx.StrictNamedArgs{
			"any_merchant": f.Scope.IsAnyMerchant(), "merchant_id": f.Scope.MerchantID(),
			"state": f.State, "min_age": f.MinAge, "after_updated": after, "after_id": nullUUID(f.AfterID),
			"limit": f.Limit,
		})
		out = make([]order.Order, len(rows))
		for i, r := range rows {
			out[i] = r.order()
		}
		return err
	})
	return out, err
}

//go:embed sql/order_events.sql
var orderEventsSQL string

//go:embed sql/order_attempts.sql
var orderAttemptsSQL string

// History returns an order's events and attempts, oldest first.
func (s *Store) History(ctx context.Context, merchantID, id string) ([]order.Event, []order.Attempt, error) {
	var (
		events   []order.Event
		attempts []order.Attempt
	)
	err := retry(ctx, func() error {
		events, attempts = nil, nil
		evs, err := queryAll[eventRow](ctx, s.pool, orderEventsSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": id})
		if err != nil {
			return err
		}
		ats, err := queryAll[attemptRow](ctx, s.pool, orderAttemptsSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": id})
		if err != nil {
			return err
		}
		events = make([]order.Event, len(evs))
		for i, e := range evs {
			events[i] = e.event()
		}
		attempts = make([]order.Attempt, len(ats))
		for i, a := range ats {
			attempts[i] = a.attempt()
		}
		return nil
	})
	return events, attempts, err
}

//go:embed sql/history_events.sql
var historyEventsSQL string

//go:embed sql/history_attempts.sql
var historyAttemptsSQL string

// OrderHistory returns a merchant's order with one page of its events and
// attempts (see order.HistoryPage) and, withOperations, its refunds,
// captures and voids with their histories, all read in one snapshot: the
// order, its events, its attempts and its operations as they stood at one
// moment, where separate reads would
// show a settle that landed between them in some and not in others.
func (s *Store) OrderHistory(ctx context.Context, merchantID, id string, p order.HistoryPage, withOperations bool) (order.History, error) {
	var (
		h     order.History
		after *time.Time
	)
	if !p.AfterAttemptCreated.IsZero() {
		after = &p.AfterAttemptCreated
	}
	err := withSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		h = order.History{}
		o, err := queryOne[disputedOrderRow](ctx, tx, orderByIDSQL, pgx.StrictNamedArgs{
			"id": id, "merchant_id": merchantID,
		})
		if err != nil {
			return err
		}
		h.Order = o.order()
		evs, err := queryAll[eventRow](ctx, tx, historyEventsSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": id, "after_seq": p.AfterSeq, "limit": p.Limit})
		if err != nil {
			return err
		}
		ats, err := queryAll[historyAttemptRow](ctx, tx, historyAttemptsSQL, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": id, "after_created": after, "after_id": nullUUID(p.AfterAttemptID), "limit": p.Limit,
		})
		if err != nil {
			return err
		}
		h.Events = make([]order.Event, len(evs))
		for i, e := range evs {
			h.Events[i] = e.event()
		}
		h.Attempts = make([]order.Attempt, len(ats))
		for i, a := range ats {
			h.Attempts[i] = a.attempt()
		}
		if !withOperations {
			return nil
		}
		if h.Refunds, h.RefundEvents, err = refundsOf(ctx, tx, merchantID, id); err != nil {
			return err
		}
		return holdsOf(ctx, tx, merchantID, id, &h)
	})
	return h, err
}

//go:embed sql/count_by_state.sql
var countByStateSQL string

//go:embed sql/charging_backlog.sql
var chargingBacklogSQL string

// Stats summarises the orders scope reaches by state, and their reconcile
// backlog.
func (s *Store) Stats(ctx context.Context, scope order.Scope) (order.Stats, error) {
	st := order.Stats{ByState: map[order.State]int64{}}
	args := scopeArgs(scope)
	err := retry(ctx, func() error {
		counts, err := queryAll[struct {
			State string `db:"state"`
			Count int64  `db:"count"`
		}](ctx, s.pool, countByStateSQL, args)
		if err != nil {
			return err
		}
		for _, c := range counts {
			st.ByState[order.State(c.State)] = c.Count
		}
		b, err := queryOne[struct {
			OldestCharging *time.Time `db:"oldest_charging"`
			Backlog        int64      `db:"backlog"`
		}](ctx, s.pool, chargingBacklogSQL, args)
		if b.OldestCharging != nil {
			st.OldestCharging = *b.OldestCharging
		}
		st.Backlog = b.Backlog
		if err != nil {
			return err
		}
		if st.Refunds, err = s.refundStats(ctx, args); err != nil {
			return err
		}
		st.Holds, err = s.holdStats(ctx, args)
		return err
	})
	return st, err
}

//go:embed sql/expiring_authorizations.sql
var expiringAuthorizationsSQL string

//go:embed sql/capture_count_by_state.sql
var captureCountByStateSQL string

//go:embed sql/void_count_by_state.sql
var voidCountByStateSQL string

// holdStats counts the authorizations within order.ExpiringWithin of their
// capture_before, and the captures and voids by state, within the scope
// of scopeArgs args.
func (s *Store) holdStats(ctx context.Context, args pgx.StrictNamedArgs) (order.HoldStats, error) {
	st := order.HoldStats{CapturesByState: map[order.CaptureState]int64{}, VoidsByState: map[order.VoidState]int64{}}
	type count struct {
		State string `db:"state"`
		Count int64  `db:"count"`
	}
	captures, err := queryAll[count](ctx, s.pool, captureCountByStateSQL, args)
	if err != nil {
		return st, err
	}
	for _, c := range captures {
		st.CapturesByState[order.CaptureState(c.State)] = c.Count
	}
	voids, err := queryAll[count](ctx, s.pool, voidCountByStateSQL, args)
	if err != nil {
		return st, err
	}
	for _, v := range voids {
		st.VoidsByState[order.VoidState(v.State)] = v.Count
	}
	within := pgx.StrictNamedArgs{"within": order.ExpiringWithin}
	maps.Copy(within, args)
	e, err := queryOne[struct {
		Count int64 `db:"count"`
	}](ctx, s.pool, expiringAuthorizationsSQL, within)
	st.Expiring = e.Count
	return st, err
}

// scopeArgs are the arguments of a statement that reads within a scope,
// as order_by_id.sql does.
func scopeArgs(scope order.Scope) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"any_merchant": scope.IsAnyMerchant(), "merchant_id": scope.MerchantID()}
}

func nullUUID(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
