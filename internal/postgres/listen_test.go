package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// testWatchOnlyOwnOrders checks that a watcher row is never created for an
// order the caller may not see: another merchant's, or none. On Citus no
// row is created at all: a server there watches in memory.
func testWatchOnlyOwnOrders(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("ref-watch"))
	if err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM order_watchers`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tt := range []struct{ merchant, id string }{{"other-merchant", o.ID}, {o.MerchantID, order.NewID()}} {
		if _, err := s.Watch(ctx, tt.merchant, tt.id); !errors.Is(err, order.ErrNotFound) {
			t.Fatalf("Watch(%s, %s) = %v, want ErrNotFound", tt.merchant, tt.id, err)
		}
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d watcher rows for orders the caller may not see, want 0", n)
	}
	unwatch, err := s.Watch(ctx, o.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := 1
	if db.citus {
		want = 0
	}
	if n := rows(); n != want {
		t.Fatalf("%d watcher rows, want %d", n, want)
	}
	unwatch()
	if n := rows(); n != 0 {
		t.Fatalf("%d watcher rows after unwatch, want 0", n)
	}
}

// testWatchersOfDeadServersExpire checks that the rows a crashed server left
// (here: a watch never unwatched, whose refreshes stopped with its context,
// and whose time has run out) no longer cause notifications, and are
// deleted when a server's listener connects.
func testWatchersOfDeadServersExpire(t *testing.T, db storeDB) {
	if db.citus {
		t.Skip("on Citus there are no notifications: the trigger would fire on a worker; WatchOrder rechecks instead")
	}
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	dead, err := s.CreateOrder(ctx, newOrder("ref-dead"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.CreateOrder(ctx, newOrder("ref-live"))
	if err != nil {
		t.Fatal(err)
	}
	crashed, crash := context.WithCancel(ctx)
	if _, err := s.Watch(crashed, dead.MerchantID, dead.ID); err != nil {
		t.Fatal(err)
	}
	crash() // the server is gone: nobody refreshes or deletes its row
	if _, err := pool.Exec(ctx, `UPDATE order_watchers SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	unwatch, err := s.Watch(ctx, live.MerchantID, live.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unwatch()

	notified := listen(t, s)
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM order_watchers WHERE order_id = $1`, dead.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows of the crashed server's watch left after a listener connected (%v), want 0", left, err)
	}
	// Put the stale row back to check the trigger ignores it on its own.
	if _, err := pool.Exec(ctx, `INSERT INTO order_watchers (merchant_id, order_id, watcher_id, expires_at)
		VALUES ($1, $2, gen_random_uuid(), now() - interval '1 second')`, dead.MerchantID, dead.ID); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order: had the expired row notified
	// for the dead order, its id would come before the live one's.
	for _, id := range []string{dead.ID, live.ID} {
		if _, err := pool.Exec(ctx, `UPDATE orders SET state = 'CANCELED' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-notified:
		if id != live.ID {
			t.Fatalf("notified %s, the order of an expired watcher; want only %s", id, live.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification for the live watcher")
	}
}

// testWatchedChangeIsReported: a change of a watched order reaches the
// listener, by a notification on PostgreSQL and, on Citus, where the
// trigger would fire on a worker, by the server's reads of its watched
// orders.
func testWatchedChangeIsReported(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("ref-watched"))
	if err != nil {
		t.Fatal(err)
	}
	unwatch, err := s.Watch(ctx, o.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unwatch()
	notified := listen(t, s)
	// On Citus the first read only records the order as it stands: let it
	// come before the change.
	if db.citus {
		time.Sleep(2500 * time.Millisecond)
	}
	if c, err := s.Claim(ctx, claimOf(o, "req-watched")); err != nil || !c.Claimed {
		t.Fatalf("claim: %v %+v", err, c)
	}
	select {
	case id := <-notified:
		if id != o.ID {
			t.Fatalf("notified %s, want %s", id, o.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification of the watched order's change")
	}
}

// listen runs s.ListenOrders until the test ends and returns, once it has
// connected, the channel of the order ids it reports.
func listen(t *testing.T, s *postgres.Store) <-chan string {
	t.Helper()
	notified := make(chan string, 10)
	ctx, stop := context.WithCancel(context.Background())
	listening := make(chan struct{})
	connected := make(chan struct{}, 1)
	go func() {
		defer close(listening)
		s.ListenOrders(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), func(id string) { notified <- id },
			func() {
				// A reconnection finds the first signal taken, or not:
				// either way the test has what it waits for.
				select {
				case connected <- struct{}{}:
				default:
				}
			})
	}()
	t.Cleanup(func() { stop(); <-listening })
	<-connected
	return notified
}
