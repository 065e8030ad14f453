package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/failpoint"
)

// inject carries out the schedule: each fault at its instant, in its own
// goroutine, so that a long freeze or a slow recovery delays no other. It
// returns when the last fault is over.
func (h *harness) inject(ctx context.Context, schedule []Fault) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, f := range schedule {
		t := time.NewTimer(time.Until(h.started().Add(f.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wg.Go(func() { h.fault(ctx, f) })
	}
	// Let the clients run to the end of the duration.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(h.started().Add(h.cfg.Duration))):
	}
}

func (h *harness) fault(ctx context.Context, f Fault) {
	switch f.Kind {
	case Kill:
		h.procs[f.Target].send(ctx, command{kind: cmdKill, down: f.Down})
	case Arm:
		h.logf("%s", f)
		targets := []*process{h.procs[f.Target]}
		if f.Target == AllReconcilers {
			targets = h.recons
		}
		for _, p := range targets {
			p.send(ctx, command{kind: cmdKill, arm: f.Failpoint, down: f.Down})
		}
	case Freeze:
		h.logf("%s", f)
		if h.procs[f.Target].freeze(ctx, f.Down) {
			h.count(func(s *Summary) { s.Freezes++ })
		}
	case DBRestart:
		h.restartDB(ctx, f)
	case BackendKill:
		h.killBackends(ctx, f)
	}
}

// restartDB crashes PostgreSQL (immediate shutdown) and starts it again,
// recovering from the WAL; with a standby, it fails over to it instead.
func (h *harness) restartDB(ctx context.Context, f Fault) {
	h.dbMu.Lock()
	defer h.dbMu.Unlock()
	// Whether there is a standby is read under dbMu too: a failover still
	// in progress swaps the primary and the standby.
	if h.standby != nil {
		h.failover(ctx, f)
		return
	}
	node, name := h.cluster, "PostgreSQL"
	if h.citus != nil {
		// On Citus the workers take the crashes, in turn: a worker holds
		// its merchants' only copy, so its crash is the one that matters.
		i := int(f.Seed % uint64(len(h.citus.Workers)))
		node, name = h.citus.Workers[i], fmt.Sprintf("Citus worker %d", i+1)
	}
	h.logf("%s (%s)", f, name)
	node.Kill()
	t := time.NewTimer(f.Down)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	for try := 0; ; try++ {
		err := node.Start(context.WithoutCancel(ctx))
		if err == nil {
			break
		}
		h.logf("%s did not start again: %v", name, err)
		if try == 2 {
			h.problem("%s did not start again after an immediate shutdown: %v", name, err)
			return
		}
	}
	h.count(func(s *Summary) { s.DBRestarts++ })
	h.logf("%s is back", name)
}

// killBackends terminates a share of the run database's backends, chosen by
// the fault's seed, whatever each is doing.
func (h *harness) killBackends(ctx context.Context, f Fault) {
	h.dbMu.Lock() // not during a restart
	defer h.dbMu.Unlock()
	conn, err := pgx.Connect(ctx, h.cluster.URL("postgres"))
	if err != nil {
		h.logf("backend-kill: %v", err)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name <> 'settle-chaos' ORDER BY pid`, h.dbName)
	if err != nil {
		h.logf("backend-kill: %v", err)
		return
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		h.logf("backend-kill: %v", err)
		return
	}
	rng := newRand(f.Seed)
	var chosen []int32
	for _, pid := range pids {
		if rng.Float64() < f.Share {
			chosen = append(chosen, pid)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM unnest($1::int[]) AS pid`, chosen).Scan(&n); err != nil {
		h.logf("backend-kill: %v", err)
		return
	}
	h.count(func(s *Summary) { s.BackendKills++ })
	h.logf("%s: terminated %d of %d backends", f, n, len(pids))
}

// topUpFailpoints arms again, while the clients still run, each failpoint
// that has not fired yet, so that every run crashes at each of them.
func (h *harness) topUpFailpoints(ctx context.Context) {
	for _, fp := range []string{failpoint.AfterClaim, failpoint.AfterGateway, failpoint.MidBatch} {
		for try := 0; h.fired(fp) == 0 && try < 3 && ctx.Err() == nil; try++ {
			f := Fault{At: h.since(), Kind: Arm, Target: h.replicas[try%len(h.replicas)].name, Failpoint: fp}
			if fp == failpoint.MidBatch {
				f.Target, f.Down = AllReconcilers, 3*time.Second
			}
			h.logf("failpoint %s has not fired yet: arming it again", fp)
			h.fault(ctx, f)
			deadline := time.Now().Add(f.Down + 10*time.Second)
			for h.fired(fp) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if h.fired(fp) == 0 {
			h.problem("failpoint %s never fired", fp)
		}
	}
}

func (h *harness) fired(fp string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sum.Failpoints[fp]
}
