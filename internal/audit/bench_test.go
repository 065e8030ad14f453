package audit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/order"
)

// BenchmarkAudit audits a window of paid orders, each charged once at the
// simulator (100,000; SETTLE_AUDIT_BENCH_ORDERS sets another number), and
// reports the orders audited per second and the peak of the live heap
// (as each garbage collection during the run measured it) above what it
// was before the run, as the medians of the b.N runs. Beside them, the
// two halves of the work alone, each a median of as many runs: the
// gateway's listing of the window (listed-orders/s), and the audit's SQL
// floor (floor-orders/s; auditFloorSQL, over the same pages), against
// which the audit's own rate is reported as a ratio (vs-floor). The simulator, in
// the same process, holds its ledger throughout and makes garbage for
// each page it lists: the heap with its garbage grows with the ledger,
// which is why the live heap is what is measured.
//
//	go test ./internal/audit -run '^$' -bench BenchmarkAudit -benchtime 3x
//
// Settle's side is written in three statements rather than through the
// charge path, which would take minutes; the gateway's side is charged
// through the refpsp adapter over HTTP.
func BenchmarkAudit(b *testing.B) {
	n := 100_000
	if v := os.Getenv("SETTLE_AUDIT_BENCH_ORDERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	f := newFixture(b)
	seed(b, f, n)
	w := f.window()
	// The default page size, as settle runs it.
	a, err := audit.New(f.store, map[string]order.Gateway{"sim": f.gw}, audit.Config{Margin: margin}, quiet)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var rates, peaks []float64
	b.ResetTimer()
	for i := range b.N {
		runtime.GC()
		base := liveHeap()
		stop := make(chan struct{})
		var peak atomic.Uint64
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				if h := liveHeap(); h > peak.Load() {
					peak.Store(h)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		start := time.Now()
		r, err := a.Audit(ctx, order.DefaultMerchant, "sim", w, fmt.Sprintf("bench-%d", i))
		elapsed := time.Since(start)
		close(stop)
		<-done
		if err != nil {
			b.Fatal(err)
		}
		if !r.Clean() || r.Seen != int64(n) {
			b.Fatalf("run %+v: want clean, %d charges seen", r, n)
		}
		rate := float64(n) / elapsed.Seconds()
		above := float64(peak.Load()-min(base, peak.Load())) / (1 << 20)
		b.Logf("run %d: %d orders in %s, %.0f orders/s, peak live heap %.2f MiB above the %.1f MiB before", i, n,
			elapsed.Round(time.Millisecond), rate, above, float64(base)/(1<<20))
		rates, peaks = append(rates, rate), append(peaks, above)
	}
	b.StopTimer()
	listed, floor := auditHalves(b, f, w, b.N)
	b.ReportMetric(median(rates), "orders/s")
	b.ReportMetric(median(peaks), "peak-live-heap-MiB")
	b.ReportMetric(median(listed), "listed-orders/s")
	b.ReportMetric(median(floor), "floor-orders/s")
	b.ReportMetric(median(rates)/median(floor), "vs-floor")
}

// auditFloorSQL is the audit's durable work for one page of the gateway's
// charges, as tight as SQL allows: each charge's attempt and order read by
// the charge's reference, and the charge recorded as seen by the run.
// auditFloorSweepSQL is the sweep that ends a run: the charged attempts of
// the window that the run did not see, counted. A clean window writes no
// finding, so the floor writes none either; Settle's statements
// (audit_match_charges.sql, audit_missing.sql) also compare each charge
// with its attempt and order and write a finding for each difference.
const (
	auditFloorSQL = `INSERT INTO audit_seen (merchant_id, run_id, gateway_charge_id, attempt_id, outcome)
SELECT a.merchant_id, $3::uuid, g.id, a.id, 'succeeded'
FROM unnest($1::text[], $2::text[]) AS g(id, reference)
JOIN charge_attempts a ON a.merchant_id = 'default' AND a.id = g.reference::uuid
JOIN orders o ON o.merchant_id = a.merchant_id AND o.id = a.order_id
ON CONFLICT DO NOTHING`
	auditFloorSweepSQL = `SELECT count(*) FROM charge_attempts a
JOIN orders o ON o.merchant_id = a.merchant_id AND o.id = a.order_id AND o.current_attempt = a.id
WHERE a.merchant_id = 'default' AND a.gateway = 'sim' AND a.created_at >= $1 AND a.created_at < $2
	AND o.state = 'PAID'
	AND (SELECT s.attempt_id FROM audit_seen s
		WHERE s.merchant_id = 'default' AND s.run_id = $3::uuid AND s.attempt_id = a.id AND s.outcome = 'succeeded'
		LIMIT 1) IS NULL`
	// auditPage is the auditor's default page size.
	auditPage = 500
)

// auditHalves times, runs times each, the gateway's listing of w (as the
// auditor lists it, with its margin) and the audit's SQL floor over the
// pages that listing gives, and returns their rates in orders per second.
func auditHalves(b *testing.B, f *fixture, w audit.Window, runs int) (listed, floor []float64) {
	b.Helper()
	ctx := context.Background()
	var ids, refs []string
	for range runs {
		ids, refs = ids[:0], refs[:0]
		start := time.Now()
		err := f.gw.ListCharges(ctx, w.From.Add(-margin), w.To.Add(margin), func(c order.GatewayCharge) error {
			ids, refs = append(ids, c.ID), append(refs, c.Reference)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		listed = append(listed, float64(len(ids))/time.Since(start).Seconds())
	}
	for i := range runs {
		runID := fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		start := time.Now()
		for p := 0; p < len(ids); p += auditPage {
			end := min(p+auditPage, len(ids))
			if _, err := f.pool.Exec(ctx, auditFloorSQL, ids[p:end], refs[p:end], runID); err != nil {
				b.Fatal(err)
			}
		}
		var missing int
		if err := f.pool.QueryRow(ctx, auditFloorSweepSQL, w.From, w.To, runID).Scan(&missing); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, float64(len(ids))/time.Since(start).Seconds())
		if missing != 0 {
			b.Fatalf("the floor's sweep found %d charged attempts unseen, want none", missing)
		}
	}
	return listed, floor
}

// liveHeap is the bytes of the heap that the last garbage collection
// found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// seed makes n PAID orders of the default merchant at gateway sim, each
// with its succeeded attempt, and charges each attempt at the simulator.
func seed(b *testing.B, f *fixture, n int) {
	b.Helper()
	ctx := context.Background()
	for i, q := range []string{
		`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
		SELECT gen_random_uuid(), 'default', 'bench-' || g, 1250, 'GBP', 'tok_ok', 'sim', 'PAID' FROM generate_series(1, $1::int) g`,
		`INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency, outcome, gateway, settled_at)
		SELECT gen_random_uuid(), o.id, o.merchant_id, 'req-' || o.merchant_reference, 'tok_ok', 1250, 'GBP', 'succeeded', 'sim', now()
		FROM orders o WHERE o.merchant_id = 'default'`,
		`UPDATE orders o SET current_attempt = a.id FROM charge_attempts a
		WHERE a.merchant_id = o.merchant_id AND a.order_id = o.id AND o.merchant_id = 'default'`,
		`ANALYZE`,
	} {
		var args []any
		if i == 0 {
			args = append(args, n)
		}
		if _, err := f.pool.Exec(ctx, q, args...); err != nil {
			b.Fatal(err)
		}
	}
	rows, err := f.pool.Query(ctx, `SELECT id::text FROM charge_attempts WHERE merchant_id = 'default'`)
	if err != nil {
		b.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil || len(ids) != n {
		b.Fatalf("%d attempts (%v), want %d", len(ids), err, n)
	}
	var wg sync.WaitGroup
	next := make(chan string)
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for id := range next {
				res, err := f.gw.Charge(ctx, order.ChargeRequest{AttemptID: id, OrderID: id, MerchantReference: "bench",
					Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok"})
				if err != nil || res.Outcome != order.OutcomeSucceeded {
					failed.Add(1)
				}
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d charges failed", n)
	}
}
