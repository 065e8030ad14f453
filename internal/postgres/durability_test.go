package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestReadOnlyIsUnavailable: a statement refused by a read-only server
// (SQLSTATE 25006, what a demoted or fenced primary answers) is
// order.ErrUnavailable, so the client retries with the same request_id,
// and the pool drops that connection, so the retry finds a writable one.
func TestReadOnlyIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if postgrestest.Citus() {
		// A write there is a call that Citus runs on the merchant's worker,
		// which a read-only session on the coordinator does not stop; the
		// data lives on the workers, so a fenced coordinator loses nothing.
		t.Skip("on Citus the checkout path's writes run on the workers, past a read-only coordinator session")
	}
	pool, err := postgres.Open(ctx, postgrestest.URL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := postgres.NewStore(pool)

	// The pool's one connection turns read-only, as every session of a
	// fenced primary does.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	conn.Release()
	if err := postgres.Writable(ctx, pool); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("Writable on a read-only session: %v, want ErrUnavailable", err)
	}
	if _, err := s.CreateOrder(ctx, newOrder("ro-1")); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("CreateOrder on a read-only session: %v, want ErrUnavailable", err)
	}
	// That connection is gone: the next one accepts writes.
	if _, err := s.CreateOrder(ctx, newOrder("ro-1")); err != nil {
		t.Fatalf("CreateOrder after the read-only connection was dropped: %v", err)
	}
	if err := postgres.Writable(ctx, pool); err != nil {
		t.Fatalf("Writable: %v", err)
	}
}

// TestDurabilityRefusesFsyncOff reads the test cluster's settings: it runs
// with fsync and synchronous_commit off, which Check refuses.
func TestDurabilityRefusesFsyncOff(t *testing.T) {
	t.Parallel()
	d, err := postgres.ReadDurability(context.Background(), postgrestest.Pool(t))
	if err != nil {
		t.Fatal(err)
	}
	if d.Fsync || d.SynchronousCommit != "off" || d.Standbys != 0 {
		t.Skipf("not the fast test cluster (DATABASE_URL set?): %+v", d)
	}
	if err := d.Check(); !errors.Is(err, postgres.ErrUnsafeDurability) {
		t.Fatalf("Check with fsync off: %v, want ErrUnsafeDurability", err)
	}
	d.Fsync = true
	if err := d.Check(); !errors.Is(err, postgres.ErrUnsafeDurability) {
		t.Fatalf("Check with synchronous_commit off: %v, want ErrUnsafeDurability", err)
	}
	d.SynchronousCommit = "on"
	if err := d.Check(); err != nil || d.Warning() != "" {
		t.Fatalf("Check with fsync and synchronous_commit on, no standby: %v, warning %q", err, d.Warning())
	}
}
