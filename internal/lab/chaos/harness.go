package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
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

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
)

// harness is one run.
type harness struct {
	cfg   Config
	dir   string
	start atomic.Int64 // unix nanoseconds: the start of the run, then of the workload
	// cluster is the primary (the coordinator, on Citus) and standby its
	// standby when cfg.Failover is set; a failover swaps them, so that
	// once the faults start both are read and written under dbMu.
	cluster *pgcluster.Cluster
	citus   *pgcluster.Citus // nil on plain PostgreSQL
	standby *pgcluster.Cluster
	names   map[*pgcluster.Cluster]string // each cluster's application_name
	clients []settlev1.OrderServiceClient
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
	// The audit's window starts here, before any order.
	from := time.Now()
	schedule := plan(cfg.Seed, cfg.planParams())
	h.logf("seed %d: %d faults over %s, %d clients aiming at %d orders, %d replicas, %d reconcilers; logs in %s",
		cfg.Seed, len(schedule), cfg.Duration, cfg.Clients, cfg.Orders, cfg.Replicas, cfg.Reconcilers, h.dir)

	// A durable PostgreSQL (fsync on), so that an immediate shutdown is a
	// real crash and recovery.
	var err error
	if cfg.Citus {
		if h.citus, err = pgcluster.StartCitus(ctx, pgcluster.CitusOptions{}); err != nil {
			return fmt.Errorf("start Citus: %w", err)
		}
		h.cluster = h.citus.Coordinator
		defer func() {
			for i, n := range h.citus.Nodes() {
				copyFile(filepath.Join(n.Dir(), "postgres.log"), filepath.Join(h.dir, fmt.Sprintf("postgres-%d.log", i)))
			}
			h.citus.Stop()
		}()
	} else {
		if err := h.startDB(ctx); err != nil {
			return err
		}
		defer h.stopDB()
	}
	if err := h.createDB(ctx); err != nil {
		return err
	}
	if h.pool, err = postgres.Open(ctx, h.dbURL(h.dbName)+"&application_name=settle-chaos", 4); err != nil {
		return err
	}
	defer h.pool.Close()

	// The replicas' webhook listeners, where the simulator sends its
	// events, as to a load balancer's backends.
	hookAddrs := make([]string, cfg.Replicas)
	events := gatewayEvents
	for i := range hookAddrs {
		if hookAddrs[i], err = freePort(); err != nil {
			return err
		}
		url := "http://" + hookAddrs[i] + "/webhooks/refpsp"
		if i == 0 {
			events.URL = url
		} else {
			events.More = append(events.More, url)
		}
	}
	// The gateway simulator, in this process so that its ledger is at hand.
	gw := sim.New(sim.Options{Seed: cfg.Seed, Random: cfg.Gateway, ClientTimeout: simHold, Events: events})
	simLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
	simDone := make(chan struct{})
	go func() { _ = gw.Serve(simCtx, simLis); close(simDone) }()
	stopGateway := func() { stopSim(); <-simDone }
	defer stopGateway()

	// The fake Adyen, in this process too, its notifications sent through
	// a proxy to the replicas' listeners in turn (a refused or failed
	// delivery is retried by the fake, so at another replica).
	var ady *adyenFake
	if cfg.AdyenShare > 0 {
		if ady, err = startAdyen(ctx, cfg.Seed, hookAddrs); err != nil {
			return err
		}
		defer ady.stop()
	}

	// The merchant's endpoint for events out, in this process so that
	// what it received is at hand. It refuses a delivery now and then, so
	// that deliveries are retried as well as redelivered after kills.
	hooks := receiver.New([]string{eventSecret}, nil)
	hookLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	refusals := rand.New(rand.NewPCG(cfg.Seed, 16))
	var refusalsMu sync.Mutex
	hookSrv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refusalsMu.Lock()
		refuse := refusals.Float64() < eventRefusalRate
		refusalsMu.Unlock()
		if refuse {
			http.Error(w, "refused by the chaos harness", http.StatusServiceUnavailable)
			return
		}
		hooks.ServeHTTP(w, r)
	})}
	go func() { _ = hookSrv.Serve(hookLis) }()
	defer hookSrv.Close()

	// More refpsp gateway accounts, each a simulator of its own, for the
	// orders with routes (accounts.go).
	var accounts []*account
	if cfg.RouteShare > 0 {
		if accounts, err = startAccounts(cfg.Seed, hookAddrs); err != nil {
			return err
		}
		defer stopAccounts(accounts)
	}

	key := apiKey()
	env := h.env("http://"+simLis.Addr().String(), key, "http://"+hookLis.Addr().String()+"/events")
	if len(accounts) > 0 {
		env = append(env, accountsEnv(accounts))
	}
	if ady != nil {
		env = append(env, "ADYEN_API_KEY="+adyenAPIKey, "ADYEN_MERCHANT_ACCOUNT="+adyenAccount,
			"ADYEN_HMAC_KEYS="+adyenHMACKey, "ADYEN_URL="+ady.url+"/v71")
	}
	procCtx, stopProcs := context.WithCancel(ctx)
	var keepers sync.WaitGroup
	defer func() { stopProcs(); keepers.Wait() }()
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var (
		clients []settlev1.OrderServiceClient
		ops     []settlev1.OpsServiceClient
	)
	for i := range cfg.Replicas {
		addr, err := freePort()
		if err != nil {
			return err
		}
		p := newProcess(h, fmt.Sprintf("serve-%d", i), env, "serve", "--listen", addr, "--webhook-listen", hookAddrs[i])
		h.replicas = append(h.replicas, p)
		conn, err := dial(addr, key)
		if err != nil {
			return err
		}
		opsConn, err := dial(addr, opsKey(key))
		if err != nil {
			return err
		}
		conns = append(conns, conn, opsConn)
		clients = append(clients, settlev1.NewOrderServiceClient(conn))
		ops = append(ops, settlev1.NewOpsServiceClient(opsConn))
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
	h.clients = clients

	// The workload and the faults, side by side.
	h.start.Store(time.Now().UnixNano())
	h.logf("clients start")
	hist := newHistory()
	w := &workload{seed: cfg.Seed, clients: clients, ops: ops, hist: hist,
		interval:     time.Duration(float64(cfg.Duration) * float64(cfg.Clients) / float64(cfg.Orders)),
		web:          &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		actionExpiry: actionExpiry,
		manualShare:  cfg.ManualShare,
		actionShare:  cfg.ActionShare,
		adyenShare:   cfg.AdyenShare,
		routeShare:   cfg.RouteShare}
	for _, a := range accounts {
		w.routeGateways = append(w.routeGateways, a.name)
	}
	stopClients := make(chan struct{})
	var clientsDone sync.WaitGroup
	for i := range cfg.Clients {
		clientsDone.Go(func() { w.client(ctx, i, stopClients) })
	}
	clientsDone.Go(func() { h.openDisputes(gw, stopClients) })
	for _, a := range accounts {
		if a.name == accountDown {
			clientsDone.Go(func() { h.flap(ctx, a, stopClients) })
		}
	}
	clientsDone.Go(func() { w.changeRoutes(ctx, cfg.Duration, stopClients) })
	h.inject(ctx, schedule)
	if cfg.Faults.FailpointRounds > 0 {
		h.topUpFailpoints(ctx)
	}
	close(stopClients)
	clientsDone.Wait()
	h.count(func(s *Summary) { s.RouteChanges = int(w.routeVersions.Load()) })
	h.logf("clients stopped")
	if err := ctx.Err(); err != nil {
		return err
	}

	// Calm: every process running unarmed, then let the reconcilers settle
	// what is left.
	if err := h.calm(ctx, clients); err != nil {
		return err
	}
	if err := h.settleDisputes(ctx, gw, clients[0]); err != nil {
		return err
	}
	if err := h.quiesce(ctx, ady); err != nil {
		return err
	}
	if err := h.waitDelivered(ctx); err != nil {
		return err
	}
	h.logGatewayEvents(ctx)
	stopProcs()
	keepers.Wait()
	// With the processes gone, the gateway lies if the run says so, and
	// the audit reads it, still serving, before the ledgers are read.
	sims := []gatewayAccount{{name: refpspGateway, url: "http://" + simLis.Addr().String(), gw: gw}}
	for _, a := range accounts {
		sims = append(sims, gatewayAccount{name: a.name, url: "http://" + a.addr, gw: a.gw})
	}
	if cfg.Lie != nil {
		bySim := map[string]*sim.Sim{}
		for _, a := range sims {
			bySim[a.name] = a.gw
		}
		if err := cfg.Lie(bySim); err != nil {
			return fmt.Errorf("make the gateway lie: %w", err)
		}
	}
	audited, err := h.audit(ctx, sims, from)
	if err != nil {
		return fmt.Errorf("gateway audit: %w", err)
	}
	// Stop the simulator only once the processes are gone and the audit
	// has read it, so that the ledger is final.
	stopGateway()
	ledgers := []accountLedger{ledgerOf(refpspGateway, gw)}
	for _, a := range accounts {
		a.stop()
		ledgers = append(ledgers, ledgerOf(a.name, a.gw))
		h.count(func(s *Summary) { s.DownStretches += a.downs })
	}

	snap, err := loadSnapshot(ctx, h.pool, ledgers)
	if err != nil {
		return fmt.Errorf("read the end state: %w", err)
	}
	snap.disputeLedger = gw.Disputes()
	if ady != nil {
		ady.stop()
		snap.adyen = ady.end()
		for _, msg := range ady.fake.ContractErrors() {
			h.problem("the fake Adyen broke Adyen's contract: %s", msg)
		}
	}
	snap.received = hooks.Deliveries()
	violations := append(check(snap, hist), audited.violations...)
	h.count(func(s *Summary) { s.AuditRuns, s.Audit = audited.runs, audited.counts })
	h.report(snap, hist, violations)
	return nil
}

