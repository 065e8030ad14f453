package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestAnalyzesATableWhenItDoubles: a round of KeepStatistics analyzes a
// table that holds at least twice the rows its statistics count (and at
// least 100), and leaves one that has grown less. The table's own
// autovacuum is off, so only the store analyzes it.
func TestAnalyzesATableWhenItDoubles(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("on Citus the coordinator holds no rows; KeepStatistics does nothing there")
	}
	t.Parallel()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, postgrestest.URL(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool)
	if _, err := pool.Exec(ctx, "CREATE TABLE grow_probe (i int) WITH (autovacuum_enabled = off)"); err != nil {
		t.Fatal(err)
	}
	// grow inserts n rows, makes the inserting backend publish its counts,
	// and waits until pg_stat_user_tables shows total live rows.
	grow := func(n, total int) {
		t.Helper()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if _, err := c.Exec(ctx, "INSERT INTO grow_probe SELECT generate_series(1, $1::int)", n); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, pool, "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'grow_probe'", float64(total))
	}
	counted := func() float64 {
		t.Helper()
		var r float32
		if err := pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE relname = 'grow_probe'").Scan(&r); err != nil {
			t.Fatal(err)
		}
		return float64(r)
	}
	for _, step := range []struct {
		add, total int
		want       float64
	}{
		{50, 50, -1},      // under 100 rows: never analyzed
		{450, 500, 500},   // 500 ≥ 100: analyzed
		{400, 900, 500},   // 900 < 2 × 500: left
		{100, 1000, 1000}, // 1,000 ≥ 2 × 500: analyzed
	} {
		grow(step.add, step.total)
		if err := s.AnalyzeGrown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := counted(); got != step.want {
			t.Errorf("at %d rows the statistics count %v, want %v", step.total, got, step.want)
		}
	}
}

// waitFor polls query (one float) until it returns want, for up to 10 s.
func waitFor(t *testing.T, ctx context.Context, pool *pgxpool.Pool, query string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got float64
		if err := pool.QueryRow(ctx, query).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v, want %v", query, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
