package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/net/http2"

	"github.com/settlepay/settle/internal/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestWaitsForTheDatabase: serve and reconcile started while there is no
// database wait for it (not ready, logging) instead of exiting, and become
// ready once it starts.
func TestWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Durable: the migration must survive the crash that stops it.
	c := startMigrated(t, pgcluster.Options{})
	url := c.URL("postgres")
	c.Kill()

	addr, serveMetrics, recMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	env := crashEnv(url, "http://127.0.0.1:1")
	srv := start(t, append(env, "SETTLE_METRICS_LISTEN="+serveMetrics), "serve", "--listen", addr)
	rec := start(t, append(env, "SETTLE_METRICS_LISTEN="+recMetrics), "reconcile")
	for _, m := range []string{serveMetrics, recMetrics} {
		waitReady(t, m, http.StatusServiceUnavailable)
	}
	time.Sleep(time.Second) // a few attempts, which a process that exits would not survive
	for _, p := range []*proc{srv, rec} {
		select {
		case <-p.exited:
			t.Fatalf("exited while the database was down:\n%s", p.out)
		default:
		}
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{serveMetrics, recMetrics} {
		waitReady(t, m, http.StatusOK)
	}
	waitServing(t, dial(t, addr), srv)
	if out := srv.output(); !strings.Contains(out, "waiting for a writable database") || !strings.Contains(out, "database reached") {
		t.Fatalf("serve's log does not say it waited:\n%s", out)
	}
}

// waitReady waits until the /readyz of the metrics listener at addr
// answers with status want.
func waitReady(t *testing.T, addr string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("/readyz at %s: %s after 30s, want %d", addr, last, want)
}

// TestRefusesUnsafeDatabase: the test cluster runs with fsync off, which
// serve refuses unless told the database is a test's.
func TestRefusesUnsafeDatabase(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": postgrestest.URL(t), "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "k", "SETTLE_NO_API_KEYS": "true"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, mapEnv(env), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "fsync is off") {
		t.Fatalf("serve on a database with fsync off: %v, want a refusal naming fsync", err)
	}
	if !strings.Contains(out.String(), `"msg":"database durability"`) {
		t.Fatalf("no status line in the log:\n%s", out.String())
	}
}

// TestWarnsOnAsynchronousStandby: a primary whose standby is asynchronous
// can lose commits in a failover, which reconcile says loudly; with the
// standby synchronous it says nothing of the kind.
func TestWarnsOnAsynchronousStandby(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, syncState string
		config          []string
		want            string
	}{
		{"async", "async", nil, "DATABASE CAN LOSE COMMITS IN A FAILOVER"},
		{"sync", "sync", []string{"synchronous_standby_names=*"}, "sync_standbys=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			primary, err := pgcluster.Start(ctx, pgcluster.Options{Config: tc.config})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(primary.Stop)
			standby, err := primary.StartStandby(ctx, "standby")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(standby.Stop)
			url := pgcluster.URLs("postgres", primary, standby)
			pool, err := postgres.Open(ctx, url, 2)
			if err != nil {
				t.Fatal(err)
			}
			err = postgres.Migrate(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			// The reconciler reads the standby's state at its start: wait
			// until the standby streams, as the case has it.
			waitTrue(t, pool, 30*time.Second, "the standby streaming "+tc.syncState,
				"SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1", tc.syncState)
			pool.Close()
			rec := start(t, crashEnv(url, "http://127.0.0.1:1"), "reconcile")
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(rec.output(), tc.want) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // a warning follows the status line at once
			out := rec.output()
			if !strings.Contains(out, tc.want) {
				t.Fatalf("reconcile's log has no %q:\n%s", tc.want, out)
			}
			if tc.name == "sync" && strings.Contains(out, "LOSE COMMITS") {
				t.Fatalf("a warning with a synchronous standby:\n%s", out)
			}
		})
	}
}

// TestDevStandby: settle dev --standby runs on a primary and a synchronous
// standby, and connects to both.
func TestDevStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	// Every listener on a free port: dev's webhook listener defaults to
	// 127.0.0.1:8090, which another process (or another test) may hold.
	args := []string{"dev", "--standby", "--keys-file", filepath.Join(t.TempDir(), "keys"), "--listen", "127.0.0.1:0", "--json-listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--sim-addr", "127.0.0.1:0",
		"--event-receiver-addr", "127.0.0.1:0", "--webhook-listen", freeAddr(t)}
	go func() {
		done <- run(ctx, args, mapEnv(nil), &out, &out)
	}()
	for !strings.Contains(out.String(), "Settle is running") && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("dev --standby: %v\n%s", err, out.String())
	}
	if s := out.String(); !strings.Contains(s, "sync_standbys=1") || !strings.Contains(s, "settle-pg-standby-") {
		t.Fatalf("dev --standby did not run on a synchronous standby:\n%s", s)
	}
}

