package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/batch"
	"github.com/settlepay/settle/internal/order"
)

// settledRow is what settles.sql returns: the i-th settlement's order (from
// 1), for each settlement whose guard held.
type settledRow struct {
	I int `db:"i"`
	refundedOrderRow
}

// SettleMany records the settlements sts in one statement and one commit
// (on Citus, one call and one commit per merchant), each guarded as
// Settle's is. It returns, for each settlement, the order as
// it left it and whether its guard held. No order may appear twice in sts:
// which of two settlements of one order a single UPDATE would apply is
// undefined, so SettleMany refuses the call.
func (s *Store) SettleMany(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	n := len(sts)
	seen := make(map[string]bool, n)
	for _, st := range sts {
		if seen[st.OrderID] {
			return nil, nil, fmt.Errorf("settle: order %s appears twice", st.OrderID)
		}
		seen[st.OrderID] = true
	}
	e, err := s.engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	return e.settleMany(ctx, sts)
}

// settleArgs returns settles.sql's arguments for the settlements sts[i] of
// idx, in that order: one array per column.
func settleArgs(sts []order.Settlement, idx []int) (pgx.StrictNamedArgs, error) {
	var cols settleColumns
	for _, i := range idx {
		cols.add(sts[i])
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	return args, nil
}

// maxSettleGroup bounds the settlements that share one statement.
const maxSettleGroup = 64

// settled is one settlement's result in a group: the order as the
// statement left it, and whether its guard held.
type settled struct {
	order   order.Order
	applied bool
}

// newSettles returns a batcher of Settle calls that run runs: concurrent
// settles share a statement and a commit, one settlement per order in
// each. A group whose statement fails is settled again one by one, so that
// a settlement fails only for its own sake, unless the database is
// unavailable, which would fail each alone too.
func newSettles(run func(context.Context, []order.Settlement) ([]order.Order, []bool, error)) *batch.Batcher[string, order.Settlement, settled] {
	return batch.New(batch.Config[string, order.Settlement, settled]{
		Run: func(ctx context.Context, sts []order.Settlement) ([]settled, error) {
			orders, applied, err := run(ctx, sts)
			if err != nil {
				return nil, err
			}
			out := make([]settled, len(sts))
			for i := range out {
				out[i] = settled{orders[i], applied[i]}
			}
			return out, nil
		},
		Key:     func(st order.Settlement) string { return st.OrderID },
		MaxSize: maxSettleGroup,
		Isolate: func(err error) bool { return !errors.Is(err, order.ErrUnavailable) },
	})
}

// Settle implements order.Store: the settlement shares a statement with
// whatever other settlements are waiting (see package batch).
func (s *Store) Settle(ctx context.Context, st order.Settlement) (order.Order, bool, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, false, err
	}
	r, err := e.settle(ctx, st)
	return r.order, r.applied, err
}
