package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// The test binary doubles as the settle binary, so that crash tests run the
// real commands as subprocesses (with the race detector, under -race).
func TestMain(m *testing.M) {
	if os.Getenv("SETTLE_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	postgrestest.Main(m)
}

func TestServeRefusesUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": postgrestest.EmptyURL(t), "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "k", "SETTLE_NO_API_KEYS": "true"}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0"}, mapEnv(env), &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "settle migrate up") {
		t.Fatalf("serve on an unmigrated database: %v, want a refusal that says to run settle migrate up", err)
	}
}

// TestServeRefusesInstantGateway: the benchmark's gateway, which marks
// every charge paid, cannot be chosen for serve, by flag or environment;
// the refusal is a configuration error that says why, given at start.
func TestServeRefusesInstantGateway(t *testing.T) {
	t.Parallel()
	url := postgrestest.URL(t)
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flag": {[]string{"serve", "--listen", "127.0.0.1:0", "--no-api-keys", "--default-gateway=instant"}, map[string]string{}},
		"env":  {[]string{"serve", "--listen", "127.0.0.1:0", "--no-api-keys"}, map[string]string{"SETTLE_DEFAULT_GATEWAY": "instant"}},
	} {
		t.Run(name, func(t *testing.T) {
			tc.env["DATABASE_URL"] = url
			// Were instant accepted, serve would run until the context
			// ends and return nil.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			err := run(ctx, tc.args, mapEnv(tc.env), &stderr, &stderr)
			if err == nil || !strings.Contains(err.Error(), "configuration:") || !strings.Contains(err.Error(), "default-gateway instant") {
				t.Fatalf("serve with the instant gateway: %v, want a configuration error about default-gateway instant", err)
			}
		})
	}
}

func TestConfigErrorsAreClear(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_GATEWAY_TIMEOUT": "soon", "SETTLE_DB_MAX_CONNS": "0"}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve"}, mapEnv(env), &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "SETTLE_GATEWAY_TIMEOUT") {
		t.Fatalf("got %v, want an error naming SETTLE_GATEWAY_TIMEOUT", err)
	}
	env["SETTLE_GATEWAY_TIMEOUT"] = "1s"
	err = run(context.Background(), []string{"serve"}, mapEnv(env), &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "db-max-conns") {
		t.Fatalf("got %v, want an error naming db-max-conns", err)
	}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// proc is a settle subprocess.
type proc struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// lockedBuffer is a process's output, which a test may read while the
// process still writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// output is what the process has written so far.
func (p *proc) output() string { return p.out.String() }

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// The test cluster runs with fsync off; a test of the refusal sets
	// SETTLE_ALLOW_UNSAFE_DATABASE=false in env, which comes later and wins.
	cmd.Env = append(append(os.Environ(), "SETTLE_ALLOW_UNSAFE_DATABASE=true"), append(env, "SETTLE_TEST_AS_MAIN=1")...)
	p := &proc{cmd: cmd, out: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("settle %s output:\n%s", args[0], p.out)
		}
	})
	return p
}

func (p *proc) waitExit(t *testing.T, d time.Duration) syscall.WaitStatus {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	case <-time.After(d):
		t.Fatalf("process still running after %s", d)
		return 0
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// crashEnv is the environment of a crash test: a reconciler that checks
// every 100ms, so the test runs in seconds; no API keys, on loopback. The
// gateway timeout (5 s) is counted from before the claim, and a charge
// must reach the simulator within it even from a -race build just
// started on a loaded machine; a simulator holding tok_timeout's answer
// holds it past that (simHold).
// simHold is how long a crash test's simulator holds tok_timeout's answer:
// past crashEnv's gateway timeout.
const simHold = 10 * time.Second

func crashEnv(dbURL, simURL string) []string {
	return []string{
		"DATABASE_URL=" + dbURL, "SETTLE_REFPSP_URL=" + simURL, "SETTLE_REFPSP_KEY=sk_sim", "SETTLE_LOG_FORMAT=text",
		"SETTLE_GATEWAY_TIMEOUT=5s", "SETTLE_CLAIM_GRACE=0s", "SETTLE_NO_SHOW_HORIZON=6s",
		"SETTLE_RECONCILE_SCHEDULE=100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms",
		"SETTLE_RECONCILE_POLL=50ms", "SETTLE_NO_API_KEYS=true",
	}
}

func dial(t *testing.T, addr string) settlev1.OrderServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return settlev1.NewOrderServiceClient(conn)
}

