// Package chaos is Settle's chaos harness, in the spirit of Jepsen's bank
// test: it runs Settle for real (several `settle serve` replicas and
// `settle reconcile` sidecars as subprocesses, on a durable throwaway
// PostgreSQL, against the gateway simulator with seeded random faults that
// does not deduplicate), drives concurrent checkout clients at it over
// gRPC, and meanwhile kills, freezes and restarts everything on a schedule
// drawn from a seed. At the end it stops the faults, lets the reconcilers
// settle what is left, and checks from the gateway's ledger, the database
// and what the clients were told that no money was lost or taken twice
// (the invariants are listed with InvOneCharge and the constants after it).
//
// The fault schedule is a function of the seed alone, so a failing seed can
// be run again with the same faults at the same instants; the interleaving
// of the workload with them is not deterministic, so a replay reproduces
// the conditions of a failure, not necessarily the failure.
//
// # The bound on freezes
//
// A replica is frozen (SIGSTOP) for longer than a claim's lease (gateway
// timeout + claim grace), so that reconcilers look at its orders while it
// is stopped, but for less than the no-show horizon minus the longest time
// the gateway hides a charge it made from lookups (a slow answer, a held
// timeout) and a margin: with the defaults, between 1.8s and 2.5s against a
// 5s horizon. A process frozen with a charge request half-sent can deliver
// it when it resumes; if the charge became visible only after the horizon,
// a reconciler would already have taken "no charge at the gateway" to mean
// "never charged" and let the customer pay again, and the late request
// would have charged a second time. No protocol without idempotency keys
// can tell a request that is late from one that never comes, which is why
// the horizon must exceed the longest pause a deployment can suffer plus
// the gateway's longest hidden window (the gateway call's deadline, fixed
// before the claim, bounds the pause of a process that is merely slow
// rather than stopped).
package chaos

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
)

// The timings of the processes under test: short, so that a run of a few
// minutes sees many leases expire and many reconciliations.
const (
	gatewayTimeout = time.Second
	claimGrace     = 500 * time.Millisecond
	noShowHorizon  = 5 * time.Second
	recheckStep    = 200 * time.Millisecond
	recheckSteps   = 40
	pollInterval   = 100 * time.Millisecond
	// simHold is how long the simulator holds a "timeout" answer (longer
	// than the gateway timeout) and, for some, hides the charge from
	// lookups.
	simHold = 1500 * time.Millisecond
	// merchant is the merchant of the clients' API key.
	merchant = "chaos"
	// quiesceTimeout bounds the wait for the reconcilers to settle every
	// CHARGING order at the end.
	quiesceTimeout = 60 * time.Second
)

// Config configures a run. Zero fields take the defaults noted.
type Config struct {
	// Binary is the settle binary run as replicas and reconcilers.
	Binary string
	// Env is added to the environment of every process run from Binary.
	Env []string
	// Seed decides the fault schedule and the simulator's faults.
	Seed uint64
	// Duration is how long the clients run and faults are injected
	// (default 2m). Settling and checking take some seconds more.
	Duration time.Duration
	// Clients is the number of concurrent checkout clients (default 16).
	Clients int
	// Orders is how many orders the clients aim to create over Duration
	// (default 10 a second); fewer are created when Settle is slower.
	Orders int
	// Replicas and Reconcilers are the numbers of `settle serve` and
	// `settle reconcile` processes (defaults 3 and 2).
	Replicas, Reconcilers int
	// Faults are the fault rates (zero value: DefaultFaults).
	Faults Faults
	// Gateway are the simulator's fault rates (zero value: DefaultGateway).
	Gateway sim.RandomFaults
	// LogDir receives every process's log; default a temporary directory,
	// removed after a run with nothing to report.
	LogDir string
	// Log receives the run's progress: each fault as it happens, every
	// violation with the order's history. Nil discards it.
	Log io.Writer
}

// DefaultGateway are the simulator's fault rates of a run that does not
// set them: every kind of fault, often, and half the timeouts hidden from
// lookups while the charge is "landing".
func DefaultGateway() sim.RandomFaults {
	return sim.RandomFaults{Decline: 0.05, Timeout: 0.03, FiveXXAfterCharge: 0.03, DropAfterCharge: 0.03,
		FiveXXNoCharge: 0.03, Slow: 0.1, SlowMax: 300 * time.Millisecond, LookupNotFoundWhileInFlight: 0.5}
}

