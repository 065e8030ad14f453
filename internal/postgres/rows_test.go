package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestNamedArgs: the kept rewrite gives what pgx's StrictNamedArgs gives,
// and stays as strict on the runs after the first.
func TestNamedArgs(t *testing.T) {
	ctx := context.Background()
	const sql = `-- @not_an_argument
SELECT @b::int, @a::text, '@c', @b::int + 1`
	for run := range 2 { // the first rewrites, the second uses the kept rewrite
		want, wantArgs, err := pgx.StrictNamedArgs{"a": "x", "b": 1}.RewriteQuery(ctx, nil, sql, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, gotArgs, err := namedArgs{"a": "x", "b": 1}.RewriteQuery(ctx, nil, sql, nil)
		if err != nil || got != want || !slices.Equal(gotArgs, wantArgs) {
			t.Fatalf("run %d: got %q %v %v, want %q %v", run, got, gotArgs, err, want, wantArgs)
		}
		for _, bad := range []namedArgs{{"a": "x"}, {"a": "x", "b": 1, "c": 2}, {"a": "x", "c": 2}} {
			if _, _, err := bad.RewriteQuery(ctx, nil, sql, nil); err == nil {
				t.Errorf("run %d: arguments %v were accepted", run, bad)
			}
		}
	}
}