// waitServing waits until the server at addr answers.
func waitServing(t *testing.T, c settlev1.OrderServiceClient, p *proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "ping"}})
		cancel()
		if err == nil || strings.Contains(err.Error(), "order not found") {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("server exited at start:\n%s", p.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("server did not start")
}

// TestCrashAtEveryFailpoint kills settle at each failpoint of the charge
// path and of a reconcile batch, then lets a fresh reconciler finish: every
// order ends settled, with at most one charge at the gateway, along a valid
// path of the transition table.
func TestCrashAtEveryFailpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		failpoint string
		token     string
		want      order.State
	}{
		{"after-claim", "tok_ok", order.StatePending}, // never reached the gateway
		{"after-gateway", "tok_ok", order.StatePaid},  // charged, settle lost
		{"after-gateway", "tok_decline", order.StatePending},
		{"after-gateway", "tok_timeout", order.StatePaid}, // charged, answer lost twice over
	} {
		t.Run(tt.failpoint+"/"+tt.token, func(t *testing.T) {
			t.Parallel()
			dbURL := postgrestest.URL(t)
			gw := sim.New(sim.Options{ClientTimeout: simHold})
			hs := httptest.NewServer(gw)
			t.Cleanup(hs.Close)
			env := crashEnv(dbURL, hs.URL)
			addr := freeAddr(t)
			srv := start(t, append(env, "SETTLE_FAILPOINTS="+tt.failpoint), "serve", "--listen", addr)
			c := dial(t, addr)
			waitServing(t, c, srv)

			ctx := context.Background()
			o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "crash-1",
				Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 500}, PaymentMethod: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: "crash-req-1"}); err == nil {
				t.Fatal("ChargeOrder answered; the failpoint should have killed the server")
			}
			if ws := srv.waitExit(t, 10*time.Second); ws.Signal() != syscall.SIGKILL {
				t.Fatalf("server exit status %v, want killed by SIGKILL", ws)
			}
			pool := openPool(t, dbURL)
			if st := stateOf(t, pool, o.GetOrder().GetId()); st != order.StateCharging {
				t.Fatalf("after the crash the order is %s, want CHARGING", st)
			}

			start(t, env, "reconcile")
			got := waitSettled(t, pool, o.GetOrder().GetId(), 30*time.Second)
			if got != tt.want {
				t.Fatalf("order ended %s, want %s", got, tt.want)
			}
			checkCharges(t, pool, gw, o.GetOrder().GetId(), tt.want == order.StatePaid)
			checkPath(t, pool, o.GetOrder().GetId())
		})
	}
}

