// Package bench measures Settle against the database's own limit, in one
// run on one machine: a throwaway durable PostgreSQL, pgbench running the
// tightest SQL that does Settle's work per order (the floor) and the same
// work as naive multi-statement transactions, a gRPC health check of the
// server (the transport's floor), and Settle's server (`settle
// bench-server`: serve with the Instant gateway) as a subprocess under a
// closed-loop gRPC load client, at several concurrencies; then one
// reconciler draining due orders against pgbench running its settle
// statement. `settle bench` runs it; sql/README.md says how to read it.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"
)

// Config is what to measure and how long.
type Config struct {
	// Concurrency lists the numbers of concurrent clients to measure at.
	Concurrency []int
	// OneCallConcurrency lists those of them at which the one-call path
	// (CreateAndChargeOrder) is also measured, against its own floor.
	OneCallConcurrency []int
	// RefundConcurrency lists those of them at which refunds (RefundOrder)
	// are also measured, against their own floor.
	RefundConcurrency []int
	// CaptureConcurrency lists those of them at which captures
	// (CaptureOrder) are also measured, against their own floor.
	CaptureConcurrency []int
	// VoidConcurrency lists those of them at which holds placed and
	// released (CreateAndChargeOrder with capture manual, then VoidOrder)
	// are also measured, against their own floor.
	VoidConcurrency []int
	// ColdConcurrency lists those of them at which the order path (and
	// the one-call path, where it is measured) is also measured from a
	// cold start: each run on a new, just-migrated database and a new
	// server, with no warm-up, against the warm runs.
	ColdConcurrency []int
	// Duration is the length of one run of the floor, the naive floor and
	// Settle; TransportDuration that of one run of the health checks.
	Duration, TransportDuration time.Duration
	// Runs is how many runs each point is the median of.
	Runs int
	// DrainOrders is how many due orders the reconciler drains (0: skip).
	DrainOrders int
	// DeliverEvents is how many events the delivery worker delivers
	// against its floor (0: skip).
	DeliverEvents int
	// DeliverWorkers lists the numbers of delivery workers that deliver
	// them, each against the same floor (empty: one).
	DeliverWorkers []int
	// Deliver makes the server deliver its events (order.paid, …) to a
	// local endpoint during the Settle runs, for a comparison with
	// delivery off.
	Deliver bool
	// Standby measures with a synchronous standby streaming from the
	// throwaway PostgreSQL: every commit waits for it.
	Standby bool
	// Server runs `settle bench-server`.
	Server Server
	// ClientProcs is GOMAXPROCS of this process while its load client
	// runs (0: leave it). The client shares the machine's CPUs with the
	// server and PostgreSQL, as pgbench does with PostgreSQL; one P
	// spends less of them on scheduling than two.
	ClientProcs int
	// StatementCounts loads pg_stat_statements (which needs a restart of
	// the throwaway cluster) to count round trips.
	StatementCounts bool
	// Dir keeps the server logs; empty means a temp dir removed at the end.
	Dir string
	// Profile writes a CPU profile of the server during the last Settle
	// run of each point into Dir, as serve-c<N>.pprof, and one of this
	// process during the last delivery run of each number of workers, as
	// deliver-w<N>.pprof.
	Profile bool
	// Log receives progress lines; nil means none.
	Log io.Writer
	// Citus runs Settle alone (no SQL floors, no transport series, no
	// drain) against a throwaway Citus cluster, a coordinator and two
	// workers, and logs each node's CPU per order.
	Citus bool
}