// createDB creates the run's database and migrates it.
func (h *harness) createDB(ctx context.Context) error {
	if h.citus != nil {
		if err := h.citus.CreateDatabase(ctx, h.dbName, ""); err != nil {
			return err
		}
		pool, err := postgres.Open(ctx, h.cluster.URL(h.dbName), 2)
		if err != nil {
			return err
		}
		defer pool.Close()
		return postgres.Migrate(ctx, pool)
	}
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
func (h *harness) env(simURL, key, eventsURL string) []string {
	steps := make([]string, recheckSteps)
	for i := range steps {
		steps[i] = recheckStep.String()
	}
	return append(slices.Clone(h.cfg.Env),
		"DATABASE_URL="+h.dbURL(h.dbName),
		"SETTLE_DB_MAX_CONNS=4",
		"SETTLE_LOG_FORMAT=text",
		"SETTLE_DEFAULT_GATEWAY=refpsp",
		"SETTLE_REFPSP_URL="+simURL,
		"SETTLE_REFPSP_KEY=sk_chaos",
		"SETTLE_GATEWAY_TIMEOUT="+gatewayTimeout.String(),
		"SETTLE_CLAIM_GRACE="+claimGrace.String(),
		"SETTLE_NO_SHOW_HORIZON="+noShowHorizon.String(),
		"SETTLE_ACTION_EXPIRY="+actionExpiry.String(),
		"SETTLE_RECONCILE_SCHEDULE="+strings.Join(steps, ","),
		"SETTLE_RECONCILE_POLL="+pollInterval.String(),
		"SETTLE_SHUTDOWN_TIMEOUT=2s",
		"SETTLE_WITH_RECONCILER=false",
		"SETTLE_API_KEYS="+keyLine(key),
		"SETTLE_EVENT_WEBHOOKS="+merchant+" "+eventsURL+" "+eventSecret,
		"SETTLE_EVENT_DELIVERY_POLL="+pollInterval.String(),
		"SETTLE_EVENT_DELIVERY_TIMEOUT=1s",
		"SETTLE_EVENT_DELIVERY_BATCH=8",
		"SETTLE_REFPSP_WEBHOOK_SECRETS="+gatewayEventSecret,
	)
}

// calm makes sure every process runs unarmed and the database is up, and
// waits until every replica answers.
func (h *harness) calm(ctx context.Context, clients []settlev1.OrderServiceClient) error {
	h.logf("faults stopped; restarting anything down or armed")
	h.dbMu.Lock()
	h.dbMu.Unlock() //nolint:staticcheck // empty on purpose: waits until any restart is over
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
				return fmt.Errorf("replica %s does not answer: %w (see %s)", h.replicas[i].name, err, h.replicas[i].logPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// lapseSoon is how soon an authorization's capture_before must come for
// quiesce to wait for it: past the workload's short holds (lapseAfter),
// well short of the simulator's default lifetime.
const lapseSoon = time.Minute

// quiesce waits until no order is CHARGING or REQUIRES_ACTION (abandoned
// challenges expire), no refund, capture or void is in flight, no
// authorization is open within lapseSoon of its capture_before, and the
// fake Adyen (ady, nil if none) has no hold about to lapse and no
// notification still to deliver (an EXPIRE makes an order's hold due):
// within quiesceTimeout of the start or of the last check of one of
// them, and quiesceMax in all.
func (h *harness) quiesce(ctx context.Context, ady *adyenFake) error {
	start := time.Now()
	deadline := start.Add(quiesceTimeout)
	last, lastChecks := int64(-1), int64(-1)
	for {
		var n, refunding, checks int64
		// Captures and voids in flight count as refunds do, and so do
		// authorizations past capture_before or about to be (the
		// workload's short holds), which the reconcilers are to look up
		// once it passes: the gateway says whether they lapsed (but for
		// those with a capture in review, which wait for a person).
		// checks counts the checks of what is in flight.
		err := h.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE state IN ('CHARGING', 'REQUIRES_ACTION')),
			(SELECT count(*) FROM refunds WHERE state = 'REFUNDING')
			+ (SELECT count(*) FROM captures WHERE state = 'CAPTURING')
			+ (SELECT count(*) FROM voids WHERE state = 'VOIDING')
			+ (SELECT count(*) FROM orders o WHERE state = 'AUTHORIZED' AND capture_before < now() + $1::interval
				AND NOT EXISTS (SELECT 1 FROM captures c WHERE c.merchant_id = o.merchant_id AND c.order_id = o.id
					AND c.state = 'NEEDS_REVIEW')),
			(SELECT coalesce(sum(reconcile_count), 0) FROM orders WHERE state IN ('CHARGING', 'REQUIRES_ACTION'))
			+ (SELECT coalesce(sum(reconcile_count), 0) FROM refunds WHERE state = 'REFUNDING')
			+ (SELECT coalesce(sum(reconcile_count), 0) FROM captures WHERE state = 'CAPTURING')
			+ (SELECT coalesce(sum(reconcile_count), 0) FROM voids WHERE state = 'VOIDING')`,
			lapseSoon).Scan(&n, &refunding, &checks)
		if err == nil && n+refunding != last {
			h.logf("%d orders CHARGING or REQUIRES_ACTION, %d refunds, captures or voids in flight or holds past capture_before", n, refunding)
			last = n + refunding
		}
		if err == nil && checks != lastChecks {
			// Checked since: the schedule is running, not stuck.
			if lastChecks >= 0 {
				deadline = time.Now().Add(quiesceTimeout)
				if limit := start.Add(quiesceMax); deadline.After(limit) {
					deadline = limit
				}
			}
			lastChecks = checks
		}
		n += refunding
		if err == nil && n == 0 && ady.settled(lapseSoon) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			h.logf("orders still CHARGING or REQUIRES_ACTION, or refunds REFUNDING, after %s (%s since a check of them)",
				time.Since(start).Round(time.Second), quiesceTimeout)
			return nil // the check reports them
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDelivered waits, within deliverTimeout, until every event has been
// delivered (or has failed); the check reports any that were not.
func (h *harness) waitDelivered(ctx context.Context) error {
	deadline := time.Now().Add(deliverTimeout)
	last := int64(-1)
	for {
		var n int64
		err := h.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM order_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL)
			+ (SELECT count(*) FROM refund_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL)`).Scan(&n)
		if err == nil && n != last {
			h.logf("%d events to deliver", n)
			last = n
		}
		if err == nil && n == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			h.logf("events still undelivered after %s", deliverTimeout)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func copyFile(from, to string) {
	// Best effort: a log that cannot be kept is no reason to fail the run.
	if b, err := os.ReadFile(from); err == nil {
		_ = os.WriteFile(to, b, 0o644)
	}
}

// logGatewayEvents writes to chaos.log what the simulator's events came
// to, by result (woken, duplicate, ignored, review, ...).
func (h *harness) logGatewayEvents(ctx context.Context) {
	rows, err := h.pool.Query(ctx, "SELECT result, count(*) FROM gateway_events GROUP BY result ORDER BY result")
	if err != nil {
		h.logf("gateway events: %v", err)
		return
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var result string
		var n int64
		if err := rows.Scan(&result, &n); err != nil {
			h.logf("gateway events: %v", err)
			return
		}
		parts = append(parts, fmt.Sprintf("%s=%d", result, n))
	}
	h.logf("gateway events recorded: %s", strings.Join(parts, " "))
}
