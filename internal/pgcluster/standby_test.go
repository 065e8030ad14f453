package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/pgcluster"
)

// startPair starts a primary with opts and a standby named b streaming
// from it, both stopped when the test ends.
func startPair(t *testing.T, opts pgcluster.Options) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	a, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b, err := a.StartStandby(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return a, b
}

// TestFailover: a primary with a synchronous standby loses its machine;
// the standby is promoted with every committed row, the old primary is
// rewound and follows it, and a client naming both hosts finds the primary
// each time.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fails a pair of PostgreSQL servers over and back; skipped with -short")
	}
	ctx := context.Background()
	a, b := startPair(t, pgcluster.Options{Rewindable: true, Config: []string{"synchronous_standby_names=*"}})
	url := pgcluster.URLs("postgres", a, b) + "&target_session_attrs=read-write"
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE t (n int)")
	exec("INSERT INTO t VALUES (1)")

	a.Kill()
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Rejoin(ctx, b, "a"); err != nil {
		t.Fatal(err)
	}
	exec("INSERT INTO t VALUES (2)") // waits for a, the synchronous standby now

	// And back again.
	b.Kill()
	if err := a.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Rejoin(ctx, a, "b"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT sum(n) FROM t").Scan(&n); err != nil || n != 3 {
		t.Fatalf("sum = %d, %v; want 3: a committed row was lost", n, err)
	}
}

// TestFrozenSender: with the WAL sender to the standby frozen, a primary
// with an asynchronous standby acknowledges a commit that the promoted
// standby then lacks (what the chaos harness's asynchronous failover
// shows), while a primary with a synchronous standby holds the commit,
// unacknowledged and invisible, until its machine is lost, so the
// promoted standby lacks only what no client was told of.
func TestFrozenSender(t *testing.T) {
	for _, synchronous := range []bool{false, true} {
		name := map[bool]string{false: "async", true: "sync"}[synchronous]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			opts := pgcluster.Options{Rewindable: true}
			if synchronous {
				opts.Config = []string{"synchronous_standby_names=*"}
			}
			a, b := startPair(t, opts)
			connect := func(c *pgcluster.Cluster) *pgx.Conn {
				t.Helper()
				conn, err := pgx.Connect(ctx, c.URL("postgres"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(ctx) })
				return conn
			}
			onA := connect(a)
			if _, err := onA.Exec(ctx, "CREATE TABLE t (n int); INSERT INTO t VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			// The standby has the first row before the freeze.
			onB := connect(b)
			for deadline := time.Now().Add(30 * time.Second); ; {
				var n int
				err := onB.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n)
				if err == nil && n == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the standby has not replayed the first row within 30s: %d rows, %v", n, err)
				}
				time.Sleep(20 * time.Millisecond)
			}

			if err := a.FreezeSender(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			inserted := make(chan error, 1)
			go func() {
				_, err := onA.Exec(ctx, "INSERT INTO t VALUES (2)")
				inserted <- err
			}()
			if synchronous {
				// The commit waits for the frozen standby, unseen by
				// other sessions, until the machine is lost.
				other := connect(a)
				for {
					var waiting bool
					if err := other.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE wait_event = 'SyncRep')`).Scan(&waiting); err != nil {
						t.Fatal(err)
					}
					if waiting {
						break
					}
					select {
					case err := <-inserted:
						t.Fatalf("the commit returned (%v) while its synchronous standby was frozen", err)
					case <-time.After(20 * time.Millisecond):
					}
				}
				var n int
				if err := other.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
					t.Fatalf("rows seen while the commit waits = %d, %v; want 1", n, err)
				}
			} else if err := <-inserted; err != nil {
				t.Fatalf("the commit failed: %v", err)
			}

			a.Kill()
			if synchronous {
				if err := <-inserted; err == nil {
					t.Fatal("the commit was acknowledged although its synchronous standby never received it")
				}
			}
			if err := b.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := connect(b).QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
				t.Fatal(err)
			}
			// Either way the promoted standby has only the first row: the
			// second was acknowledged and lost with an asynchronous
			// standby, never acknowledged with a synchronous one.
			if n != 1 {
				t.Fatalf("the promoted standby has %d rows, want 1: the freeze did not hold it back", n)
			}
		})
	}
}
