// Command settle is Settle's one binary: the gRPC API (serve), the
// reconciler sidecar (reconcile), schema migrations (migrate), a gateway
// simulator (gatewaysim), and all of them at once on a throwaway database
// (dev).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "settle:", err)
		os.Exit(1)
	}
}

const usage = `usage: settle <command> [flags]

commands:
  serve       serve the gRPC API
  reconcile   run the reconciler sidecar (and the webhook delivery worker)
  deliver     run the webhook delivery worker alone
  migrate     migrate up | migrate status
  dev         everything in one process on a throwaway PostgreSQL
  gatewaysim  run the gateway simulator
  chaos       run everything under faults; check no money was lost or taken twice
  bench       measure Settle against PostgreSQL's own limit (pgbench floors, gRPC load)
  probe       GET a URL, exit 0 on a 2xx answer (container health checks)
  config      print the configuration reference

Run "settle <command> -h" for its flags.
`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, args, getenv, stderr)
	case "reconcile":
		return runReconcile(ctx, args, getenv, stderr)
	case "deliver":
		return runDeliver(ctx, args, getenv, stderr)
	case "migrate":
		return runMigrate(ctx, args, getenv, stdout, stderr)
	case "dev":
		return runDev(ctx, args, getenv, stdout, stderr)
	case "gatewaysim":
		return runGatewaySim(ctx, args, getenv, stdout, stderr)
	case "chaos":
		return runChaos(ctx, args, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, args, getenv, stdout, stderr)
	case "bench-server":
		// Hidden: the server settle bench starts, with the lab's
		// instant gateway.
		return runBenchServer(ctx, args, getenv, stderr)
	case "probe":
		return runProbe(ctx, args, stderr)
	case "config":
		printReference(stdout)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