func (c *Config) validate() error {
	if len(c.Concurrency) == 0 {
		return errors.New("bench: no concurrency to measure at")
	}
	for _, n := range c.Concurrency {
		if n < 1 || n > 1024 {
			return fmt.Errorf("bench: concurrency %d is not between 1 and 1024", n)
		}
	}
	for _, n := range c.OneCallConcurrency {
		if !slices.Contains(c.Concurrency, n) {
			return fmt.Errorf("bench: one-call concurrency %d is not one of the concurrencies measured", n)
		}
	}
	for _, n := range c.RefundConcurrency {
		if !slices.Contains(c.Concurrency, n) {
			return fmt.Errorf("bench: refund concurrency %d is not one of the concurrencies measured", n)
		}
	}
	for _, n := range c.CaptureConcurrency {
		if !slices.Contains(c.Concurrency, n) {
			return fmt.Errorf("bench: capture concurrency %d is not one of the concurrencies measured", n)
		}
	}
	for _, n := range c.VoidConcurrency {
		if !slices.Contains(c.Concurrency, n) {
			return fmt.Errorf("bench: void concurrency %d is not one of the concurrencies measured", n)
		}
	}
	for _, n := range c.ColdConcurrency {
		if !slices.Contains(c.Concurrency, n) {
			return fmt.Errorf("bench: cold concurrency %d is not one of the concurrencies measured", n)
		}
	}
	if c.Duration < time.Second || c.TransportDuration < time.Second {
		return errors.New("bench: durations must be at least 1s (pgbench counts whole seconds)")
	}
	if c.Runs < 1 {
		return errors.New("bench: runs must be at least 1")
	}
	if c.ClientProcs < 0 {
		return errors.New("bench: client procs must not be negative")
	}
	for _, n := range c.DeliverWorkers {
		if n < 1 || n > 64 {
			return fmt.Errorf("bench: %d delivery workers is not between 1 and 64", n)
		}
	}
	if c.DrainOrders < 0 {
		return errors.New("bench: drain orders must not be negative")
	}
	if c.Profile && c.Dir == "" {
		return errors.New("bench: a profile needs a directory to keep it in")
	}
	if c.Server.Binary == "" {
		return errors.New("bench: no settle binary to run as the server")
	}
	return nil
}

// Run runs the benchmark and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "settle-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b := &benchmark{cfg: cfg, dir: dir}
	rep := &Report{
		Started:           time.Now().UTC().Truncate(time.Second),
		Concurrency:       cfg.Concurrency,
		Duration:          cfg.Duration.String(),
		TransportDuration: cfg.TransportDuration.String(),
		Runs:              cfg.Runs,
		CPUs:              runtime.NumCPU(),
		GoVersion:         runtime.Version(),
		ClientProcs:       cfg.ClientProcs,
		ServerBinary:      cfg.Server.Binary,
		ServerArgs:        cfg.Server.Args,
		ServerEnv:         cfg.Server.Env,
		LoadAverageStart:  loadAverage(),
	}
	if cfg.Deliver {
		sink, err := StartSink(ctx)
		if err != nil {
			return nil, err
		}
		defer sink.Close()
		cfg.Server.Env = append(slices.Clone(cfg.Server.Env), "SETTLE_EVENT_WEBHOOKS="+sink.Endpoint())
		b.cfg = cfg
		rep.DeliveryOn = true
		defer func() { rep.Delivered = sink.Delivered() }()
	}
	var db *benchDB
	var err error
	if cfg.Citus {
		fmt.Fprintf(cfg.Log, "bench: starting a throwaway Citus cluster, a coordinator and two workers (fsync and synchronous_commit on)...\n")
		db, err = startCitusDB(ctx)
		cfg.DrainOrders, cfg.OneCallConcurrency = 0, nil
		b.cfg = cfg
	} else {
		fmt.Fprintf(cfg.Log, "bench: starting a throwaway PostgreSQL (fsync and synchronous_commit on, synchronous standby %v)...\n", cfg.Standby)
		db, err = startDB(ctx, cfg.StatementCounts, cfg.Standby)
	}
	if err != nil {
		return nil, err
	}
	defer db.close()
	b.db = db
	rep.PostgreSQL, rep.RoundTripsCounted = db.version, db.pgss
	if b.pg, err = newPgbench(dir, db.cluster.Dir(), dbName); err != nil {
		return nil, err
	}
	rep.Pgbench = b.pg.version
	for _, c := range cfg.Concurrency {
		p, err := b.point(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("concurrency %d: %w", c, err)
		}
		rep.Points = append(rep.Points, p)
	}
	if cfg.DeliverEvents > 0 {
		d, err := b.deliveryDrain(ctx)
		if err != nil {
			return nil, fmt.Errorf("delivery drain: %w", err)
		}
		rep.Delivery = d
	}
	if cfg.DrainOrders > 0 {
		d, err := b.drain(ctx)
		if err != nil {
			return nil, fmt.Errorf("reconciler drain: %w", err)
		}
		rep.Drain = d
	}
	rep.LoadAverageEnd = loadAverage()
	rep.Targets = targets(rep)
	return rep, nil
}