// Summary is what a run did and found.
type Summary struct {
	Seed uint64
	// Orders counts the orders CreateOrder answered with.
	Orders int
	// Charges counts the ChargeOrder calls the clients made.
	Charges int
	// Kills counts processes killed with SIGKILL, by the harness or by an
	// armed failpoint.
	Kills int
	// Failpoints counts the firings of each failpoint.
	Failpoints map[string]int
	// Exits counts processes that exited by themselves otherwise (such as a
	// replica refused at start while the database was down).
	Exits        int
	Freezes      int
	DBRestarts   int
	BackendKills int
	// States counts the orders in each state at the end.
	States map[string]int
	// Charged counts the gateway's successful charges.
	Charged int
	// Violations are the broken invariants: the run failed.
	Violations []Violation
	// Problems are what else went wrong: a failpoint that never fired, a
	// data race or a panic in a process's log. The run failed.
	Problems []string
	// LogDir holds the logs, when they were kept.
	LogDir  string
	Elapsed time.Duration
}

// OK reports whether the run found nothing wrong.
func (s Summary) OK() bool { return len(s.Violations) == 0 && len(s.Problems) == 0 }

// String is the run's one summary line.
func (s Summary) String() string {
	line := fmt.Sprintf("chaos: seed=%d orders=%d charges=%d kills=%d freezes=%d db_restarts=%d backend_kills=%d violations=%d",
		s.Seed, s.Orders, s.Charges, s.Kills, s.Freezes, s.DBRestarts, s.BackendKills, len(s.Violations))
	if len(s.Violations) > 0 {
		n := map[int]int{}
		for _, v := range s.Violations {
			n[v.Invariant]++
		}
		var parts []string
		for _, inv := range slices.Sorted(maps.Keys(n)) {
			parts = append(parts, fmt.Sprintf("%d:%s=%d", inv, invariantNames[inv], n[inv]))
		}
		line += " (" + strings.Join(parts, " ") + ")"
	}
	if len(s.Problems) > 0 {
		line += fmt.Sprintf(" problems=%d", len(s.Problems))
	}
	return line
}

// Plan returns the fault schedule a run with cfg would follow.
func Plan(cfg Config) ([]Fault, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return plan(cfg.Seed, cfg.planParams()), nil
}

func (c *Config) defaults() error {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Orders <= 0 {
		c.Orders = int(10 * c.Duration.Seconds())
	}
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.Reconcilers <= 0 {
		c.Reconcilers = 2
	}
	if c.Faults == (Faults{}) {
		c.Faults = DefaultFaults()
	}
	if c.Gateway == (sim.RandomFaults{}) {
		c.Gateway = DefaultGateway()
	}
	if c.Gateway.SlowMax <= 0 {
		c.Gateway.SlowMax = DefaultGateway().SlowMax
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Gateway.SlowMax > gatewayTimeout/2 {
		return fmt.Errorf("chaos: the slowest gateway answer (%s) must be well under the gateway timeout (%s)", c.Gateway.SlowMax, gatewayTimeout)
	}
	if lo, hi := c.freezeBounds(); hi <= lo {
		return fmt.Errorf("chaos: no freeze fits between the lease (%s) and the no-show horizon (%s)", lo, hi)
	}
	return nil
}

// freezeBounds are the shortest and longest freeze: past a claim's lease,
// and short enough that a request sent on waking is charged, and visible
// to lookups, before the no-show horizon (see the package documentation).
func (c *Config) freezeBounds() (lo, hi time.Duration) {
	return gatewayTimeout + claimGrace + 300*time.Millisecond, noShowHorizon - c.hiddenFor() - time.Second
}

// hiddenFor is the longest the simulator hides a charge it made from
// lookups: a slow answer's delay, or a held timeout's when some are hidden.
func (c *Config) hiddenFor() time.Duration {
	if c.Gateway.LookupNotFoundWhileInFlight > 0 && c.Gateway.Timeout > 0 {
		return max(c.Gateway.SlowMax, simHold)
	}
	return c.Gateway.SlowMax
}

func (c *Config) planParams() planParams {
	lo, hi := c.freezeBounds()
	return planParams{duration: c.Duration, replicas: c.Replicas, reconcilers: c.Reconcilers, faults: c.Faults,
		freezeMin: lo, freezeMax: hi}
}

// harness is one run.
type harness struct {
	cfg     Config
	dir     string
	start   atomic.Int64 // unix nanoseconds: the start of the run, then of the workload
	cluster *pgcluster.Cluster
	dbName  string
	pool    *pgxpool.Pool // the harness's own, named settle-chaos
	dbMu    sync.Mutex    // one database restart at a time

	logMu   sync.Mutex
	logFile *os.File

	mu  sync.Mutex
	sum Summary

	procs    map[string]*process
	replicas []*process
	recons   []*process
}

// Run runs Settle under chaos as cfg says and checks the invariants. Its
// error is for a run that could not be carried out (no PostgreSQL, no
// binary); what the run found is in the Summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.defaults(); err != nil {
		return Summary{}, err
	}
	if cfg.Binary == "" {
		return Summary{}, errors.New("chaos: no settle binary to run")
	}
	h := &harness{cfg: cfg, procs: map[string]*process{}, dbName: "settle_chaos"}
	h.start.Store(time.Now().UnixNano())
	began := time.Now()
	h.sum = Summary{Seed: cfg.Seed, Failpoints: map[string]int{}, States: map[string]int{}}
	var err error
	keepDir := cfg.LogDir != ""
	if h.dir = cfg.LogDir; h.dir == "" {
		h.dir, err = os.MkdirTemp("", "settle-chaos-")
	} else {
		err = os.MkdirAll(h.dir, 0o755)
	}
	if err != nil {
		return h.sum, err
	}
	if h.logFile, err = os.Create(filepath.Join(h.dir, "chaos.log")); err != nil {
		return h.sum, err
	}
	err = h.run(ctx)
	sum := h.summary()
	sum.Elapsed = time.Since(began)
	if err != nil {
		sum.Problems = append(sum.Problems, "harness: "+err.Error())
	}
	if !sum.OK() || keepDir {
		sum.LogDir = h.dir
		h.logf("logs are in %s", h.dir)
	}
	h.logFile.Close()
	if sum.LogDir == "" {
		os.RemoveAll(h.dir)
	}
	return sum, err
}