// TestCrashMidReconcileBatch kills a reconciler in the middle of a batch;
// its leases expire and another reconciler settles every order.
func TestCrashMidReconcileBatch(t *testing.T) {
	t.Parallel()
	dbURL := postgrestest.URL(t)
	gw := sim.New(sim.Options{ClientTimeout: simHold})
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)
	env := crashEnv(dbURL, hs.URL)
	addr := freeAddr(t)
	srv := start(t, env, "serve", "--listen", addr)
	c := dial(t, addr)
	waitServing(t, c, srv)
	ctx := context.Background()
	var ids []string
	for i := range 6 {
		o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: fmt.Sprintf("batch-%d", i),
			Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 500}, PaymentMethod: "tok_5xx_after_charge"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: fmt.Sprintf("batch-req-%d", i)})
		if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_CHARGING {
			t.Fatalf("charge: %v %v", resp, err)
		}
		ids = append(ids, o.GetOrder().GetId())
	}
	time.Sleep(200 * time.Millisecond) // let the first checks come due
	crashing := start(t, append(env, "SETTLE_FAILPOINTS=reconcile-mid-batch"), "reconcile")
	if ws := crashing.waitExit(t, 20*time.Second); ws.Signal() != syscall.SIGKILL {
		t.Fatalf("reconciler exit status %v, want killed by SIGKILL", ws)
	}
	start(t, env, "reconcile")
	pool := openPool(t, dbURL)
	for _, id := range ids {
		if got := waitSettled(t, pool, id, 30*time.Second); got != order.StatePaid {
			t.Fatalf("order %s ended %s, want PAID", id, got)
		}
		checkCharges(t, pool, gw, id, true)
		checkPath(t, pool, id)
	}
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(context.Background(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func stateOf(t *testing.T, pool *pgxpool.Pool, id string) order.State {
	t.Helper()
	var st order.State
	if err := pool.QueryRow(context.Background(), `SELECT state FROM orders WHERE id = $1`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitSettled(t *testing.T, pool *pgxpool.Pool, id string, d time.Duration) order.State {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := stateOf(t, pool, id)
		if st != order.StateCharging || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkCharges checks the simulator's ledger: one successful charge for the
// order if it was charged, none otherwise.
func checkCharges(t *testing.T, pool *pgxpool.Pool, gw *sim.Sim, id string, charged bool) {
	t.Helper()
	store := postgres.NewStore(pool)
	o, err := store.Order(context.Background(), order.AnyMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	_, attempts, err := store.History(context.Background(), o.MerchantID, id)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, a := range attempts {
		refs = append(refs, a.ID)
	}
	n := gw.Succeeded(refs...)
	want := 0
	if charged {
		want = 1
	}
	if n != want {
		t.Fatalf("order %s: %d successful charges at the gateway, want %d", id, n, want)
	}
}

// checkPath checks that the order's history is a valid path of the
// transition table, starting with its creation.
func checkPath(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	store := postgres.NewStore(pool)
	o, err := store.Order(context.Background(), order.AnyMerchant, id)
	if err != nil {
		t.Fatal(err)
	}
	events, _, err := store.History(context.Background(), o.MerchantID, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0].Name != string(order.EventCreate) {
		t.Fatalf("history of %s does not start with its creation: %v", id, events)
	}
	state := events[0].To
	for _, e := range events[1:] {
		to, err := order.Next(state, order.EventName(e.Name))
		if err != nil || e.From != state || e.To != to {
			t.Fatalf("history of %s: %s from %s to %s is not a move from %s", id, e.Name, e.From, e.To, state)
		}
		state = to
	}
	if final := stateOf(t, pool, id); final != state {
		t.Fatalf("history of %s ends in %s, the order is %s", id, state, final)
	}
}

// TestServeDrainsOnSIGTERM: on SIGTERM, serve stops taking calls, lets the
// one in flight finish with its answer, stops its background loops and
// exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	gw := sim.New(sim.Options{})
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)
	addr := freeAddr(t)
	env := append(crashEnv(postgrestest.URL(t), hs.URL), "SETTLE_NO_SHOW_HORIZON=10s")
	srv := start(t, env, "serve", "--listen", addr, "--with-reconciler")
	c := dial(t, addr)
	waitServing(t, c, srv)
	ctx := context.Background()
	o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "drain-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_slow_1500"})
	if err != nil {
		t.Fatal(err)
	}
	charged := make(chan error, 1)
	var state settlev1.OrderState
	go func() {
		resp, err := c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: "drain-1-a"})
		state = resp.GetOrder().GetState()
		charged <- err
	}()
	// SIGTERM once the charge is at the gateway (it answers 1.5s later).
	for len(gw.Ledger()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-charged; err != nil {
		t.Fatalf("the call in flight at SIGTERM failed: %v", err)
	}
	if state != settlev1.OrderState_ORDER_STATE_PAID {
		t.Errorf("the call in flight at SIGTERM answered %s, want PAID", state)
	}
	if ws := srv.waitExit(t, 30*time.Second); ws.ExitStatus() != 0 {
		t.Fatalf("serve exited with %d after SIGTERM:\n%s", ws.ExitStatus(), srv.out)
	}
	if !strings.Contains(srv.out.String(), "shutting down") {
		t.Errorf("serve did not log its shutdown:\n%s", srv.out)
	}
}
