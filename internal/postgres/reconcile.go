package postgres

import (
	"context"
	_ "embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

//go:embed sql/claim_due.sql
var claimDueSQL string

//go:embed sql/lease_order.sql
var leaseOrderSQL string

// ClaimDue leases up to limit CHARGING orders whose reconcile_at has come,
// oldest first, skipping those another reconciler holds.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, claimDueSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
}

// ClaimOrder leases one CHARGING order now, due or not (an operator asked).
// It returns no Due when the order is not CHARGING.
func (s *Store) ClaimOrder(ctx context.Context, id string, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, leaseOrderSQL, pgx.StrictNamedArgs{"id": id, "lease": lease})
}

func (s *Store) lease(ctx context.Context, sql string, args pgx.StrictNamedArgs) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, s.pool, sql, args)
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}
