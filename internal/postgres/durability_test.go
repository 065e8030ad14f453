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

// TestDurabilityStall: commits wait for a synchronous standby when
// synchronous_standby_names names one and synchronous_commit waits for
// standbys; with none synchronous PostgreSQL holds every commit, which
// Stall says. A database on one node (no names) or whose commits wait only
// for the local disk never stalls, and standbys of unknown state may be
// synchronous.
func TestDurabilityStall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		d     postgres.Durability
		waits bool
		stall bool
	}{
		{"one node", postgres.Durability{Fsync: true, SynchronousCommit: "on"}, false, false},
		{"names set, no standby", postgres.Durability{Fsync: true, SynchronousCommit: "on", SynchronousStandbyNames: "standby"}, true, true},
		{"remote_apply, no standby", postgres.Durability{Fsync: true, SynchronousCommit: "remote_apply", SynchronousStandbyNames: "*"}, true, true},
		{"names set, standby async", postgres.Durability{Fsync: true, SynchronousCommit: "on", SynchronousStandbyNames: "other", Standbys: 1}, true, true},
		{"names set, standby sync", postgres.Durability{Fsync: true, SynchronousCommit: "on", SynchronousStandbyNames: "standby", Standbys: 1, SyncStandbys: 1}, true, false},
		{"names set, standby unknown", postgres.Durability{Fsync: true, SynchronousCommit: "on", SynchronousStandbyNames: "standby", Standbys: 1, UnknownStandbys: 1}, true, false},
		{"local commits", postgres.Durability{Fsync: true, SynchronousCommit: "local", SynchronousStandbyNames: "standby"}, false, false},
	} {
		if got := tc.d.WaitsForStandby(); got != tc.waits {
			t.Errorf("%s: WaitsForStandby = %v, want %v", tc.name, got, tc.waits)
		}
		if got := tc.d.Stall() != ""; got != tc.stall {
			t.Errorf("%s: Stall = %q, want a stall: %v", tc.name, tc.d.Stall(), tc.stall)
		}
	}
}