type benchmark struct {
	cfg Config
	dir string
	db  *benchDB
	pg  *pgbench
	// seq makes the merchant references of every Settle run unique.
	seq int
}

// point measures one concurrency: Runs rounds of floor, naive floor,
// transport and Settle (and, when asked, the one-call floor and Settle's
// one-call path), interleaved so that the machine's noise falls on each
// alike, against one server started for the point.
func (b *benchmark) point(ctx context.Context, c int) (Point, error) {
	p := Point{Concurrency: c}
	srv, err := startServer(ctx, b.cfg.Server, b.db.url, b.dir, "serve-c"+strconv.Itoa(c), b.cfg.Profile)
	if err != nil {
		return p, err
	}
	defer func() { _ = srv.stop() }()
	// Warm up: connections in the server's pool, their prepared
	// statements, the HTTP/2 connection.
	b.seq++
	if _, err := b.load(ctx, c, min(2*time.Second, b.cfg.Duration/3), orderOp(srv.conn, fmt.Sprintf("warm%d", b.seq))); err != nil {
		return p, fmt.Errorf("warm-up: %w\nserver log: %s", err, srv.logTail())
	}
	var floor, naive, transport, settle, oneFloor, oneSettle []Measurement
	var coldOrders, coldOneCall []ColdRun
	oneCall := slices.Contains(b.cfg.OneCallConcurrency, c)
	cold := slices.Contains(b.cfg.ColdConcurrency, c)
	// coldRun adds a cold run of round r to runs.
	coldRun := func(r int, path string, newOp func(*grpc.ClientConn, string) func(int) op, runs *[]ColdRun) error {
		cr, err := b.coldRun(ctx, c, newOp)
		if err != nil {
			return fmt.Errorf("cold %s: %w", path, err)
		}
		fmt.Fprintf(b.cfg.Log, "bench: c=%d run %d/%d: cold %s: first %s %.0f/s (per %s: %s), sequential scans: %s; rows fetched by index per order: %s\n",
			c, r+1, b.cfg.Runs, path, b.firstWindow(), cr.FirstPerSecond, coldSlice, perSlice(cr.SlicesPerSecond),
			scansText(cr.Tables), fetchedText(cr.Tables, cr.Ops))
		*runs = append(*runs, cr)
		return nil
	}
	var paths []floorPath
	held := map[string][]string{} // each path's orders, by name
	for _, fp := range b.floorPaths() {
		if !slices.Contains(fp.clients, c) || b.cfg.Citus {
			continue
		}
		if fp.held != nil {
			if err := fp.floorRows(ctx, c); err != nil {
				return p, err
			}
			b.seq++
			orders, err := fp.held(ctx, srv.conn, fmt.Sprintf("bench%d", b.seq), c)
			if err != nil {
				return p, fmt.Errorf("%s series: %w\nserver log: %s", fp.name, err, srv.logTail())
			}
			held[fp.name] = orders
		}
		paths = append(paths, fp)
	}
	pathFloor, pathSettle := make([][]Measurement, len(paths)), make([][]Measurement, len(paths))
	for r := range b.cfg.Runs {
		if b.cfg.Citus {
			sr, err := b.citusRun(ctx, srv, c)
			if err != nil {
				return p, err
			}
			settle = append(settle, sr)
			if cold {
				if err := coldRun(r, "orders", orderOp, &coldOrders); err != nil {
					return p, err
				}
			}
			continue
		}
		fr, err := b.measure(ctx, srv, true, func() (work, error) { return b.pgbenchWork(ctx, "floor.sql", c) })
		if err != nil {
			return p, fmt.Errorf("floor: %w", err)
		}
		nr, err := b.measure(ctx, srv, true, func() (work, error) { return b.pgbenchWork(ctx, "naive.sql", c) })
		if err != nil {
			return p, fmt.Errorf("naive: %w", err)
		}
		tr, err := b.measure(ctx, srv, false, func() (work, error) {
			return loadWork(b.load(ctx, c, b.cfg.TransportDuration, healthOp(srv.conn)))
		})
		if err != nil {
			return p, fmt.Errorf("transport: %w\nserver log: %s", err, srv.logTail())
		}
		b.seq++
		prefix := fmt.Sprintf("bench%d", b.seq)
		var profiled <-chan error
		if b.cfg.Profile && r == b.cfg.Runs-1 {
			profiled = srv.profile(ctx, b.cfg.Duration-time.Second, filepath.Join(b.dir, fmt.Sprintf("serve-c%d.pprof", c)))
		}
		sr, err := b.measure(ctx, srv, true, func() (work, error) {
			return loadWork(b.load(ctx, c, b.cfg.Duration, orderOp(srv.conn, prefix)))
		})
		if profiled != nil {
			err = errors.Join(err, <-profiled)
		}
		if err != nil {
			return p, fmt.Errorf("settle: %w\nserver log: %s", err, srv.logTail())
		}
		rss, hwm, err := procMemory(srv.pid())
		if err != nil {
			return p, err
		}
		sr.ServerRSSMB, sr.ServerPeakRSSMB = mb(rss), mb(hwm)
		fr.ServerCPUCores, nr.ServerCPUCores = 0, 0 // the server idles meanwhile: not its cost
		fr.ServerCPUPerOpUs, nr.ServerCPUPerOpUs = 0, 0
		floor, naive, transport, settle = append(floor, fr), append(naive, nr), append(transport, tr), append(settle, sr)
		fmt.Fprintf(b.cfg.Log, "bench: c=%d run %d/%d: floor %.0f/s, naive %.0f/s, health checks %.0f/s, settle %.0f/s (p50 %.2fms, p99 %.2fms; refused %.0f/s), other load %.2f cores\n",
			c, r+1, b.cfg.Runs, fr.PerSecond, nr.PerSecond, tr.PerSecond, sr.PerSecond, sr.P50Ms, sr.P99Ms, sr.RefusedPerSecond, sr.OtherCPUCores)
		if cold {
			if err := coldRun(r, "orders", orderOp, &coldOrders); err != nil {
				return p, err
			}
		}
		for i, fp := range paths {
			fr, err := b.measure(ctx, srv, true, func() (work, error) { return b.pgbenchWork(ctx, fp.script, c) })
			if err != nil {
				return p, fmt.Errorf("%s floor: %w", fp.name, err)
			}
			b.seq++
			prefix := fmt.Sprintf("bench%d", b.seq)
			sr, err := b.measure(ctx, srv, true, func() (work, error) {
				return loadWork(b.load(ctx, c, b.cfg.Duration, fp.op(srv.conn, prefix, held[fp.name])))
			})
			if err != nil {
				return p, fmt.Errorf("settle %s: %w\nserver log: %s", fp.name, err, srv.logTail())
			}
			fr.ServerCPUCores, fr.ServerCPUPerOpUs = 0, 0
			pathFloor[i], pathSettle[i] = append(pathFloor[i], fr), append(pathSettle[i], sr)
			fmt.Fprintf(b.cfg.Log, "bench: c=%d run %d/%d: %s floor %.0f/s, settle %s %.0f/s (p50 %.2fms)\n",
				c, r+1, b.cfg.Runs, fp.name, fr.PerSecond, fp.name, sr.PerSecond, sr.P50Ms)
		}
		if !oneCall {
			continue
		}
		ofr, err := b.measure(ctx, srv, true, func() (work, error) { return b.pgbenchWork(ctx, "floor_one_call.sql", c) })
		if err != nil {
			return p, fmt.Errorf("one-call floor: %w", err)
		}
		b.seq++
		prefix = fmt.Sprintf("bench%d", b.seq)
		osr, err := b.measure(ctx, srv, true, func() (work, error) {
			return loadWork(b.load(ctx, c, b.cfg.Duration, oneCallOp(srv.conn, prefix)))
		})
		if err != nil {
			return p, fmt.Errorf("settle one-call: %w\nserver log: %s", err, srv.logTail())
		}
		ofr.ServerCPUCores, ofr.ServerCPUPerOpUs = 0, 0
		oneFloor, oneSettle = append(oneFloor, ofr), append(oneSettle, osr)
		fmt.Fprintf(b.cfg.Log, "bench: c=%d run %d/%d: one-call floor %.0f/s, settle one-call %.0f/s (p50 %.2fms)\n",
			c, r+1, b.cfg.Runs, ofr.PerSecond, osr.PerSecond, osr.P50Ms)
		if cold {
			if err := coldRun(r, "one call", oneCallOp, &coldOneCall); err != nil {
				return p, err
			}
		}
	}
	if b.cfg.Citus {
		p.Settle = summarize(settle) // the only series measured on Citus, with its cold start
		if cold {
			p.Cold = coldSeries(coldOrders, b.firstWindow(), p.Settle.Median.PerSecond)
		}
		return p, nil
	}
	p.Floor, p.Naive, p.Transport, p.Settle = summarize(floor), summarize(naive), summarize(transport), summarize(settle)
	p.SettleVsFloor = ratio(p.Settle.Median.PerSecond, p.Floor.Median.PerSecond)
	p.SettleVsNaive = ratio(p.Settle.Median.PerSecond, p.Naive.Median.PerSecond)
	for i, fp := range paths {
		oc := &OneCall{Floor: summarize(pathFloor[i]), Settle: summarize(pathSettle[i])}
		oc.SettleVsFloor = ratio(oc.Settle.Median.PerSecond, oc.Floor.Median.PerSecond)
		*fp.result(&p) = oc
	}
	if oneCall {
		p.OneCall = &OneCall{Floor: summarize(oneFloor), Settle: summarize(oneSettle)}
		p.OneCall.SettleVsFloor = ratio(p.OneCall.Settle.Median.PerSecond, p.OneCall.Floor.Median.PerSecond)
	}
	if cold {
		p.Cold = coldSeries(coldOrders, b.firstWindow(), p.Settle.Median.PerSecond)
		if oneCall {
			p.OneCallCold = coldSeries(coldOneCall, b.firstWindow(), p.OneCall.Settle.Median.PerSecond)
		}
	}
	return p, nil
}

