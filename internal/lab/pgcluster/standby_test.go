package pgcluster_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/lab/pgcluster"
)

// TestFailover: a primary with a synchronous standby loses its machine;
// the standby is promoted with every committed row, the old primary is
// rewound and follows it, and a client naming both hosts finds the primary
// each time.
func TestFailover(t *testing.T) {
	ctx := context.Background()
	a, err := pgcluster.Start(ctx, pgcluster.Options{Rewindable: true, Config: []string{"synchronous_standby_names=*"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b, err := a.StartStandby(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
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
