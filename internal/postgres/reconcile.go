package postgres

import (
	"context"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// leaseSQL pushes reconcile_at of the chosen orders forward by the lease and
// returns them with their current attempts. Its caller's statement commits
// the lease; a reconciler that dies holding it lets it expire.
const leaseSQL = `
), upd AS (
	UPDATE orders o SET reconcile_at = now() + $2::interval FROM due WHERE o.id = due.id RETURNING o.*
)
SELECT extract(epoch FROM now() - a.created_at)::float8, {order}, {attempt}
FROM upd JOIN charge_attempts a ON a.id = upd.current_attempt`

var (
	claimDueSQL = `
WITH due AS (
	SELECT id FROM orders WHERE state = 'CHARGING' AND reconcile_at <= now()
	ORDER BY reconcile_at LIMIT $1 FOR UPDATE SKIP LOCKED` + leaseTail()
	claimOneSQL = `
WITH due AS (
	SELECT id FROM orders WHERE state = 'CHARGING' AND id = $1 FOR UPDATE` + leaseTail()
)

func leaseTail() string {
	return replaceAll(leaseSQL, "{order}", orderCols("upd"), "{attempt}", attemptCols("a"))
}

// ClaimDue leases up to limit CHARGING orders whose reconcile_at has come,
// oldest first, skipping those another reconciler holds.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, claimDueSQL, limit, lease)
}

// ClaimOrder leases one CHARGING order now, due or not (an operator asked).
// It returns no Due when the order is not CHARGING.
func (s *Store) ClaimOrder(ctx context.Context, id string, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, claimOneSQL, id, lease)
}

func (s *Store) lease(ctx context.Context, sql string, arg any, lease time.Duration) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		due = due[:0]
		rows, err := s.pool.Query(ctx, sql, arg, lease)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d   order.Due
				r   orderRow
				age float64
			)
			if err := rows.Scan(append(append([]any{&age}, r.dest()...), attemptDest(&d.Attempt)...)...); err != nil {
				return err
			}
			d.Order, d.AttemptAge = r.order(), time.Duration(age*float64(time.Second))
			due = append(due, d)
		}
		return rows.Err()
	})
	return due, err
}
