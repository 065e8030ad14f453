package postgres

import (
	"context"

	"github.com/settlepay/settle/internal/order"
)

// SettleMany runs the settle statement on sts as one group, for tests of
// the statement itself; Settle forms the groups in service.
func (s *Store) SettleMany(ctx context.Context, sts []order.Settlement) ([]bool, error) {
	_, applied, err := s.settle(ctx, sts)
	return applied, err
}
