package postgres

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

//go:embed sql/lease_order.sql
var leaseOrderSQL string

// ClaimDue leases up to limit CHARGING orders whose reconcile_at has come,
// oldest first, skipping those another reconciler holds.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimDue(ctx, limit, lease)
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
				pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id, "lease": lease, "due_only": false})
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

// ClaimReviewDue leases up to limit NEEDS_REVIEW orders whose slow recheck
// has come, every cadence, skipping those another reconciler holds.
func (s *Store) ClaimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimReviewDue(ctx, limit, cadence)
}
