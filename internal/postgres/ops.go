package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// ListOrders returns orders for an operator, newest state change first.
func (s *Store) ListOrders(ctx context.Context, f order.ListFilter) ([]order.Order, error) {
	var after *time.Time
	if !f.AfterUpdated.IsZero() {
		after = &f.AfterUpdated
	}
	var out []order.Order
	err := retry(ctx, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `SELECT `+orderCols("orders")+` FROM orders
			WHERE ($1 = '' OR state = $1) AND updated_at <= now() - $2::interval
			  AND ($3::timestamptz IS NULL OR (updated_at, id) < ($3, $4::uuid))
			ORDER BY updated_at DESC, id DESC LIMIT $5`,
			f.State, f.MinAge, after, nullUUID(f.AfterID), f.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			o, err := scanOrder(rows)
			if err != nil {
				return err
			}
			out = append(out, o)
		}
		return rows.Err()
	})
	return out, err
}

// History returns an order's events and attempts, oldest first.
func (s *Store) History(ctx context.Context, id string) ([]order.Event, []order.Attempt, error) {
	var (
		events   []order.Event
		attempts []order.Attempt
	)
	err := retry(ctx, func() error {
		events, attempts = nil, nil
		rows, err := s.pool.Query(ctx, `SELECT order_id::text, coalesce(from_state, ''), to_state, event, actor, reason,
			coalesce(attempt_id::text, ''), created_at FROM order_events WHERE order_id = $1 ORDER BY id`, id)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (order.Event, error) {
			var e order.Event
			err := r.Scan(&e.OrderID, &e.From, &e.To, &e.Name, &e.Actor, &e.Reason, &e.AttemptID, &e.CreatedAt)
			return e, err
		})
		if err != nil {
			return err
		}
		rows, err = s.pool.Query(ctx, `SELECT `+attemptCols("charge_attempts")+` FROM charge_attempts
			WHERE order_id = $1 ORDER BY created_at, id`, id)
		if err != nil {
			return err
		}
		attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (order.Attempt, error) {
			var a order.Attempt
			err := r.Scan(attemptDest(&a)...)
			return a, err
		})
		return err
	})
	return events, attempts, err
}

// HistoryPage returns one page of an order's events and attempts, oldest
// first; see order.HistoryPage.
func (s *Store) HistoryPage(ctx context.Context, id string, p order.HistoryPage) ([]order.Event, []order.Attempt, error) {
	var (
		events   []order.Event
		attempts []order.Attempt
		after    *time.Time
	)
	if !p.AfterAttemptCreated.IsZero() {
		after = &p.AfterAttemptCreated
	}
	err := retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, `SELECT id, order_id::text, coalesce(from_state, ''), to_state, event, actor, reason,
			coalesce(attempt_id::text, ''), created_at FROM order_events
			WHERE order_id = $1 AND id > $2 ORDER BY id LIMIT $3`, id, p.AfterSeq, p.Limit)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (order.Event, error) {
			var e order.Event
			err := r.Scan(&e.Seq, &e.OrderID, &e.From, &e.To, &e.Name, &e.Actor, &e.Reason, &e.AttemptID, &e.CreatedAt)
			return e, err
		})
		if err != nil {
			return err
		}
		rows, err = s.pool.Query(ctx, `SELECT `+attemptCols("charge_attempts")+` FROM charge_attempts
			WHERE order_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) > ($2, $3::uuid))
			ORDER BY created_at, id LIMIT $4`, id, after, nullUUID(p.AfterAttemptID), p.Limit)
		if err != nil {
			return err
		}
		attempts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (order.Attempt, error) {
			var a order.Attempt
			err := r.Scan(attemptDest(&a)...)
			return a, err
		})
		return err
	})
	return events, attempts, err
}

// Stats summarises the orders by state and the reconcile backlog.
func (s *Store) Stats(ctx context.Context) (order.Stats, error) {
	st := order.Stats{ByState: map[order.State]int64{}}
	err := retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM orders GROUP BY state`)
		if err != nil {
			return err
		}
		var (
			state order.State
			n     int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { st.ByState[state] = n; return nil }); err != nil {
			return err
		}
		var oldest *time.Time
		err = s.pool.QueryRow(ctx, `SELECT min(updated_at), count(*) FILTER (WHERE reconcile_at <= now())
			FROM orders WHERE state = 'CHARGING'`).Scan(&oldest, &st.Backlog)
		if oldest != nil {
			st.OldestCharging = *oldest
		}
		return err
	})
	return st, err
}

func nullUUID(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
