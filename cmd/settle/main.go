// Command settle is Settle's one binary: the gRPC API (serve), the
// reconciler sidecar (reconcile), schema migrations (migrate), a gateway
// simulator (gatewaysim), and all of them at once on a throwaway database
// (dev).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		name := "settle"
		if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
			name += " " + os.Args[1]
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

const usage = `usage: settle <command> [flags]

commands:
  serve       serve the gRPC API
  reconcile   run the reconciler sidecar (and the webhook delivery worker)
  deliver     run the webhook delivery worker alone
  audit       audit a gateway account's records against Settle's over a window
  migrate     migrate up | migrate status
  dev         everything in one process on a throwaway PostgreSQL
  gatewaysim  run the gateway simulator
  chaos       run everything under faults; check no money was lost or taken twice
  bench       measure Settle against PostgreSQL's own limit (pgbench floors, gRPC load)
  probe       GET a URL, exit 0 on a 2xx answer (container health checks)
  config      print the configuration reference (-markdown: as the table in
              docs/operations.md); "settle config <command> [flags]" prints the
              effective configuration of that command, as <command> -print-config

Run "settle <command> -h" for its flags.
`

// run runs the command args name. A -h or a -print-config is no failure.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errPrinted) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	case "audit":
		return runAudit(ctx, args, getenv, stdout, stderr)
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
		switch {
		case len(args) == 0:
			printReference(stdout)
		case len(args) == 1 && args[0] == "-markdown":
			printReferenceTable(stdout)
		case args[0] == "config" || args[0] == "-h" || args[0] == "--help":
			fmt.Fprintln(stderr, "usage: settle config [-markdown] | settle config <command> [flags]")
			return nil
		default:
			// A command prints its flags' output, -print-config's
			// included, to its stderr; here that output is the answer.
			return dispatch(ctx, append([]string{args[0], "-print-config"}, args[1:]...), getenv, stderr, stdout)
		}
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
