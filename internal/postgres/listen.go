package postgres

import (
	"context"
	_ "embed"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

//go:embed sql/listen.sql
var listenSQL string

//go:embed sql/watch.sql
var watchSQL string

//go:embed sql/unwatch.sql
var unwatchSQL string

// ListenOrders calls fn with the id of every order that changes, until ctx
// ends. It holds one connection of the pool, and reconnects after a failure;
// changes made while it reconnects are not reported, so callers also look
// again now and then. missed is called after each reconnection.
func (s *Store) ListenOrders(ctx context.Context, log *slog.Logger, fn func(orderID string), missed func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listen(ctx, fn, missed)
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "order notifications interrupted; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listen(ctx context.Context, fn func(string), missed func()) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that has listened is not handed back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		return err
	}
	missed()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}

// Watch registers interest in an order's changes until the returned
// function is called; only watched orders are notified (see migration 00003).
func (s *Store) Watch(ctx context.Context, orderID string) (func(), error) {
	watcher := uuid.NewString()
	err := retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, watchSQL, pgx.StrictNamedArgs{"order_id": orderID, "watcher_id": watcher})
		return err
	})
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.pool.Exec(ctx, unwatchSQL, pgx.StrictNamedArgs{"order_id": orderID, "watcher_id": watcher})
	}, nil
}
