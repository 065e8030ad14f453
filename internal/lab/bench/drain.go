package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/reconcile"
)

// The reconciler of the drain runs with `settle serve`'s defaults
// (cmd/settle's configuration reference): a pool of 16 connections, batches
// of 100, 8 lookups in flight, a 10s gateway timeout and a 70s no-show
// horizon. Its floor runs with as many pgbench clients as it has lookups
// in flight.
const (
	drainPoolSize    = 16
	drainBatch       = 100
	drainConcurrency = 8
)

// drainSetupSQL makes n ($1) due CHARGING orders, as a crash after the
// claim leaves them, in bulk; order i of the drain tagged $2 and its
// attempt have the ids that sql/settle_floor.sql computes from i and the
// tag.
var drainSetupSQL = []string{
	`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway)
	 SELECT md5('drain-' || $2::text || '-' || i)::uuid, 'default', 'drain-' || $2::text || '-' || i, 100, 'GBP', 'tok_ok', 'instant'
	 FROM generate_series(1, $1::int) i`,
	`INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency, outcome)
	 SELECT md5('drain-attempt-' || $2::text || '-' || i)::uuid, md5('drain-' || $2::text || '-' || i)::uuid,
	   'default', 'drain-req-' || $2::text || '-' || i, 'tok_ok', 100, 'GBP', 'unknown'
	 FROM generate_series(1, $1::int) i`,
	`UPDATE orders SET state = 'CHARGING', current_attempt = a.id, reconcile_at = now() - interval '1 second'
	 FROM charge_attempts a WHERE orders.id = a.order_id AND orders.merchant_reference LIKE 'drain-' || $1::text || '-%'`,
}

// drain measures one reconciler draining DrainOrders due orders, and
// pgbench settling the same orders with sql/settle_floor.sql, Runs times
// each, alternately.
func (b *benchmark) drain(ctx context.Context) (*Drain, error) {
	// Each floor client settles an equal slice of the orders.
	n := (b.cfg.DrainOrders + drainConcurrency - 1) / drainConcurrency * drainConcurrency
	d := &Drain{Orders: n, Clients: drainConcurrency}
	var rec, floor []Measurement
	for r := range b.cfg.Runs {
		tag := fmt.Sprintf("r%d", 2*r)
		if err := b.prepareDrain(ctx, n, tag); err != nil {
			return nil, err
		}
		rr, err := b.measure(ctx, nil, false, func() (work, error) { return b.reconcileAll(ctx, n, tag) })
		if err != nil {
			return nil, err
		}
		tag = fmt.Sprintf("r%d", 2*r+1)
		if err := b.prepareDrain(ctx, n, tag); err != nil {
			return nil, err
		}
		fr, err := b.measure(ctx, nil, false, func() (work, error) {
			per := strconv.Itoa(n / drainConcurrency)
			res, err := b.pg.run(ctx, "settle_floor.sql", drainConcurrency, 0, n/drainConcurrency, "per_client="+per, "k=0", "tag="+tag, "charging=CHARGING")
			if err != nil {
				return work{}, err
			}
			return work{ops: res.ops, perSecond: res.tps, latencies: res.latencies, clientCPU: res.cpu}, nil
		})
		if err != nil {
			return nil, err
		}
		if err := b.allPaid(ctx, n, tag); err != nil {
			return nil, fmt.Errorf("settle floor: %w", err)
		}
		rec, floor = append(rec, rr), append(floor, fr)
		fmt.Fprintf(b.cfg.Log, "bench: reconciler drain run %d/%d: reconciler %.0f orders/s, settle floor %.0f orders/s\n",
			r+1, b.cfg.Runs, rr.PerSecond, fr.PerSecond)
	}
	d.Reconciler, d.Floor = summarize(rec), summarize(floor)
	d.Ratio = ratio(d.Reconciler.Median.PerSecond, d.Floor.Median.PerSecond)
	return d, nil
}

// prepareDrain makes n due orders tagged tag, then lets the statistics,
// the visibility map and the checkpoint catch up, so that each drain
// starts from the same place.
func (b *benchmark) prepareDrain(ctx context.Context, n int, tag string) error {
	for i, q := range drainSetupSQL {
		args := []any{n, tag}
		if i == 2 { // the update takes the tag alone
			args = []any{tag}
		}
		if _, err := b.db.pool.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("make due orders: %w", err)
		}
	}
	for _, q := range []string{`VACUUM ANALYZE orders, charge_attempts, order_events`, `CHECKPOINT`} {
		if _, err := b.db.pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("make due orders: %s: %w", q, err)
		}
	}
	if b.db.pgss {
		if _, err := b.db.pool.Exec(ctx, `SELECT /* settle-bench */ pg_stat_statements_reset()`); err != nil {
			return err
		}
	}
	return nil
}

// reconcileAll runs one reconciler, in this process, until no order is due.
func (b *benchmark) reconcileAll(ctx context.Context, n int, tag string) (work, error) {
	pool, err := postgres.Open(ctx, b.db.url, drainPoolSize)
	if err != nil {
		return work{}, err
	}
	defer pool.Close()
	// The gateway has every attempt's charge.
	rows, _ := pool.Query(ctx, `SELECT id::text FROM charge_attempts WHERE outcome = 'unknown'`)
	refs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return work{}, err
	}
	gw := NewInstant()
	for _, ref := range refs {
		_, _ = gw.Charge(ctx, order.ChargeRequest{AttemptID: ref})
	}
	// Logs are formatted as serve formats them, and then dropped.
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rec, err := reconcile.New(postgres.NewStore(pool), map[string]order.Gateway{"instant": gw}, reconcile.Config{
		Schedule: reconcile.DefaultSchedule, BatchSize: drainBatch, Concurrency: drainConcurrency,
		PollInterval: time.Second, LookupTimeout: 10 * time.Second, NoShowHorizon: 70 * time.Second,
	}, log)
	if err != nil {
		return work{}, err
	}
	// Open the pool's connections before the clock starts, as a running
	// reconciler has them.
	conns := make([]*pgxpool.Conn, 0, drainPoolSize)
	for range drainPoolSize {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return work{}, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	start := time.Now()
	for {
		got, err := rec.RunOnce(ctx)
		if err != nil {
			return work{}, err
		}
		if got == 0 {
			break
		}
	}
	elapsed := time.Since(start)
	if err := b.allPaid(ctx, n, tag); err != nil {
		return work{}, fmt.Errorf("reconciler: %w", err)
	}
	return work{ops: n, perSecond: float64(n) / elapsed.Seconds()}, nil
}

func (b *benchmark) allPaid(ctx context.Context, n int, tag string) error {
	var paid int
	if err := b.db.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE state = 'PAID' AND merchant_reference LIKE 'drain-' || $1::text || '-%'`, tag).Scan(&paid); err != nil {
		return err
	}
	if paid != n {
		return fmt.Errorf("%d of %d orders PAID after the drain", paid, n)
	}
	return nil
}
