package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/settlepay/settle/internal/lab/chaos"
)

// runChaos runs Settle under chaos (see package chaos): this binary as
// replicas and reconcilers on a throwaway PostgreSQL, the gateway simulator,
// checkout clients, and faults from a seed. It prints one summary line and
// fails when an invariant was broken.
func runChaos(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: settle chaos [flags]

Runs Settle under chaos and checks that no money was lost or taken twice:
replicas and reconcilers of this binary as subprocesses, a throwaway durable
PostgreSQL, the gateway simulator and a fake Adyen with random faults, concurrent checkout
clients, and faults drawn from the seed (kills, failpoints, freezes,
PostgreSQL crashes, terminated backends). Rerun a failing seed with -seed.

`)
		fs.PrintDefaults()
	}
	var (
		cfg      chaos.Config
		faults   = chaos.DefaultFaults()
		gw       = chaos.DefaultGateway()
		showPlan bool
		quiet    bool
	)
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule and of the gateway's faults (0: a random one, printed)")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "how long clients run and faults are injected")
	fs.IntVar(&cfg.Clients, "clients", 16, "concurrent checkout clients")
	fs.IntVar(&cfg.Orders, "orders", 0, "orders to create over the run (0: 10 a second)")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "settle serve processes")
	fs.IntVar(&cfg.Reconcilers, "reconcilers", 2, "settle reconcile processes")
	fs.Float64Var(&cfg.DisputeShare, "dispute-share", 0, "share of the simulator's charges it disputes, at each of two rounds (0: the default, 0.1)")
	fs.Float64Var(&cfg.RouteShare, "route-share", chaos.DefaultRouteShare, "share of checkouts made with routes over refpsp accounts that go down, time out and decline technically, refpsp the last (0: none)")
	fs.Float64Var(&cfg.AdyenShare, "adyen-share", chaos.DefaultAdyenShare, "share of checkouts on a fake Adyen whose notifications are delayed, reordered, duplicated and lost (0: none)")
	fs.BoolVar(&cfg.Citus, "citus", false, "run on a throwaway Citus cluster (a coordinator and two workers); the database restarts crash a worker; needs scripts/citus-install")
	fs.Float64Var(&faults.KillsPerMinute, "kill-rate", faults.KillsPerMinute, "SIGKILLs of a replica or reconciler per minute")
	fs.Float64Var(&faults.FreezesPerMinute, "freeze-rate", faults.FreezesPerMinute, "SIGSTOPs of a replica (past its lease, within the no-show horizon) per minute")
	fs.Float64Var(&faults.DBRestartsPerMinute, "db-restart-rate", faults.DBRestartsPerMinute, "PostgreSQL immediate-mode restarts per minute (at least 2 per run unless 0)")
	fs.Float64Var(&faults.BackendKillsPerMinute, "backend-kill-rate", faults.BackendKillsPerMinute, "terminations of database backends per minute (at least 3 per run unless 0)")
	fs.IntVar(&faults.FailpointRounds, "failpoint-rounds", faults.FailpointRounds, "times each failpoint is armed (0: none)")
	fs.Float64Var(&gw.Decline, "gw-decline", gw.Decline, "gateway: rate of declines")
	fs.Float64Var(&gw.Timeout, "gw-timeout", gw.Timeout, "gateway: rate of timeouts after charging")
	fs.Float64Var(&gw.FiveXXAfterCharge, "gw-5xx-after-charge", gw.FiveXXAfterCharge, "gateway: rate of 500s after charging")
	fs.Float64Var(&gw.DropAfterCharge, "gw-drop-after-charge", gw.DropAfterCharge, "gateway: rate of dropped connections after charging")
	fs.Float64Var(&gw.FiveXXNoCharge, "gw-5xx", gw.FiveXXNoCharge, "gateway: rate of 503s without charging")
	fs.Float64Var(&gw.Slow, "gw-slow", gw.Slow, "gateway: rate of slow answers")
	fs.DurationVar(&gw.SlowMax, "gw-slow-max", gw.SlowMax, "gateway: slowest answer (well under the 1s gateway timeout)")
	fs.Float64Var(&gw.LookupNotFoundWhileInFlight, "gw-hide-timeouts", gw.LookupNotFoundWhileInFlight, "gateway: share of timeouts whose charge lookups do not see until the held answer is due")
	fs.Func("failover", "sync or async: run PostgreSQL as a primary and a (synchronous or asynchronous) standby, and make each database restart a failover, the standby cut off for 1-2s before the primary is killed (async is expected to find violations)", func(v string) error {
		if v != string(chaos.FailoverSync) && v != string(chaos.FailoverAsync) {
			return errors.New("want sync or async")
		}
		cfg.Failover = chaos.FailoverMode(v)
		return nil
	})
	fs.StringVar(&cfg.LogDir, "log-dir", "", "keep every process's log here (default: a temp dir, kept only when the run fails)")
	fs.BoolVar(&showPlan, "plan", false, "print the fault schedule of the seed and exit")
	fs.BoolVar(&quiet, "q", false, "print only the summary line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("settle chaos takes no arguments, got %q", fs.Args())
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64N(1 << 31)
	}
	cfg.Faults, cfg.Gateway = faults, gw
	if !quiet {
		cfg.Log = stderr
	}
	if showPlan {
		schedule, err := chaos.Plan(cfg)
		if err != nil {
			return err
		}
		for _, f := range schedule {
			fmt.Fprintln(stdout, f)
		}
		return nil
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary to run as replicas: %w", err)
	}
	cfg.Binary = bin
	sum, err := chaos.Run(ctx, cfg)
	fmt.Fprintln(stdout, sum)
	if err != nil {
		return err
	}
	if !sum.OK() {
		for _, p := range sum.Problems {
			fmt.Fprintln(stderr, "problem:", p)
		}
		return errors.New("chaos: the run failed; rerun it with -seed " + fmt.Sprint(cfg.Seed) + "; logs in " + sum.LogDir)
	}
	return nil
}
