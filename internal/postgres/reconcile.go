package postgres

import (
	"context"
	_ "embed"
	"errors"
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
	var due []order.Due
	err := retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, s.pool, claimDueSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

// ClaimOrder leases one CHARGING order now, due or not (an operator asked).
// It reports false, and leases nothing, when there is no such CHARGING
// order.
func (s *Store) ClaimOrder(ctx context.Context, id string, lease time.Duration) (order.Due, bool, error) {
	var r leaseRow
	merchantID, err := s.merchantOf(ctx, order.AnyMerchant, id)
	if err == nil {
		err = retry(ctx, func() (err error) {
			r, err = queryOne[leaseRow](ctx, s.pool, leaseOrderSQL,
				pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id, "lease": lease})
			return err
		})
	}
	switch {
	case errors.Is(err, order.ErrNotFound):
		return order.Due{}, false, nil
	case err != nil:
		return order.Due{}, false, err
	}
	return r.due(), true, nil
}
