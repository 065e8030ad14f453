package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/lab/bench"
	"github.com/settlepay/settle/internal/order"
)

// runBench measures Settle against the database's own limit (see package
// bench), with this binary as the server.
func runBench(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to run as the server: %w", err)
	}
	return benchWith(ctx, args, bench.Server{Binary: bin}, stdout, stderr)
}

// runBenchServer is settle serve with the benchmark's instant gateway (see
// bench.Instant) as the default gateway: the server that settle bench runs
// and measures. It takes serve's settings but default-gateway, is left out
// of the usage, and nothing of serve's flags or environment reaches the
// instant gateway: serve refuses it.
func runBenchServer(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	names := slices.DeleteFunc(slices.Clone(commandOptions["serve"]), func(n string) bool { return n == "default-gateway" })
	cfg, _, err := parse("bench-server", args, getenv, stderr, names...)
	if err != nil {
		return err
	}
	cfg.DefaultGateway = "instant"
	return serveWith(ctx, cfg, map[string]func(gateway.Observer) order.Gateway{
		"instant": func(obs gateway.Observer) order.Gateway { return bench.NewObservedInstant(obs) },
	}, getenv, stderr)
}

// benchWith is runBench with the server given: tests run their own binary
// as settle, which needs an environment variable to say so.
func benchWith(ctx context.Context, args []string, srv bench.Server, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: settle bench [flags]

Measures Settle against the database's own limit, in one run: a throwaway
PostgreSQL (fsync on), pgbench running the tightest SQL that does Settle's
work per order (internal/lab/bench/sql/floor.sql) and the same work as naive transactions
(internal/lab/bench/sql/naive.sql), gRPC health checks (the transport's floor), and settle
serve (as the hidden bench-server, with an in-process gateway that
charges at once) as a subprocess under a closed-loop gRPC load client, at each
concurrency; then a reconciler draining due orders against pgbench running
its settle statement. At -cold-c, the order paths also start cold: each
run on a new, just-migrated database and a new server with no warm-up.
Prints tables; -json writes every run. The full run takes about 17
minutes; -duration 3s -runs 1 is a quick look.

`)
		fs.PrintDefaults()
	}
	var (
		cfg            = bench.Config{StatementCounts: true}
		conc           = "1,4,16,64"
		oneConc        = "16"
		refConc        = "16"
		capConc        = "16"
		voidConc       = "16"
		coldConc       = "16"
		deliverWorkers = "1"
		jsonPath       string
		quiet          bool
	)
	fs.StringVar(&conc, "c", conc, "comma-separated numbers of concurrent clients")
	fs.StringVar(&oneConc, "one-call-c", oneConc, "those of -c at which to measure the one-call path (CreateAndChargeOrder) against its floor too; empty for none")
	fs.StringVar(&refConc, "refund-c", refConc, "those of -c at which to measure refunds (RefundOrder) against their floor too; empty for none")
	fs.StringVar(&capConc, "capture-c", capConc, "those of -c at which to measure captures (CaptureOrder) against their floor too; empty for none")
	fs.StringVar(&voidConc, "void-c", voidConc, "those of -c at which to measure holds placed and released (CreateAndChargeOrder with capture manual, then VoidOrder) against their floor too; empty for none")
	fs.StringVar(&coldConc, "cold-c", coldConc, "those of -c at which to measure the order path (and the one-call path, at -one-call-c) from a cold start too: each run on a new, just-migrated database and a new server, from its first second; empty for none")
	fs.DurationVar(&cfg.Duration, "duration", 15*time.Second, "length of one run of the floors and of Settle (whole seconds)")
	fs.DurationVar(&cfg.TransportDuration, "transport-duration", 5*time.Second, "length of one run of the health checks")
	fs.IntVar(&cfg.Runs, "runs", 3, "runs per point; each figure is their median")
	fs.IntVar(&cfg.DrainOrders, "drain-orders", 10_000, "due orders for the reconciler to drain (0: skip the drain)")
	fs.IntVar(&cfg.DeliverEvents, "deliver-events", 10_000, "events for one delivery worker to deliver against its SQL floor (0: skip)")
	fs.StringVar(&deliverWorkers, "deliver-workers", deliverWorkers, "comma-separated numbers of delivery workers that deliver -deliver-events together, each against one worker's floor")
	fs.BoolVar(&cfg.Deliver, "deliver", false, "the server delivers its events (order.paid, …) to a local endpoint during the Settle runs: compare with a run without")
	fs.BoolVar(&cfg.StatementCounts, "round-trips", true, "count round trips with pg_stat_statements (restarts the throwaway cluster once to load it)")
	fs.StringVar(&jsonPath, "json", "", "also write the report, every run included, as JSON to this file")
	fs.StringVar(&cfg.Dir, "dir", "", "keep the server logs here (default: a temp dir, removed)")
	fs.BoolVar(&cfg.Profile, "profile", false, "write a CPU profile of the server during the last Settle run of each point into -dir (go tool pprof reads it)")
	fs.BoolVar(&cfg.Standby, "standby", false, "measure with a synchronous standby on the same machine: every commit waits for it")
	fs.BoolVar(&cfg.Citus, "citus", false, "measure Settle alone (no SQL floors, transport or drain) on a throwaway Citus cluster, a coordinator and two workers, with each node's CPU per order; needs scripts/citus-install")
	fs.Func("server-env", "KEY=VALUE added to the server's environment, e.g. GOMAXPROCS=1 (repeatable)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("%q is not KEY=VALUE", s)
		}
		srv.Env = append(srv.Env, s)
		return nil
	})
	fs.Func("server-arg", "argument added to the server's (settle bench-server, which takes serve's flags), e.g. --db-max-conns=8 (repeatable)", func(s string) error {
		srv.Args = append(srv.Args, s)
		return nil
	})
	fs.IntVar(&cfg.ClientProcs, "client-procs", 1, "GOMAXPROCS of the load client while it runs (0: the default)")
	fs.StringVar(&srv.Binary, "server-binary", srv.Binary, "settle binary to run as the server (to compare builds)")
	fs.BoolVar(&quiet, "q", false, "print only the report, no progress")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("settle bench takes no arguments, got %q", fs.Args())
	}
	var err error
	if cfg.Concurrency, err = clientCounts("-c", conc); err != nil {
		return err
	}
	if cfg.OneCallConcurrency, err = clientCounts("-one-call-c", oneConc); err != nil {
		return err
	}
	if cfg.RefundConcurrency, err = clientCounts("-refund-c", refConc); err != nil {
		return err
	}
	if cfg.CaptureConcurrency, err = clientCounts("-capture-c", capConc); err != nil {
		return err
	}
	if cfg.VoidConcurrency, err = clientCounts("-void-c", voidConc); err != nil {
		return err
	}
	if cfg.ColdConcurrency, err = clientCounts("-cold-c", coldConc); err != nil {
		return err
	}
	if cfg.DeliverWorkers, err = clientCounts("-deliver-workers", deliverWorkers); err != nil {
		return err
	}
	cfg.Server = srv
	if !quiet {
		cfg.Log = stderr
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonPath != "" {
		f, err := os.Create(jsonPath)
		if err != nil {
			return err
		}
		if err := rep.WriteJSON(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return rep.WriteTable(stdout)
}

// clientCounts parses a flag's comma-separated numbers of clients.
func clientCounts(flag, list string) ([]int, error) {
	var ns []int
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %q is not a whole number", flag, list, s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
