package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlepay/settle/internal/delivery"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// deliverBatch is the delivery worker's default batch per merchant, which
// sql/deliver_floor.sql also leases.
const deliverBatch = 32

// Sink is a merchant's endpoint for events out that verifies each
// delivery's signature and counts it: the benchmark's receiver.
type Sink struct {
	// URL is where to POST; Secret the signing secret.
	URL, Secret string
	ok, bad     atomic.Int64
	srv         *http.Server
}

// StartSink starts a Sink on a loopback port.
func StartSink(ctx context.Context) (*Sink, error) {
	lis, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{URL: "http://" + lis.Addr().String() + "/events", Secret: "evsec_bench_0123456789abcdef"}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || delivery.Verify(r.Header.Get(delivery.SignatureHeader), body, []string{s.Secret}, 5*time.Minute) != nil {
			s.bad.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.ok.Add(1)
	})}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// Delivered counts the deliveries that verified; Refused those that did not.
func (s *Sink) Delivered() int64 { return s.ok.Load() }

// Refused counts the deliveries whose signature did not verify.
func (s *Sink) Refused() int64 { return s.bad.Load() }

// Close stops the sink.
func (s *Sink) Close() error { return s.srv.Close() }

// Endpoint is the default merchant's SETTLE_EVENT_WEBHOOKS entry for s.
func (s *Sink) Endpoint() string { return order.DefaultMerchant + " " + s.URL + " " + s.Secret }

// deliverSetupSQL makes n ($1) orders tagged $2, each with one event due
// for delivery: every fourth a refunded order with its refund's
// refund.succeeded event, the others canceled orders with their
// order.canceled event, so that the worker and the floor lease from both
// of the outbox's tables.
var deliverSetupSQL = []string{
	`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state, refunded_minor)
	 SELECT md5('deliver-' || $2::text || '-' || i)::uuid, 'default', 'deliver-' || $2::text || '-' || i, 100, 'GBP', 'tok_ok', 'instant',
	   CASE WHEN i % 4 = 0 THEN 'REFUNDED' ELSE 'CANCELED' END, CASE WHEN i % 4 = 0 THEN 100 ELSE 0 END
	 FROM generate_series(1, $1::int) i`,
	`INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
	 SELECT 'default', md5('deliver-' || $2::text || '-' || i)::uuid, 'PENDING', 'CANCELED', 'cancel', 'bench'
	 FROM generate_series(1, $1::int) i WHERE i % 4 <> 0`,
	`INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, actor, state, outcome, gateway_refund_id)
	 SELECT 'default', md5('deliver-refund-' || $2::text || '-' || i)::uuid, md5('deliver-' || $2::text || '-' || i)::uuid,
	   'deliver-refund-' || $2::text || '-' || i, 0, 100, 'GBP', 'bench', 'SUCCEEDED', 'succeeded', 're_bench'
	 FROM generate_series(1, $1::int) i WHERE i % 4 = 0`,
	`INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor)
	 SELECT 'default', md5('deliver-' || $2::text || '-' || i)::uuid, md5('deliver-refund-' || $2::text || '-' || i)::uuid,
	   'REFUNDING', 'SUCCEEDED', 'succeed', 'bench'
	 FROM generate_series(1, $1::int) i WHERE i % 4 = 0`,
}

