package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/lab/bench"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

// roundTrips counts the statements a pool sends: with no batching or
// pipelining, one statement is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedPool is a pool of up to conns connections to the test's database
// whose statements tracer sees.
func tracedPool(tb testing.TB, tracer pgx.QueryTracer, conns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(postgrestest.URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// writeCommits returns the next transaction id: every transaction that
// writes takes one, so the difference counts durable commits (and aborts,
// of which a benchmark that checks its results has none).
func writeCommits(b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// processCPU is the CPU time this process has used (user and system).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChargePath measures Service.Charge (claim, call, settle) on a
// real PostgreSQL with an in-process gateway that answers at once, and
// reports charges/s, round trips and commits per charge, and the Go
// process's CPU per create (one at a time, so each runs the one-row
// statement) and per charge: the part of the server's CPU that is the
// domain and the storage, without gRPC, and steadier than the wall time on
// a shared machine.
func BenchmarkChargePath(b *testing.B) {
	ctx := context.Background()
	rt := &roundTrips{}
	pool := tracedPool(b, rt, 8)
	store := postgres.NewStore(pool)
	svc, err := order.NewService(store, map[string]order.Gateway{"sim": bench.NewInstant()}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: 10 * time.Second, Grace: 5 * time.Second, FirstRecheck: 5 * time.Second,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N)
	startCreateCPU := processCPU(b)
	for i := range ids {
		o, err := svc.Create(ctx, order.DefaultMerchant, order.NewOrder{MerchantReference: fmt.Sprintf("bench-%d", i),
			Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = o.ID
	}
	createCPU := processCPU(b) - startCreateCPU
	var next atomic.Int64
	startCommits := writeCommits(b, pool)
	startTrips := rt.n.Load()
	startCPU := processCPU(b)
	b.ResetTimer()
	b.SetParallelism(2) // 2×GOMAXPROCS callers
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			o, _, err := svc.Charge(ctx, order.DefaultMerchant, order.ChargeInput{OrderID: ids[i], RequestID: fmt.Sprintf("bench-req-%d", i)})
			if err != nil || o.State != order.StatePaid {
				b.Errorf("charge: %v %s", err, o.State)
				return
			}
		}
	})
	b.StopTimer()
	cpu := processCPU(b) - startCPU
	trips := rt.n.Load() - startTrips - 1 // less the xid query
	b.ReportMetric(float64(createCPU.Microseconds())/float64(b.N), "cpu-µs/create")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/charge")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "charges/s")
	b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/charge")
	b.ReportMetric(float64(writeCommits(b, pool)-startCommits)/float64(b.N), "commits/charge")
}

// BenchmarkReconcileDrain measures how fast one reconciler settles 10,000
// due CHARGING orders whose gateway answers at once.
func BenchmarkReconcileDrain(b *testing.B) {
	const n = 10_000 // as in the statements below
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		pool := tracedPool(b, nil, 8)
		gw := bench.NewInstant()
		// Due CHARGING orders as a crash after the claim leaves them, made
		// in bulk; the gateway has each attempt's charge.
		for _, sql := range []string{
			`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway)
			 SELECT gen_random_uuid(), 'default', 'drain-' || i, 100, 'GBP', 'tok_ok', 'sim' FROM generate_series(1, 10000) i`,
			`INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency, outcome)
			 SELECT gen_random_uuid(), id, 'default', 'drain-req-' || id, 'tok_ok', 100, 'GBP', 'unknown' FROM orders`,
			`UPDATE orders SET state = 'CHARGING', current_attempt = a.id, reconcile_at = now() - interval '1 second'
			 FROM charge_attempts a WHERE orders.id = a.order_id`,
		} {
			if _, err := pool.Exec(ctx, sql); err != nil {
				b.Fatal(err)
			}
		}
		rows, _ := pool.Query(ctx, `SELECT id::text FROM charge_attempts`)
		refs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		for _, ref := range refs {
			_, _ = gw.Charge(ctx, order.ChargeRequest{AttemptID: ref})
		}
		r, err := reconcile.New(postgres.NewStore(pool), map[string]order.Gateway{"sim": gw}, reconcile.Config{
			Schedule: reconcile.DefaultSchedule, BatchSize: 100, Concurrency: 8, PollInterval: time.Second,
			LookupTimeout: time.Second, NoShowHorizon: time.Minute,
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		for {
			got, err := r.RunOnce(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if got == 0 {
				break
			}
		}
		b.ReportMetric(n/time.Since(start).Seconds(), "orders/s")
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE state <> 'PAID'`).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left != 0 {
			b.Fatalf("%d orders not PAID after the drain", left)
		}
	}
	b.StopTimer()
}

// BenchmarkCreateAndCharge measures the one-call variant: create and claim
// in one statement, call, settle; with the Go process's CPU per order.
func BenchmarkCreateAndCharge(b *testing.B) {
	ctx := context.Background()
	rt := &roundTrips{}
	pool := tracedPool(b, rt, 8)
	svc, err := order.NewService(postgres.NewStore(pool), map[string]order.Gateway{"sim": bench.NewInstant()}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: 10 * time.Second, Grace: 5 * time.Second, FirstRecheck: 5 * time.Second,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	startCommits := writeCommits(b, pool)
	startTrips := rt.n.Load()
	startCPU := processCPU(b)
	b.ResetTimer()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			o, _, err := svc.CreateAndCharge(ctx, order.DefaultMerchant, order.NewOrder{MerchantReference: fmt.Sprintf("one-%d", i),
				Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}, order.ChargeInput{RequestID: fmt.Sprintf("one-req-%d", i)})
			if err != nil || o.State != order.StatePaid {
				b.Errorf("create and charge: %v %s", err, o.State)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-startCPU).Microseconds())/float64(b.N), "cpu-µs/order")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
	b.ReportMetric(float64(rt.n.Load()-startTrips-1)/float64(b.N), "roundtrips/order")
	b.ReportMetric(float64(writeCommits(b, pool)-startCommits)/float64(b.N), "commits/order")
}

// BenchmarkCheckoutForms compares, on plain PostgreSQL, the two forms of
// the checkout path's writes: the statements the store runs there (sql/,
// CTEs) and the PL/pgSQL functions it calls on Citus (migration 00016,
// sql/citus/). One op is one order's create, claim, settle, refund claim
// and refund settle, by one caller on one connection, so that each write
// runs alone (the one-row forms), one round trip each in both forms. It
// reports the CPU that the connection's server process spent per op
// (server-µs/op), steadier than the wall time on a shared machine.
func BenchmarkCheckoutForms(b *testing.B) {
	for _, form := range []struct {
		name  string
		citus bool
	}{{"cte", false}, {"function", true}} {
		b.Run(form.name, func(b *testing.B) {
			if postgrestest.Citus() {
				b.Skip("compares the forms on plain PostgreSQL")
			}
			ctx := context.Background()
			pool, err := postgres.Open(ctx, postgrestest.URL(b), 1)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			var backend int
			if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
				b.Fatal(err)
			}
			// The functions check that Citus delegated their call; plain
			// PostgreSQL has no coordinator to run them on.
			if _, err := pool.Exec(ctx, `CREATE FUNCTION citus_is_coordinator() RETURNS boolean LANGUAGE sql AS 'SELECT false'`); err != nil {
				b.Fatal(err)
			}
			s := postgres.NewStoreOn(pool, form.citus)
			startCPU := backendCPU(b, backend)
			b.ResetTimer()
			for i := range b.N {
				o, err := s.CreateOrder(ctx, newOrder(fmt.Sprintf("form-%d", i)))
				if err != nil {
					b.Fatal(err)
				}
				c, err := s.Claim(ctx, claimOf(o, fmt.Sprintf("form-req-%d", i)))
				if err != nil || !c.Claimed {
					b.Fatalf("claim: %v %+v", err, c)
				}
				if _, ok, err := s.Settle(ctx, order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: c.Attempt.ID,
					Event: order.EventSucceed, To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"},
					Actor: "bench"}); err != nil || !ok {
					b.Fatalf("settle: %v %v", err, ok)
				}
				r, err := s.ClaimRefund(ctx, refundClaimOf(o, fmt.Sprintf("form-refund-%d", i), 0))
				if err != nil || !r.Claimed {
					b.Fatalf("refund claim: %v %+v", err, r)
				}
				st := order.RefundSettlementFor(o.MerchantID, r.Refund.OrderID, r.Refund.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re"}, time.Minute)
				st.Actor = "bench"
				if _, _, ok, err := s.SettleRefund(ctx, st); err != nil || !ok {
					b.Fatalf("refund settle: %v %v", err, ok)
				}
			}
			b.StopTimer()
			var again int
			if err := pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&again); err != nil || again != backend {
				b.Fatalf("the connection changed (%d, then %d: %v): its server's CPU is not the whole", backend, again, err)
			}
			b.ReportMetric(float64((backendCPU(b, backend)-startCPU).Microseconds())/float64(b.N), "server-µs/op")
		})
	}
}

// backendCPU is the CPU time (user and system) that the server process pid,
// on this machine, has used.
func backendCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("the server's CPU: %v", err)
	}
	// The fields after the command name, which is in parentheses: utime
	// and stime are the 12th and 13th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
