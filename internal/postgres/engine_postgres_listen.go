package postgres

import (
	"context"
	_ "embed"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// On PostgreSQL WatchOrder is pushed: a server registers each watched order
// in order_watchers, and a trigger notifies the servers that watch an
// order when it changes (migrations 00003 and 00004).

// listenSQL subscribes a connection to the ids of changed orders.
//
//go:embed sql/listen.sql
var listenSQL string

func (e *postgresEngine) listenOrders(ctx context.Context, log *slog.Logger, fn func(orderID string), missed func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := e.listen(ctx, fn, missed)
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

func (e *postgresEngine) listen(ctx context.Context, fn func(string), missed func()) error {
	pc, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that has listened is not handed back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		return err
	}
	// Each (re)connection of each server clears the rows that crashed
	// servers left; a failure here costs only stale rows, which the
	// trigger ignores.
	if err := e.sweepWatchers(ctx); err != nil {
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

// watchTTL is how long a row of order_watchers lives unless its server
// refreshes it, which it does every watchRefresh while the stream is open.
// A crashed server's rows expire within watchTTL; the trigger ignores
// expired rows, and sweepWatchers deletes them.
const (
	watchTTL     = 2 * time.Minute
	watchRefresh = watchTTL / 4
)

//go:embed sql/watch.sql
var watchSQL string

//go:embed sql/refresh_watch.sql
var refreshWatchSQL string

//go:embed sql/unwatch.sql
var unwatchSQL string

//go:embed sql/sweep_watchers.sql
var sweepWatchersSQL string

func (e *postgresEngine) watch(ctx context.Context, merchantID, orderID string) (func(), error) {
	watcher := uuid.NewString()
	err := retry(ctx, func() error {
		_, err := queryOne[struct {
			Watched bool `db:"watched"`
		}](ctx, e.pool, watchSQL, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": orderID, "watcher_id": watcher, "ttl": watchTTL,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(watchRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-t.C:
				// A failed refresh is retried at the next tick; the row
				// outlives a few of them.
				_, _ = e.pool.Exec(ctx, refreshWatchSQL, pgx.StrictNamedArgs{
					"merchant_id": merchantID, "order_id": orderID, "watcher_id": watcher, "ttl": watchTTL,
				})
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// A row left behind expires (see refreshWatchSQL).
		_, _ = e.pool.Exec(ctx, unwatchSQL, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": orderID, "watcher_id": watcher,
		})
	}, nil
}

// sweepWatchers deletes every expired row of order_watchers: those of
// servers that stopped without removing theirs.
func (e *postgresEngine) sweepWatchers(ctx context.Context) error {
	_, err := e.pool.Exec(ctx, sweepWatchersSQL)
	return err
}