// deliveryDrain measures delivery workers POSTing DeliverEvents events of
// one merchant to a local endpoint (one worker, and each count of
// DeliverWorkers), and pgbench running one worker's statements alone
// (sql/deliver_floor.sql, one client: one merchant's lane), Runs times
// each, alternately.
func (b *benchmark) deliveryDrain(ctx context.Context) (*DeliveryDrain, error) {
	n := b.cfg.DeliverEvents
	d := &DeliveryDrain{Events: n, Batch: deliverBatch}
	sink, err := StartSink(ctx)
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	counts := b.cfg.DeliverWorkers
	if len(counts) == 0 {
		counts = []int{1}
	}
	workers := make([][]Measurement, len(counts))
	var floor []Measurement
	for r := range b.cfg.Runs {
		for i, c := range counts {
			if err := b.prepareDeliveries(ctx, n, fmt.Sprintf("w%d-%d", c, r)); err != nil {
				return nil, err
			}
			var profile string
			if b.cfg.Profile && r == b.cfg.Runs-1 {
				profile = filepath.Join(b.dir, fmt.Sprintf("deliver-w%d.pprof", c))
			}
			wr, err := b.measure(ctx, nil, false, func() (work, error) { return b.deliverAll(ctx, sink, n, c, profile) })
			if err != nil {
				return nil, err
			}
			workers[i] = append(workers[i], wr)
			fmt.Fprintf(b.cfg.Log, "bench: delivery run %d/%d: %d worker(s) %.0f events/s\n", r+1, b.cfg.Runs, c, wr.PerSecond)
		}
		if err := b.prepareDeliveries(ctx, n, fmt.Sprintf("f%d", r)); err != nil {
			return nil, err
		}
		fr, err := b.measure(ctx, nil, false, func() (work, error) {
			res, err := b.pg.run(ctx, "deliver_floor.sql", 1, 0, (n+deliverBatch-1)/deliverBatch)
			if err != nil {
				return work{}, err
			}
			return work{ops: n, perSecond: float64(n) / res.elapsed.Seconds(), latencies: res.latencies, clientCPU: res.cpu}, nil
		})
		if err != nil {
			return nil, err
		}
		left, err := b.undelivered(ctx)
		if err != nil {
			return nil, err
		}
		if left != 0 {
			return nil, fmt.Errorf("delivery floor left %d events undelivered", left)
		}
		floor = append(floor, fr)
		fmt.Fprintf(b.cfg.Log, "bench: delivery run %d/%d: its SQL floor %.0f events/s\n", r+1, b.cfg.Runs, fr.PerSecond)
	}
	d.Floor = summarize(floor)
	for i, c := range counts {
		w := summarize(workers[i])
		d.Workers = append(d.Workers, DeliveryWorkers{Workers: c, Series: w, Ratio: ratio(w.Median.PerSecond, d.Floor.Median.PerSecond)})
	}
	d.Worker, d.Ratio = d.Workers[0].Series, d.Workers[0].Ratio
	return d, nil
}

func (b *benchmark) prepareDeliveries(ctx context.Context, n int, tag string) error {
	// The events of the Settle runs (undelivered unless -deliver) are set
	// aside, so that the worker and the floor deliver these n alone.
	for _, table := range []string{"order_events", "refund_events"} {
		if _, err := b.db.pool.Exec(ctx, `UPDATE `+table+` SET deliver_at = NULL WHERE deliver_at IS NOT NULL AND type IS NOT NULL`); err != nil {
			return fmt.Errorf("set earlier events aside: %w", err)
		}
	}
	for _, q := range deliverSetupSQL {
		if _, err := b.db.pool.Exec(ctx, q, n, tag); err != nil {
			return fmt.Errorf("make events: %w", err)
		}
	}
	for _, q := range []string{`VACUUM ANALYZE orders, order_events, refunds, refund_events`, `CHECKPOINT`} {
		if _, err := b.db.pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("make events: %s: %w", q, err)
		}
	}
	return nil
}

func (b *benchmark) undelivered(ctx context.Context) (int, error) {
	var n int
	err := b.db.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM order_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL)
		+ (SELECT count(*) FROM refund_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL)`).Scan(&n)
	return n, err
}

// deliverAll runs workers delivery workers (Run, as settle deliver does),
// in this process, until every one of the n events is recorded delivered;
// with profile set, it writes a CPU profile of this process (the workers
// and the endpoint) there meanwhile.
func (b *benchmark) deliverAll(ctx context.Context, sink *Sink, n, workers int, profile string) (work, error) {
	pool, err := postgres.Open(ctx, b.db.url, int32(4*workers))
	if err != nil {
		return work{}, err
	}
	defer pool.Close()
	var (
		recorded atomic.Int64
		done     = make(chan struct{})
	)
	cfg := delivery.Config{
		Endpoints: []delivery.Endpoint{{MerchantID: order.DefaultMerchant, URL: sink.URL, Secrets: []string{sink.Secret}}},
		OnRecord: func(r order.DeliveryRecord) {
			if r.Outcome == order.DeliveryDelivered && recorded.Add(1) == int64(n) {
				close(done)
			}
		},
	}
	ds := make([]*delivery.Deliverer, workers)
	for i := range ds {
		if ds[i], err = delivery.New(postgres.NewStore(pool), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil))); err != nil {
			return work{}, err
		}
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return work{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return work{}, err
		}
		defer pprof.StopCPUProfile()
	}
	before := sink.Delivered()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for _, d := range ds {
		wg.Go(func() { _ = d.Run(runCtx) })
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return work{}, err
	}
	if got := sink.Delivered() - before; got != int64(n) {
		return work{}, fmt.Errorf("the endpoint verified %d deliveries of %d events (%d refused)", got, n, sink.Refused())
	}
	return work{ops: n, perSecond: float64(n) / elapsed.Seconds()}, nil
}
