package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

type scanInner struct {
	When *time.Time `db:"when_at"`
}

type scanRow struct {
	N    int    `db:"n"`
	Name string `db:"name"`
	scanInner
	Note string // no tag: its name in any case
}

// TestScanByName: columns go to the fields of their names whatever their
// order, a NULL in one row leaves nothing in the next, and a column too
// many or too few fails the statement rather than scanning into the wrong
// field.
func TestScanByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.Pool(t)
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, sql := range []string{
		`SELECT n, name, CASE WHEN n = 2 THEN '2026-01-02 03:04:05Z'::timestamptz END AS when_at, 'x' || n AS note
		 FROM (SELECT n, 'row ' || n AS name FROM generate_series(1, 3) n) s`,
		`SELECT 'x' || n AS "Note", CASE WHEN n = 2 THEN '2026-01-02 03:04:05Z'::timestamptz END AS when_at, n, name
		 FROM (SELECT n, 'row ' || n AS name FROM generate_series(1, 3) n) s`,
	} {
		got, err := postgres.QueryAll[scanRow](ctx, pool, sql)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d rows, want 3", len(got))
		}
		for i, r := range got {
			n := i + 1
			if r.N != n || r.Name != "row "+string(rune('0'+n)) || r.Note != "x"+string(rune('0'+n)) {
				t.Errorf("row %d: %+v", n, r)
			}
			if (n == 2) != (r.When != nil) || (r.When != nil && !r.When.Equal(when)) {
				t.Errorf("row %d: when_at %v", n, r.When)
			}
		}
		one, err := postgres.QueryOne[scanRow](ctx, pool, sql+" WHERE n = 2")
		if err != nil || one.N != 2 || one.When == nil {
			t.Errorf("one row: %+v, %v", one, err)
		}
	}
	if _, err := postgres.QueryOne[scanRow](ctx, pool, `SELECT 1 AS n, '' AS name, NULL::timestamptz AS when_at, '' AS note WHERE false`); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("no row: %v, want order.ErrNotFound", err)
	}
	for name, sql := range map[string]string{
		"a column too few":         `SELECT 1 AS n, '' AS name, NULL::timestamptz AS when_at`,
		"a column too many":        `SELECT 1 AS n, '' AS name, NULL::timestamptz AS when_at, '' AS note, 2 AS m`,
		"a column twice":           `SELECT 1 AS n, '' AS name, NULL::timestamptz AS when_at, '' AS note, '' AS name`,
		"a column of another name": `SELECT 1 AS n, '' AS title, NULL::timestamptz AS when_at, '' AS note`,
	} {
		if got, err := postgres.QueryAll[scanRow](ctx, pool, sql); err == nil {
			t.Errorf("%s: scanned %+v, want an error", name, got)
		}
		if got, err := postgres.QueryOne[scanRow](ctx, pool, sql); err == nil {
			t.Errorf("%s: scanned %+v, want an error", name, got)
		}
	}
}
