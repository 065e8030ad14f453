package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestKeysNameTheMerchant reads the migrated schema from the catalog: every
// table has a merchant_id column, and every primary key, unique constraint
// and foreign key includes it. Citus requires it of a table distributed by
// merchant_id; holding plain PostgreSQL to it too keeps one schema for both
// engines, and a table added later without it fails here.
func TestKeysNameTheMerchant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.Pool(t)

	rows, err := pool.Query(ctx, `
		SELECT c.relname, EXISTS (
			SELECT 1 FROM pg_attribute a
			WHERE a.attrelid = c.oid AND a.attname = 'merchant_id' AND NOT a.attisdropped)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
		ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		var has bool
		if err := rows.Scan(&name, &has); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
		if !has {
			t.Errorf("table %s has no merchant_id column", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tables, "orders") || !slices.Contains(tables, "charge_attempts") {
		t.Fatalf("the catalog query found no Settle tables: %v", tables)
	}

	rows, err = pool.Query(ctx, `
		SELECT c.relname, k.conname, k.contype::text, pg_get_constraintdef(k.oid),
			EXISTS (
				SELECT 1 FROM pg_attribute a
				WHERE a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey) AND a.attname = 'merchant_id')
		FROM pg_constraint k
		JOIN pg_class c ON c.oid = k.conrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND k.contype IN ('p', 'u', 'f') AND c.relname <> 'goose_db_version'
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var table, name, kind, def string
		var has bool
		if err := rows.Scan(&table, &name, &kind, &def, &has); err != nil {
			t.Fatal(err)
		}
		n++
		if !has {
			t.Errorf("%s.%s (%s) does not include merchant_id", table, name, def)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the catalog query found no keys")
	}
}

// fanOut lists the statements that may name no merchant, and why. Every
// other statement in sql/ names its merchant, so that on Citus it runs on
// the merchant's shard alone. docs/operations.md ("Settle on Citus") says
// how each of these runs there.
var fanOut = map[string]string{
	"order_merchant.sql":           "finds the merchant of an order an operator names by id alone",
	"claim_due.sql":                "the reconciler's lease over every merchant's due orders",
	"claim_due_refunds.sql":        "the reconciler's lease over every merchant's due refunds",
	"claim_due_captures.sql":       "the reconciler's lease over every merchant's due captures",
	"claim_due_voids.sql":          "the reconciler's lease over every merchant's due voids",
	"claim_due_holds.sql":          "the reconciler's lease over every merchant's holds past capture_before",
	"sweep_watchers.sql":           "expired watchers of every merchant, at a listener's start",
	"listen.sql":                   "not a query",
	"listen_due.sql":               "not a query",
	"claim_review_due.sql":         "the reconciler's slow recheck over every merchant's orders in review",
	"citus/claim_due.sql":          "the reconciler's lease on Citus: a read of every shard's due orders",
	"citus/claim_review_due.sql":   "the reconciler's review lease on Citus: a read of every shard's orders in review",
	"citus/claim_due_refunds.sql":  "the reconciler's refund lease on Citus: a read of every shard's due refunds",
	"citus/claim_due_captures.sql": "the reconciler's capture lease on Citus: a read of every shard's due captures",
	"citus/claim_due_voids.sql":    "the reconciler's void lease on Citus: a read of every shard's due voids",
	"citus/claim_due_holds.sql":    "the reconciler's hold lease on Citus: a read of every shard's holds past capture_before",
	"is_citus.sql":                 "asks the engine, not a table",
	"grown_tables.sql":             "asks the engine's statistics of every table, not a table",
	"durability.sql":               "asks the engine (its settings and standbys), not a table",
	"writable.sql":                 "asks the engine whether it accepts writes, not a table",
	"gateway_event_attempt.sql":    "a gateway's event names no merchant: finds the attempt it is about, and so its merchant",
	"gateway_events_about.sql":     "a lookup from recorded events by the gateway's reference, which names no merchant",
	"dispute_attempt.sql":          "a gateway's dispute event names no merchant: finds the attempt it is about, and so its merchant",
	"dispute_counts.sql":           "the metrics' counts of every merchant's disputes",
}

// TestStatementsNameTheMerchant: every statement outside fanOut takes the
// merchant as an argument.
func TestStatementsNameTheMerchant(t *testing.T) {
	t.Parallel()
	for _, f := range sqlFiles(t) {
		name := strings.TrimPrefix(filepath.ToSlash(f), "sql/")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names := strings.Contains(stripComments(string(src)), "@merchant_id")
		if _, ok := fanOut[name]; ok == names {
			if ok {
				t.Errorf("%s names its merchant: take it out of fanOut", name)
			} else {
				t.Errorf("%s names no merchant (@merchant_id): on Citus it would run on every shard", name)
			}
		}
	}
}
