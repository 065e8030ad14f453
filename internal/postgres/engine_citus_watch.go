package postgres

import (
	"context"
	_ "embed"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// On Citus WatchOrder has no notifications: the trigger that sends them
// would fire on the worker that holds the order, where no server listens
// (migration 00011 drops it). A server there keeps the orders its streams
// watch in memory and reads their state every citusWatchPoll, one
// single-shard statement per merchant with watched orders, reporting each
// change as a notification would. A change is seen within citusWatchPoll
// instead of at once; the cost is one read per second per server and
// merchant watched, not a write per stream.

// citusWatchPoll is how often a server on Citus reads its watched orders.
const citusWatchPoll = time.Second

// watchKey is one watched order.
type watchKey struct{ merchant, order string }

// pollWatches is what a server on Citus watches: how many streams watch
// each order, and the version of each that was last reported.
type pollWatches struct {
	mu      sync.Mutex
	streams map[watchKey]int
	seen    map[watchKey]string
}

func (w *pollWatches) add(k watchKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streams == nil {
		w.streams, w.seen = map[watchKey]int{}, map[watchKey]string{}
	}
	w.streams[k]++
}

func (w *pollWatches) remove(k watchKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streams[k]--; w.streams[k] <= 0 {
		delete(w.streams, k)
		delete(w.seen, k)
	}
}

// byMerchant returns the watched orders' ids, by merchant.
func (w *pollWatches) byMerchant() map[string][]uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]uuid.UUID{}
	for k := range w.streams {
		if id, err := uuid.Parse(k.order); err == nil {
			out[k.merchant] = append(out[k.merchant], id)
		}
	}
	return out
}

// changed records version v of order k and reports whether it differs
// from the one recorded before (the first read records only).
func (w *pollWatches) changed(k watchKey, v string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.streams[k]; !ok {
		return false
	}
	old, ok := w.seen[k]
	w.seen[k] = v
	return ok && old != v
}

//go:embed sql/citus/watched_orders.sql
var watchedOrdersSQL string

// watch registers a stream's watch of merchantID's order orderID in
// memory, once the order is found to be the merchant's.
func (e *citusEngine) watch(ctx context.Context, merchantID, orderID string) (func(), error) {
	if _, err := readOrder(ctx, e.pool, merchantID, orderID); err != nil {
		return nil, err
	}
	k := watchKey{merchantID, orderID}
	e.polled.add(k)
	var once sync.Once
	return func() { once.Do(func() { e.polled.remove(k) }) }, nil
}

func (e *citusEngine) listenOrders(ctx context.Context, _ *slog.Logger, fn func(orderID string), missed func()) {
	e.pollWatched(ctx, fn, missed)
}

// pollWatched reads the watched orders every citusWatchPoll until ctx ends,
// calling fn with the id of each that changed. A failed read is reported
// as missed changes: the streams look again themselves.
func (e *citusEngine) pollWatched(ctx context.Context, fn func(string), missed func()) {
	missed()
	t := time.NewTicker(citusWatchPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		watched := e.polled.byMerchant()
		for _, m := range slices.Sorted(maps.Keys(watched)) {
			rows, err := queryAll[struct {
				ID             string `db:"id"`
				State          string `db:"state"`
				CurrentAttempt string `db:"current_attempt"`
			}](ctx, e.pool, watchedOrdersSQL, pgx.StrictNamedArgs{"merchant_id": m, "id": watched[m]})
			if err != nil {
				missed()
				continue
			}
			for _, r := range rows {
				if e.polled.changed(watchKey{m, r.ID}, r.State+"/"+r.CurrentAttempt) {
					fn(r.ID)
				}
			}
		}
	}
}