// load runs the load client with the configured GOMAXPROCS.
func (b *benchmark) load(ctx context.Context, c int, d time.Duration, newOp func(int) op) (loadResult, error) {
	if b.cfg.ClientProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(b.cfg.ClientProcs))
	}
	return runLoad(ctx, c, d, newOp)
}

// work is what one run did, as its client saw it.
type work struct {
	ops       int
	perSecond float64
	latencies []time.Duration
	// clientCPU is the client's CPU time; zero means "this process's".
	clientCPU time.Duration
	// roundTrips per op, when the client knows them; zero means "count
	// the statements PostgreSQL ran".
	roundTrips int
	// refused counts operations the server refused for overload.
	refused int
}

// maxPgbenchClients bounds the SQL floors' pgbench clients: each holds a
// connection of the throwaway PostgreSQL (max_connections 300, which the
// server's pool and the bench's own share). Past it, at the overload
// points (256 clients and more), the floor is the floor at this many:
// PostgreSQL itself would refuse more connections.
const maxPgbenchClients = 256

func (b *benchmark) pgbenchWork(ctx context.Context, script string, c int) (work, error) {
	res, err := b.pg.run(ctx, script, min(c, maxPgbenchClients), b.cfg.Duration, 0)
	if err != nil {
		return work{}, err
	}
	trips, err := scriptRoundTrips(script)
	if err != nil {
		return work{}, err
	}
	return work{ops: res.ops, perSecond: res.tps, latencies: res.latencies, clientCPU: res.cpu, roundTrips: trips}, nil
}

