package postgres

import (
	"context"
	"log/slog"
	"time"
)

// ListenOrders calls fn with the id of every watched order that changes,
// until ctx ends. It holds one connection of the pool, and reconnects after
// a failure; changes made while it reconnects are not reported, so callers
// also look again now and then. missed is called after each reconnection.
// On Citus it reads the watched orders every second instead (see
// engine_citus_watch.go).
func (s *Store) ListenOrders(ctx context.Context, log *slog.Logger, fn func(orderID string), missed func()) {
	for {
		e, err := s.engine(ctx)
		if err == nil {
			e.listenOrders(ctx, log, fn, missed)
			return
		}
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "cannot tell the database's engine; order notifications wait", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Watch registers interest in merchantID's order orderID until the returned
// function is called; only watched orders are notified (see migrations
// 00003 and 00004). An order of another merchant, or none, is
// order.ErrNotFound, and registers nothing. The registration is refreshed
// until the returned function is called or ctx ends. On Citus the
// registration is in this process only (see engine_citus_watch.go).
func (s *Store) Watch(ctx context.Context, merchantID, orderID string) (func(), error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.watch(ctx, merchantID, orderID)
}
