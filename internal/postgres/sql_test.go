package postgres_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/postgres/internal/onerow"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestSQLFiles: every file in sql/ is one statement that PostgreSQL accepts
// on the migrated schema, and every one is embedded by the package.
func TestSQLFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.Pool(t)
	files := sqlFiles(t)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Named arguments become $1, $2, ... as pgx sends them.
		sql, _, err := pgx.NamedArgs{}.RewriteQuery(ctx, nil, string(src), nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := pool.Exec(ctx, "PREPARE check_statement AS "+sql); err != nil {
			if !strings.HasPrefix(strings.TrimSpace(stripComments(sql)), "LISTEN ") { // not preparable
				t.Errorf("%s: %v", f, err)
			}
			continue
		}
		if _, err := pool.Exec(ctx, "DEALLOCATE check_statement"); err != nil {
			t.Fatal(err)
		}
	}

	embedded := map[string]bool{}
	gofiles, _ := filepath.Glob("*.go")
	directive := regexp.MustCompile(`(?m)^//go:embed (sql/\S+\.sql)$`)
	for _, f := range gofiles {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range directive.FindAllStringSubmatch(string(src), -1) {
			embedded[m[1]] = true
		}
	}
	for _, f := range files {
		if !embedded[filepath.ToSlash(f)] {
			t.Errorf("%s is embedded by no variable", f)
		}
	}
	if len(embedded) != len(files) {
		t.Errorf("embedded %v, files %v", slices.Sorted(maps.Keys(embedded)), files)
	}
}

// sqlFiles returns the statements' files: sql/*.sql, and sql/citus/*.sql
// (Citus's own forms, see sql/README.md).
func sqlFiles(t *testing.T) []string {
	t.Helper()
	shared, err := filepath.Glob("sql/*.sql")
	if err != nil || len(shared) == 0 {
		t.Fatalf("no statements in sql/: %v", err)
	}
	citus, err := filepath.Glob("sql/citus/*.sql")
	if err != nil || len(citus) == 0 {
		t.Fatalf("no statements in sql/citus/: %v", err)
	}
	return append(shared, citus...)
}

func stripComments(sql string) string {
	var out []string
	for _, line := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestOneRowGenerated: each one-row form in sql/ is what go generate
// derives from its array form now.
func TestOneRowGenerated(t *testing.T) {
	t.Parallel()
	for src, dst := range map[string]string{
		"sql/settles.sql":               "sql/settle.sql",
		"sql/claims.sql":                "sql/claim.sql",
		"sql/create_orders.sql":         "sql/create_order.sql",
		"sql/create_claimed_orders.sql": "sql/create_claimed_order.sql",
		"sql/refund_claims.sql":         "sql/refund_claim.sql",
		"sql/refund_settles.sql":        "sql/refund_settle.sql",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		want, err := onerow.File(src, string(b))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is out of step with %s: run go generate ./internal/postgres", dst, src)
		}
	}
}