func (h *harness) run(ctx context.Context) error {
	cfg := h.cfg
	schedule := plan(cfg.Seed, cfg.planParams())
	h.logf("seed %d: %d faults over %s, %d clients aiming at %d orders, %d replicas, %d reconcilers; logs in %s",
		cfg.Seed, len(schedule), cfg.Duration, cfg.Clients, cfg.Orders, cfg.Replicas, cfg.Reconcilers, h.dir)

	// A durable PostgreSQL (fsync on), so that an immediate shutdown is a
	// real crash and recovery.
	var err error
	h.cluster, err = pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer func() {
		copyFile(filepath.Join(h.cluster.Dir(), "postgres.log"), filepath.Join(h.dir, "postgres.log"))
		h.cluster.Stop()
	}()
	if err := h.createDB(ctx); err != nil {
		return err
	}
	if h.pool, err = postgres.Open(ctx, h.cluster.URL(h.dbName)+"&application_name=settle-chaos", 4); err != nil {
		return err
	}
	defer h.pool.Close()

	// The gateway simulator, in this process so that its ledger is at hand.
	gw := sim.New(sim.Options{Seed: cfg.Seed, Random: cfg.Gateway, ClientTimeout: simHold})
	simLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
	simDone := make(chan struct{})
	go func() { gw.Serve(simCtx, simLis); close(simDone) }()
	stopGateway := func() { stopSim(); <-simDone }
	defer stopGateway()

	key := apiKey()
	env := h.env("http://"+simLis.Addr().String(), key)
	procCtx, stopProcs := context.WithCancel(ctx)
	var keepers sync.WaitGroup
	defer func() { stopProcs(); keepers.Wait() }()
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var clients []settlev1.OrderServiceClient
	for i := range cfg.Replicas {
		addr, err := freePort()
		if err != nil {
			return err
		}
		p := newProcess(h, fmt.Sprintf("serve-%d", i), env, "serve", "--listen", addr)
		h.replicas = append(h.replicas, p)
		conn, err := dial(addr, key)
		if err != nil {
			return err
		}
		conns = append(conns, conn)
		clients = append(clients, settlev1.NewOrderServiceClient(conn))
	}
	for i := range cfg.Reconcilers {
		h.recons = append(h.recons, newProcess(h, fmt.Sprintf("reconcile-%d", i), env, "reconcile"))
	}
	for _, p := range slices.Concat(h.replicas, h.recons) {
		h.procs[p.name] = p
		keepers.Go(func() { p.keep(procCtx) })
	}
	if err := h.waitServing(ctx, clients, 60*time.Second); err != nil {
		return err
	}

	// The workload and the faults, side by side.
	h.start.Store(time.Now().UnixNano())
	h.logf("clients start")
	hist := newHistory()
	w := &workload{seed: cfg.Seed, clients: clients, hist: hist,
		interval: time.Duration(float64(cfg.Duration) * float64(cfg.Clients) / float64(cfg.Orders))}
	stopClients := make(chan struct{})
	var clientsDone sync.WaitGroup
	for i := range cfg.Clients {
		clientsDone.Go(func() { w.client(ctx, i, stopClients) })
	}
	h.inject(ctx, schedule)
	if cfg.Faults.FailpointRounds > 0 {
		h.topUpFailpoints(ctx)
	}
	close(stopClients)
	clientsDone.Wait()
	h.logf("clients stopped")
	if err := ctx.Err(); err != nil {
		return err
	}

	// Calm: every process running unarmed, then let the reconcilers settle
	// what is left.
	if err := h.calm(ctx, clients); err != nil {
		return err
	}
	if err := h.quiesce(ctx); err != nil {
		return err
	}
	stopProcs()
	keepers.Wait()
	// Stop the simulator only once the processes are gone, so that the
	// ledger is final.
	stopGateway()

	snap, err := loadSnapshot(ctx, h.pool, gw.Ledger())
	if err != nil {
		return fmt.Errorf("read the end state: %w", err)
	}
	violations := check(snap, hist)
	h.report(snap, hist, violations)
	return nil
}

