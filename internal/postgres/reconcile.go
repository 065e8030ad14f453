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
	citus, err := s.onCitus(ctx)
	if err != nil {
		return nil, err
	}
	if citus {
		return s.claimDueEach(ctx, limit, lease)
	}
	var due []order.Due
	err = retry(ctx, func() error {
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

//go:embed sql/due_orders.sql
var dueOrdersSQL string

// claimDueEach is ClaimDue on Citus: read the due orders of every shard
// without locks, then lease each on its own shard with a statement that
// skips it if another reconciler leased it meanwhile. It costs a statement
// per order where claim_due.sql costs one for all.
func (s *Store) claimDueEach(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return s.leaseEach(ctx, dueOrdersSQL, leaseOrderSQL, pgx.StrictNamedArgs{"limit": limit},
		pgx.StrictNamedArgs{"lease": lease, "due_only": true})
}

//go:embed sql/due_review.sql
var dueReviewSQL string

//go:embed sql/lease_review.sql
var leaseReviewSQL string

// leaseEach runs the reconciler's leases on Citus, where a statement may
// lock rows on one shard only: dueSQL reads candidates (merchant_id, id)
// from every shard without locks, then leaseSQL, given each candidate's
// merchant_id and id besides leaseArgs, leases it on its merchant's shard
// or returns no row when another reconciler has leased it meanwhile.
func (s *Store) leaseEach(ctx context.Context, dueSQL, leaseSQL string, dueArgs, leaseArgs pgx.StrictNamedArgs) ([]order.Due, error) {
	type candidate struct {
		MerchantID string `db:"merchant_id"`
		ID         string `db:"id"`
	}
	var cands []candidate
	err := retry(ctx, func() (err error) {
		cands, err = queryAll[candidate](ctx, s.pool, dueSQL, dueArgs)
		return err
	})
	if err != nil {
		return nil, err
	}
	var due []order.Due
	for _, c := range cands {
		args := pgx.StrictNamedArgs{"merchant_id": c.MerchantID, "id": c.ID}
		for k, v := range leaseArgs {
			args[k] = v
		}
		var r leaseRow
		err := retry(ctx, func() (err error) {
			r, err = queryOne[leaseRow](ctx, s.pool, leaseSQL, args)
			return err
		})
		switch {
		case errors.Is(err, order.ErrNotFound):
			continue // another reconciler has it, or it was settled
		case err != nil:
			return due, err
		}
		due = append(due, r.due())
	}
	return due, nil
}

//go:embed sql/claim_review_due.sql
var claimReviewDueSQL string

// ClaimReviewDue leases up to limit NEEDS_REVIEW orders whose slow recheck
// has come, every cadence, skipping those another reconciler holds.
func (s *Store) ClaimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return nil, err
	}
	if citus {
		return s.leaseEach(ctx, dueReviewSQL, leaseReviewSQL, pgx.StrictNamedArgs{"limit": limit, "cadence": cadence},
			pgx.StrictNamedArgs{"cadence": cadence})
	}
	var due []order.Due
	err = retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, s.pool, claimReviewDueSQL, pgx.StrictNamedArgs{"limit": limit, "cadence": cadence})
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}
