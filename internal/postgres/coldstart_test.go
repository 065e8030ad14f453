package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestNoSequentialScansWhileTablesGrow runs the hot paths (create and
// claim, settle, refund, read, deliver, the reconciler's poll) on a new
// database through a pool whose connections planned their statements
// while the tables were nearly empty and analyzed so (autovacuum's first
// ANALYZE of a new deployment can come then), and counts the sequential
// scans PostgreSQL makes of each table as they grow to thousands of rows.
// Plans cached on those connections used to keep scanning: 21,520 scans
// of orders and 8,000 of charge_attempts (119 million rows read) while 8,000
// orders were made, 2.7 times slower than with none.
func TestNoSequentialScansWhileTablesGrow(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("on Citus the hot paths run migration 00016's functions on the workers, whose plans this pool's settings do not reach")
	}
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	pool, err := postgres.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool)
	run := func(prefix string, perWorker int) {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range perWorker {
					if err := hotPath(ctx, s, fmt.Sprintf("%s-%d-%d", prefix, w, i), i); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	// Every connection prepares and caches its plans on the small tables,
	// then the tables are analyzed while small.
	run("warm", 10)
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	before, beforeIdx := seqScans(t, url), indexReads(t, url)
	// The store analyzes the tables as they double, as serve has it do.
	kctx, stop := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() { s.KeepStatistics(kctx, slog.New(slog.DiscardHandler), 50*time.Millisecond); close(kept) }()
	const orders = 4 * 750
	run("grow", orders/4)
	stop()
	<-kept
	if t.Failed() {
		return
	}
	// The counters are flushed when a backend ends.
	pool.Close()
	for table, n := range seqScans(t, url) {
		if d := n.scans - before[table].scans; d > 0 {
			t.Errorf("%d sequential scans of %s (%d rows read) while it grew", d, table, n.rows-before[table].rows)
		}
	}
	// A read by index can be as bad: a plan that walks a whole key index,
	// or a merchant's part of it, reads more rows the more there are. Each
	// checkout reads a few entries of each key (its row's versions); 20 a
	// checkout is far above that and far below such a walk. (The queues'
	// indexes are left out: a scan of one reads the dead entries that
	// every state change leaves until vacuum, which this test does not
	// wait for.)
	most, mostIndex := 0.0, ""
	for index, n := range indexReads(t, url) {
		per := float64(n-beforeIdx[index]) / orders
		if per > 20 {
			t.Errorf("%s: %.1f index rows read per checkout while the tables grew", index, per)
		}
		if per > most {
			most, mostIndex = per, index
		}
	}
	t.Logf("most index rows read per checkout: %.1f, of %s", most, mostIndex)
}

// indexReads reads pg_stat_user_indexes' rows read from each unique index.
func indexReads(t *testing.T, url string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, _ := c.Query(ctx, `SELECT s.indexrelname::text, s.idx_tup_read
		FROM pg_stat_user_indexes s JOIN pg_index i ON i.indexrelid = s.indexrelid WHERE i.indisunique`)
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hotPath is one checkout on the store, as the service makes it: create
// and claim, settle PAID, read; every fourth refunded; every tenth with a
// delivery round and a reconciler poll.
func hotPath(ctx context.Context, s *postgres.Store, ref string, i int) error {
	o := newOrder(ref)
	c := claimOf(o, "req-"+ref)
	o, a, isNew, err := s.CreateClaimed(ctx, o, c)
	if err != nil || !isNew {
		return fmt.Errorf("create and claim %s: %w (new %t)", ref, err, isNew)
	}
	if _, ok, err := s.Settle(ctx, order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: a.ID,
		Event: order.EventSucceed, To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"},
		Actor: "test"}); err != nil || !ok {
		return fmt.Errorf("settle %s: %w (%t)", ref, err, ok)
	}
	if _, err := s.OrderByReference(ctx, o.MerchantID, ref); err != nil {
		return fmt.Errorf("read %s: %w", ref, err)
	}
	if i%4 == 0 {
		r, err := s.ClaimRefund(ctx, refundClaimOf(o, "refund-"+ref, 0))
		if err != nil || !r.Claimed {
			return fmt.Errorf("refund claim %s: %w", ref, err)
		}
		st := order.RefundSettlementFor(o.MerchantID, r.Refund.OrderID, r.Refund.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re"}, time.Minute)
		st.Actor = "test"
		if _, _, ok, err := s.SettleRefund(ctx, st); err != nil || !ok {
			return fmt.Errorf("refund settle %s: %w (%t)", ref, err, ok)
		}
	}
	if i%10 == 0 {
		evs, err := s.LeaseDeliveries(ctx, []string{order.DefaultMerchant}, 20, time.Minute)
		if err != nil {
			return fmt.Errorf("lease deliveries: %w", err)
		}
		ds := make([]order.Delivery, len(evs))
		for k, e := range evs {
			ds[k] = order.Delivery{MerchantID: e.MerchantID, Num: e.Num, Outcome: order.DeliveryDelivered, Status: 200}
		}
		if _, err := s.RecordDeliveries(ctx, ds, time.Hour); err != nil {
			return fmt.Errorf("record deliveries: %w", err)
		}
		if _, err := s.ClaimDue(ctx, 10, time.Minute); err != nil {
			return fmt.Errorf("claim due: %w", err)
		}
	}
	return nil
}

type scanCount struct{ scans, rows int64 }

// seqScans reads pg_stat_user_tables' sequential scans of each table.
func seqScans(t *testing.T, url string) map[string]scanCount {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT relname, seq_scan, coalesce(seq_tup_read, 0) FROM pg_stat_user_tables`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scanCount{}
	for rows.Next() {
		var name string
		var n scanCount
		if err := rows.Scan(&name, &n.scans, &n.rows); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGenericPlansReadByKey plans every statement of the store (sql/*.sql)
// as a connection caches it, a generic plan, on a young database analyzed
// at 1,000 checkouts, and checks that no plan reads a table whole (see
// reads below). Such a plan is cheap while the tables are small, and it
// stays cached as they grow, until the next ANALYZE. Before: the grouped
// claim, create and settle read the merchant's every order (each array
// of keys was an = ANY that PostgreSQL used only for merchant_id until
// the table held tens of thousands); lease_deliveries.sql and
// record_deliveries.sql hash-joined the whole outbox; gateway_event_attempt.sql
// walked every attempt's key, and list_events.sql read the merchant's
// every refund, at every call.
func TestGenericPlansReadByKey(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("on Citus the hot paths run migration 00016's functions on the workers")
	}
	t.Parallel()
	// Statements that read a whole table (or a merchant's share) by
	// design, and why.
	whole := map[string]string{
		"count_by_state.sql":         "an operator's count of orders by state",
		"capture_count_by_state.sql": "an operator's count of captures by state",
		"refund_count_by_state.sql":  "an operator's count of refunds by state",
		"void_count_by_state.sql":    "an operator's count of voids by state",
		"dispute_counts.sql":         "an operator's count of disputes by status",
		"list_disputes.sql":          "an operator's listing, every filter optional",
		"list_review_items.sql":      "an operator's review queue: captures and voids in review have no queue index",
		"list_orders.sql":            "an operator's listing, every filter optional",
		"order_merchant.sql":         "an operator's read of an order by id alone: orders has no index on id (one more write per order)",
		"review_item.sql":            "an operator's read of one review item: review_items holds a few possible double charges",
		"route_rules.sql":            "a merchant's latest rule version, newest first: one row read",
		"listen.sql":                 "LISTEN, no plan",
		"listen_due.sql":             "LISTEN, no plan",
	}
	ctx := context.Background()
	pool, err := postgres.Open(ctx, postgrestest.URL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool)
	for i := range 1000 {
		if err := hotPath(ctx, s, fmt.Sprintf("small-%d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Each index's key columns, whether it is unique, and whether it is
	// partial (the catalogs' left out).
	type index struct {
		Name    string
		Columns []string
		Partial bool
		Rows    float64
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	rows, _ := conn.Query(ctx, `SELECT i.indexrelid::regclass::text AS name,
		array_agg(a.attname::text ORDER BY k.n) AS columns, i.indpred IS NOT NULL AS partial, t.reltuples AS rows
		FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		JOIN pg_class t ON t.oid = i.indrelid
		WHERE i.indrelid::regclass::text NOT LIKE 'pg_%' GROUP BY 1, 3, 4`)
	list, err := pgx.CollectRows(rows, pgx.RowToStructByName[index])
	if err != nil {
		t.Fatal(err)
	}
	indexes := map[string]index{}
	for _, ix := range list {
		indexes[ix.Name] = ix
	}
	// reads says why a scan of ix with the index condition cond (empty
	// for none) reads more than the rows it is after, or "": a scan of a
	// partial index reads a queue; one of any other must bound its leading
	// column, and where that is merchant_id, fix the next one too (a
	// merchant's order, not its every order). A table that the statistics
	// count under 1,000 rows is left out: there a read of the whole table
	// and a read by key cost the same, and either plan may win; the store
	// analyzes a table again each time it doubles (KeepStatistics), so no
	// plan made then outlives twice the table's size.
	reads := func(ix index, cond string) string {
		if ix.Partial || ix.Columns == nil || ix.Rows < 1000 {
			return "" // a queue, a catalog's index, or a small table
		}
		if !regexp.MustCompile(`\b` + ix.Columns[0] + ` (=|<|>|<=|>=) `).MatchString(cond) {
			return "its condition does not bound " + ix.Columns[0]
		}
		if ix.Columns[0] == "merchant_id" && len(ix.Columns) > 1 &&
			!regexp.MustCompile(`\b`+ix.Columns[1]+` = `).MatchString(cond) {
			return "it reads a merchant's every row: its condition does not fix " + ix.Columns[1]
		}
		return ""
	}
	files, err := filepath.Glob("sql/*.sql")
	if err != nil || len(files) < 50 {
		t.Fatalf("statements: %d, %v", len(files), err)
	}
	indexScan := regexp.MustCompile(`(?:Index Scan|Index Only Scan) (?:Backward )?using (\S+)|Bitmap Index Scan on (\S+)`)
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := whole[name]; ok {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Each @name becomes $n, as pgx sends it; the plan is explained
		// for NULLs, which a generic plan does not look at.
		q, args, err := pgx.NamedArgs{}.RewriteQuery(ctx, conn.Conn(), string(b), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := conn.Exec(ctx, "DEALLOCATE ALL"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "PREPARE p AS "+strings.TrimSuffix(strings.TrimSpace(q), ";"), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Errorf("%s: prepare: %v", name, err)
			continue
		}
		explain := "EXPLAIN EXECUTE p"
		if len(args) > 0 {
			explain += "(" + strings.Repeat("NULL, ", len(args)-1) + "NULL)"
		}
		rows, _ := conn.Query(ctx, explain, pgx.QueryExecModeSimpleProtocol)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("%s: explain: %v", name, err)
			continue
		}
		for i, line := range plan {
			why := ""
			if strings.Contains(line, "Seq Scan on ") {
				why = "a sequential scan"
			}
			if m := indexScan.FindStringSubmatch(line); m != nil {
				cond := ""
				for _, next := range plan[i+1:] {
					if strings.Contains(next, "->") {
						break
					}
					if _, c, ok := strings.Cut(next, "Index Cond: "); ok {
						cond = c
					}
				}
				why = reads(indexes[m[1]+m[2]], cond)
			}
			if why != "" {
				t.Errorf("%s reads a table whole (%s): %s\n%s", name, why, strings.TrimSpace(line), strings.Join(plan, "\n"))
			}
		}
	}
}