func loadWork(res loadResult, err error) (work, error) {
	if err != nil {
		return work{}, err
	}
	return work{ops: res.ops, perSecond: float64(res.ops) / res.elapsed.Seconds(), latencies: res.latencies, refused: res.refused}, nil
}

// measure runs fn between two readings of the counters: commits, round
// trips, and the CPU of client, server, PostgreSQL and the rest of the
// machine. With checkpoint, the database checkpoints first.
func (b *benchmark) measure(ctx context.Context, srv *serverProc, checkpoint bool, fn func() (work, error)) (Measurement, error) {
	if checkpoint {
		if err := b.db.checkpoint(ctx); err != nil {
			return Measurement{}, err
		}
	}
	before, err := b.db.counters(ctx)
	if err != nil {
		return Measurement{}, err
	}
	var srvBefore time.Duration
	if srv != nil {
		if srvBefore, err = procCPU(srv.pid()); err != nil {
			return Measurement{}, err
		}
	}
	machineBefore, err := machineCPU()
	if err != nil {
		return Measurement{}, err
	}
	selfBefore, start := selfCPU(), time.Now()

	w, err := fn()
	if err != nil {
		return Measurement{}, err
	}

	wall, selfAfter := time.Since(start), selfCPU()
	machineAfter, err := machineCPU()
	if err != nil {
		return Measurement{}, err
	}
	var srvCPU time.Duration
	if srv != nil {
		after, err := procCPU(srv.pid())
		if err != nil {
			return Measurement{}, err
		}
		srvCPU = after - srvBefore
	}
	after, err := b.db.counters(ctx)
	if err != nil {
		return Measurement{}, err
	}
	if w.ops == 0 {
		return Measurement{}, errors.New("no operation completed")
	}
	clientCPU := w.clientCPU
	if clientCPU == 0 {
		clientCPU = selfAfter - selfBefore
	}
	// The client's CPU is over its own run; everything else over the wall
	// time between the readings.
	ops, secs := float64(w.ops), wall.Seconds()
	dbCPU := after.cpu - before.cpu
	r := Measurement{
		Ops:              w.ops,
		Seconds:          round(secs, 3),
		PerSecond:        round(w.perSecond, 1),
		Refused:          w.refused,
		RefusedPerSecond: round(float64(w.refused)/secs, 1),
		CommitsPerOp:     round(float64(after.xid-before.xid)/ops, 3),
		RoundTripsPerOp:  -1,
		StatementsPerOp:  -1,
		ClientCPUCores:   round(clientCPU.Seconds()/secs, 3),
		ServerCPUCores:   round(srvCPU.Seconds()/secs, 3),
		DBCPUCores:       round(dbCPU.Seconds()/secs, 3),
		OtherCPUCores:    round(max(0, (machineAfter-machineBefore-clientCPU-srvCPU-dbCPU).Seconds()/secs), 3),
		ClientCPUPerOpUs: round(float64(clientCPU.Microseconds())/ops, 1),
		ServerCPUPerOpUs: round(float64(srvCPU.Microseconds())/ops, 1),
		DBCPUPerOpUs:     round(float64(dbCPU.Microseconds())/ops, 1),
	}
	if before.calls >= 0 {
		r.StatementsPerOp = round(float64(after.calls-before.calls)/ops, 3)
		r.RoundTripsPerOp = r.StatementsPerOp
	}
	if w.roundTrips > 0 {
		r.RoundTripsPerOp = float64(w.roundTrips)
	}
	r.P50Ms, r.P95Ms, r.P99Ms = percentileMs(w.latencies, 0.50), percentileMs(w.latencies, 0.95), percentileMs(w.latencies, 0.99)
	return r, nil
}