// createDB creates the run's database and migrates it.
func (h *harness) createDB(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, h.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+h.dbName)
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	pool, err := postgres.Open(ctx, h.cluster.URL(h.dbName), 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.Migrate(ctx, pool)
}

// env is the environment of the processes: the test's, then Settle's
// settings with short timings, and the clients' API key.
func (h *harness) env(simURL, key string) []string {
	steps := make([]string, recheckSteps)
	for i := range steps {
		steps[i] = recheckStep.String()
	}
	return append(slices.Clone(h.cfg.Env),
		"DATABASE_URL="+h.cluster.URL(h.dbName),
		"SETTLE_DB_MAX_CONNS=4",
		"SETTLE_LOG_FORMAT=text",
		"SETTLE_DEFAULT_GATEWAY=refpsp",
		"SETTLE_REFPSP_URL="+simURL,
		"SETTLE_REFPSP_KEY=sk_chaos",
		"SETTLE_GATEWAY_TIMEOUT="+gatewayTimeout.String(),
		"SETTLE_CLAIM_GRACE="+claimGrace.String(),
		"SETTLE_NO_SHOW_HORIZON="+noShowHorizon.String(),
		"SETTLE_RECONCILE_SCHEDULE="+strings.Join(steps, ","),
		"SETTLE_RECONCILE_POLL="+pollInterval.String(),
		"SETTLE_SHUTDOWN_TIMEOUT=2s",
		"SETTLE_WITH_RECONCILER=false",
		"SETTLE_API_KEYS="+keyLine(key),
	)
}

// calm makes sure every process runs unarmed and the database is up, and
// waits until every replica answers.
func (h *harness) calm(ctx context.Context, clients []settlev1.OrderServiceClient) error {
	h.logf("faults stopped; restarting anything down or armed")
	h.dbMu.Lock() // any restart is over
	h.dbMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range h.procs {
		wg.Go(func() {
			done := make(chan struct{})
			if p.send(ctx, command{kind: cmdCalm, done: done}) {
				select {
				case <-done:
				case <-ctx.Done():
				}
			}
		})
	}
	wg.Wait()
	return h.waitServing(ctx, clients, 60*time.Second)
}