// TestStandbyAlerts: the alert rules about standbys, evaluated on what a
// settle process exports about a real primary. A primary on one node on
// purpose (synchronous_standby_names empty) sets off only SettleNoStandby,
// the warning of alerts-ha.yml that such a deployment does not load;
// synchronous_standby_names set with no standby streaming (every commit
// hangs, as after a promotion that kept the setting) sets off
// SettleCommitsWaitForMissingStandby too; a synchronous standby sets off
// none; an asynchronous one only SettleNoSynchronousStandby.
func TestStandbyAlerts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := startMigrated(t, pgcluster.Options{})
	url := primary.URL("postgres")
	pool := openPool(t, url)
	// setNames sets synchronous_standby_names as an operator would, without
	// a transaction (which would wait for the standby it names).
	setNames := func(names string) {
		t.Helper()
		if _, err := pool.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		waitTrue(t, pool, 30*time.Second, "synchronous_standby_names = '"+names+"'",
			"SELECT current_setting('synchronous_standby_names') = $1", names)
	}
	rules := []string{"SettleCommitsWaitForMissingStandby", "SettleNoStandby", "SettleNoSynchronousStandby"}
	exprs := map[string]string{}
	for _, r := range rules {
		exprs[r] = alertExpr(t, r)
	}
	// check starts a reconciler, which reads the database's durability at
	// start, and evaluates the rules on its /metrics.
	check := func(name string, want ...string) {
		t.Helper()
		metricsAddr := freeAddr(t)
		p := start(t, append(crashEnv(url, "http://127.0.0.1:1"), "SETTLE_METRICS_LISTEN="+metricsAddr), "reconcile")
		defer p.cmd.Process.Kill()
		var body string
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(body, "\nsettle_db_standbys{") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: /metrics has no settle_db_standbys after 30s:\n%s\n%s", name, grepSettle(body), p.output())
			}
			time.Sleep(100 * time.Millisecond)
			if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
		}
		for _, r := range rules {
			if got := alertFires(t, exprs[r], body); got != slices.Contains(want, r) {
				t.Errorf("%s: %s fires = %v, want %v; /metrics:\n%s", name, r, got, !got, grepSettle(body))
			}
		}
		if stalled := slices.Contains(want, "SettleCommitsWaitForMissingStandby"); strings.Contains(p.output(), "DATABASE COMMITS WAIT FOR A MISSING STANDBY") != stalled {
			t.Errorf("%s: the log says commits wait for a missing standby: %v, want %v:\n%s", name, !stalled, stalled, p.output())
		}
	}

	check("one node on purpose", "SettleNoStandby")
	setNames("standby")
	check("synchronous_standby_names set, no standby", "SettleCommitsWaitForMissingStandby", "SettleNoStandby")
	standby, err := primary.StartStandby(ctx, "standby")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	waitTrue(t, pool, 30*time.Second, "the standby synchronous", "SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'")
	check("a synchronous standby")
	setNames("")
	waitTrue(t, pool, 30*time.Second, "the standby asynchronous", "SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'async'")
	check("an asynchronous standby", "SettleNoSynchronousStandby")
}

// startMigrated starts a throwaway PostgreSQL with opts, stopped when the
// test ends, and migrates its database postgres.
func startMigrated(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	pool, err := postgres.Open(ctx, c.URL("postgres"), 2)
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitTrue polls pool with query, which answers one boolean, until it
// answers true, and fails the test if it has not after d, naming what it
// waited for.
func waitTrue(t *testing.T, pool *pgxpool.Pool, d time.Duration, what, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var ok bool
		if err := pool.QueryRow(context.Background(), query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNotReadyWhileEveryConnectionIsHeld: /readyz says not ready while
// every gRPC connection place is held (a new client would wait to
// connect), so that a load balancer sends new clients elsewhere, and ready
// again once one is given back.
func TestNotReadyWhileEveryConnectionIsHeld(t *testing.T) {
	t.Parallel()
	const maxConns = 2
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	start(t, append(crashEnv(postgrestest.URL(t), "http://127.0.0.1:1"), "SETTLE_METRICS_LISTEN="+metricsAddr),
		"serve", "--listen", addr, "--max-connections", strconv.Itoa(maxConns), "--max-connections-per-address", strconv.Itoa(maxConns),
		"--max-keyless-connections-per-address", strconv.Itoa(maxConns), "--keyless-grace", "10m")
	waitReady(t, metricsAddr, http.StatusOK)
	var held []net.Conn
	for range maxConns {
		held = append(held, holdConnection(t, addr))
	}
	waitReady(t, metricsAddr, http.StatusServiceUnavailable)
	held[0].Close()
	waitReady(t, metricsAddr, http.StatusOK)
}

// holdConnection opens a gRPC connection to addr that sends the HTTP/2
// preface and then nothing, and returns once the server has answered it
// (it is accepted).
func holdConnection(t *testing.T, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			_ = c.SetDeadline(time.Now().Add(15 * time.Second))
			if _, err = c.Write([]byte(http2.ClientPreface)); err == nil {
				err = http2.NewFramer(c, c).WriteSettings()
			}
			if err == nil {
				_, err = c.Read(make([]byte, 1)) // the server's SETTINGS
			}
			if err == nil {
				_ = c.SetDeadline(time.Time{})
				return c
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to %s: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