func percentileMs(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return round(float64(s[i].Microseconds())/1000, 3)
}

func mb(bytes int64) float64 { return round(float64(bytes)/(1<<20), 1) }

// citusRun is one Settle run on Citus, with the CPU per order of each node.
func (b *benchmark) citusRun(ctx context.Context, srv *serverProc, c int) (Measurement, error) {
	b.seq++
	prefix := fmt.Sprintf("bench%d", b.seq)
	before, err := b.db.nodeCPU()
	if err != nil {
		return Measurement{}, err
	}
	sr, err := b.measure(ctx, srv, true, func() (work, error) {
		return loadWork(b.load(ctx, c, b.cfg.Duration, orderOp(srv.conn, prefix)))
	})
	if err != nil {
		return sr, fmt.Errorf("settle: %w\nserver log: %s", err, srv.logTail())
	}
	after, err := b.db.nodeCPU()
	if err != nil {
		return sr, err
	}
	line := fmt.Sprintf("bench: c=%d citus: settle %.0f/s (p50 %.2fms), CPU per order:", c, sr.PerSecond, sr.P50Ms)
	for i := range after {
		name := fmt.Sprintf("worker %d", i)
		if i == 0 {
			name = "coordinator"
		}
		line += fmt.Sprintf(" %s %.0fus", name, float64((after[i]-before[i]).Microseconds())/float64(max(sr.Ops, 1)))
	}
	fmt.Fprintln(b.cfg.Log, line+fmt.Sprintf(", server %.0fus", sr.ServerCPUPerOpUs))
	return sr, nil
}