// waitServing waits until every replica answers.
func (h *harness) waitServing(ctx context.Context, clients []settlev1.OrderServiceClient, d time.Duration) error {
	deadline := time.Now().Add(d)
	for i, c := range clients {
		for {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := c.GetOrder(cctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "ping"}})
			cancel()
			if err == nil || strings.Contains(err.Error(), "order not found") {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("replica %s does not answer: %v (see %s)", h.replicas[i].name, err, h.replicas[i].logPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// quiesce waits, within quiesceTimeout, until no order is CHARGING.
func (h *harness) quiesce(ctx context.Context) error {
	deadline := time.Now().Add(quiesceTimeout)
	last := int64(-1)
	for {
		var n int64
		err := h.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE state = 'CHARGING'`).Scan(&n)
		if err == nil && n != last {
			h.logf("%d orders CHARGING", n)
			last = n
		}
		if err == nil && n == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			h.logf("orders still CHARGING after %s", quiesceTimeout)
			return nil // the check reports them
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// report fills the summary with the end state and logs every violation,
// with the history of the orders concerned, and the processes' problems.
func (h *harness) report(snap snapshot, hist *history, violations []Violation) {
	h.mu.Lock()
	s := &h.sum
	s.Orders, s.Charges = len(hist.orders), hist.charges
	s.Violations = violations
	for _, o := range snap.orders {
		s.States[o.state]++
	}
	var charged, declined int
	for _, c := range snap.ledger {
		if c.Status == "succeeded" {
			charged++
		} else {
			declined++
		}
	}
	s.Charged = charged
	h.mu.Unlock()

	h.logf("clients: %s", hist.stats())
	h.logf("end state: orders by state %v; gateway: %d charges, %d declines; failpoints fired %v; %d processes exited by themselves",
		s.States, charged, declined, s.Failpoints, s.Exits)
	for _, v := range violations {
		h.logf("VIOLATION %s", v)
	}
	h.describeOrders(snap, violations)
	for _, p := range slices.Concat(h.replicas, h.recons) {
		problems, notes := scanLog(p.logPath)
		for _, msg := range problems {
			h.problem("%s: %s (see %s)", p.name, msg, p.logPath)
		}
		for _, msg := range notes {
			h.logf("note: %s: %s (see %s)", p.name, msg, p.logPath)
		}
	}
}

// describeOrders logs the history of the first few orders with violations.
func (h *harness) describeOrders(snap snapshot, violations []Violation) {
	seen := map[string]bool{}
	for _, v := range violations {
		if v.Order == "" || seen[v.Order] || len(seen) == 10 {
			continue
		}
		seen[v.Order] = true
	}
	if len(seen) == 0 {
		return
	}
	var (
		evs      = map[string][]dbEvent{}
		attempts = map[string][]dbAttempt{}
		ofOrder  = map[string]string{} // attempt → order
		charges  = map[string][]sim.Charge{}
	)
	for _, e := range snap.events {
		if seen[e.order] {
			evs[e.order] = append(evs[e.order], e)
		}
	}
	for _, a := range snap.attempts {
		ofOrder[a.id] = a.order
		if seen[a.order] {
			attempts[a.order] = append(attempts[a.order], a)
		}
	}
	for _, c := range snap.ledger {
		if o := ofOrder[c.Reference]; seen[o] {
			charges[o] = append(charges[o], c)
		}
	}
	for _, o := range snap.orders {
		if seen[o.id] {
			h.logf("%s", describe(o, evs[o.id], attempts[o.id], charges[o.id]))
		}
	}
}

// scanLog finds in a process's log what must never appear there (a data
// race, a panic), and what deserves a look (errors logged).
func scanLog(path string) (problems, notes []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	count := func(markers ...string) []string {
		var found []string
		for _, m := range markers {
			if n := strings.Count(string(b), m); n > 0 {
				found = append(found, fmt.Sprintf("%d× %q", n, m))
			}
		}
		return found
	}
	return count("WARNING: DATA RACE", "panic:", "fatal error:"), count("level=ERROR")
}

func (h *harness) summary() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sum
	s.Failpoints = maps.Clone(s.Failpoints)
	s.States = maps.Clone(s.States)
	s.Problems = slices.Clone(s.Problems)
	return s
}

func (h *harness) count(f func(*Summary)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.sum)
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logf("PROBLEM %s", msg)
	h.count(func(s *Summary) { s.Problems = append(s.Problems, msg) })
}

func (h *harness) started() time.Time { return time.Unix(0, h.start.Load()) }

func (h *harness) since() time.Duration { return time.Since(h.started()).Round(time.Millisecond) }

// logf logs one line of progress, stamped with the time since the clients
// started, to the run's Log and to chaos.log.
func (h *harness) logf(format string, args ...any) {
	line := fmt.Sprintf("chaos +%6.1fs: %s\n", time.Since(h.started()).Seconds(), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	h.logMu.Lock()
	defer h.logMu.Unlock()
	io.WriteString(h.cfg.Log, line)
	if h.logFile != nil {
		io.WriteString(h.logFile, line)
	}
}

// apiKey returns a new random API key for the clients.
func apiKey() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "sk_chaos_" + hex.EncodeToString(b)
}

// keyLine is the SETTLE_API_KEYS entry of the clients' key: its hash, the
// merchant, the checkout role, a name.
func keyLine(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]) + " " + merchant + " checkout chaos-checkout"
}

// bearer sends an API key with every call, over plaintext loopback.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// dial connects to a replica with the clients' API key, reconnecting
// quickly after it restarts.
func dial(addr, key string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(key)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
}

// freePort finds a free port outside the kernel's ephemeral range, so that
// no outgoing connection takes it while its replica is down.
func freePort() (string, error) {
	rng := newRand(uint64(time.Now().UnixNano()))
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rng.IntN(12000))
		l, err := net.Listen("tcp", addr)
		if err == nil {
			l.Close()
			return addr, nil
		}
	}
	return "", errors.New("chaos: no free port found for a replica")
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err == nil {
		os.WriteFile(to, b, 0o644)
	}
}