// floorPath is an operation measured against its own SQL floor at some of
// the concurrencies, after the order path in each run.
type floorPath struct {
	name    string // in the log: "refunds"
	clients []int
	script  string // its floor, in sql/
	// held, when set, makes one order for each of c workers to work on
	// through conn (prefix makes their references unique), and floorRows
	// the floor's, one for each of c pgbench clients.
	held      func(ctx context.Context, conn *grpc.ClientConn, prefix string, c int) ([]string, error)
	floorRows func(ctx context.Context, c int) error
	// op is the load client's operation on held's orders.
	op func(conn *grpc.ClientConn, prefix string, orders []string) func(int) op
	// result is where the point keeps the series.
	result func(*Point) **OneCall
}

// floorPaths are the operations measured against their own floors.
func (b *benchmark) floorPaths() []floorPath {
	return []floorPath{{
		// One PAID order per pgbench client and per worker, with more
		// than any run refunds.
		name: "refunds", clients: b.cfg.RefundConcurrency, script: "floor_refund.sql",
		held: refundableOrders, floorRows: b.db.refundFloorOrders, op: refundOp,
		result: func(p *Point) **OneCall { return &p.Refund },
	}, {
		// One AUTHORIZED order per pgbench client and per worker, holding
		// more than any run captures.
		name: "captures", clients: b.cfg.CaptureConcurrency, script: "floor_capture.sql",
		held: authorizedOrders, floorRows: b.db.captureFloorOrders, op: captureOp,
		result: func(p *Point) **OneCall { return &p.Capture },
	}, {
		// Each operation authorizes its own order.
		name: "voids", clients: b.cfg.VoidConcurrency, script: "floor_void.sql",
		op:     func(conn *grpc.ClientConn, prefix string, _ []string) func(int) op { return voidOp(conn, prefix) },
		result: func(p *Point) **OneCall { return &p.Void },
	}}
}
