package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlepay/settle/internal/postgres"
)

const (
	// firstWait and lastWait bound the backoff between attempts to reach a
	// writable database at start.
	firstWait = 100 * time.Millisecond
	lastWait  = 5 * time.Second
	// durabilityEvery is how often a running process reads the database's
	// durability settings and standbys again.
	durabilityEvery = 30 * time.Second
)

// waitForDatabase returns once the database accepts writes, is migrated
// and keeps what it acknowledges. While there is no primary (the database
// restarts, or fails over) it tries again with bounded backoff, logging
// each failure, and the process is not ready meanwhile: an orchestrator's
// crash-loop backoff would leave it absent for minutes after the database
// came back. A database that is behind or that can lose acknowledged
// commits stops the process: waiting would not change it.
func (a *app) waitForDatabase(ctx context.Context) error {
	wait := firstWait
	for attempt := 1; ; attempt++ {
		err := a.checkDatabase(ctx)
		if err == nil {
			a.dbReady.Store(true)
			if attempt > 1 {
				a.log.Info("database reached", "attempts", attempt)
			}
			return nil
		}
		if errors.Is(err, postgres.ErrBehind) || errors.Is(err, postgres.ErrUnsafeDurability) || ctx.Err() != nil {
			return err
		}
		a.log.Warn("waiting for a writable database", "error", err, "attempt", attempt, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, lastWait)
	}
}

// checkDatabase checks once that the database accepts writes, is
// migrated, and keeps what it acknowledges.
func (a *app) checkDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lastWait)
	defer cancel()
	if err := postgres.Writable(ctx, a.pool); err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	if err := postgres.CheckMigrated(ctx, a.pool); err != nil {
		return err
	}
	d, err := postgres.ReadDurability(ctx, a.pool)
	if err != nil {
		return fmt.Errorf("read the database's durability settings: %w", err)
	}
	a.reportDurability(d, true)
	if err := d.Check(); err != nil {
		if !a.cfg.AllowUnsafeDatabase {
			return fmt.Errorf("refusing to start: %w (set it on, or SETTLE_ALLOW_UNSAFE_DATABASE=true for a test database)", err)
		}
		a.log.Warn("starting on a database that can lose acknowledged commits, as allowed", "error", err)
	}
	return nil
}

// ready is the readiness check (/readyz and gRPC health): the database has
// been reached at start and accepts writes now.
func (a *app) ready(ctx context.Context) error {
	if !a.dbReady.Load() {
		return errors.New("waiting for the database")
	}
	return postgres.Writable(ctx, a.pool)
}

// watchDurability reads the database's durability settings and standbys
// every durabilityEvery until ctx ends, so that a standby lost, or one
// turned asynchronous, shows in the metrics and the log while the process
// runs.
func (a *app) watchDurability(ctx context.Context) {
	t := time.NewTicker(durabilityEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, lastWait)
		d, err := postgres.ReadDurability(rctx, a.pool)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("read the database's durability settings", "error", err)
			}
			continue
		}
		a.reportDurability(d, false)
	}
}

// reportDurability sets the metrics, logs a status line when the settings
// change (or always, at start), and warns on every reading that shows a
// database which can lose commits when its machine is lost, or whose
// commits wait for a synchronous standby that is not there.
func (a *app) reportDurability(d postgres.Durability, always bool) {
	async := d.Standbys - d.SyncStandbys - d.UnknownStandbys
	a.metrics.Durability(d.Fsync, d.SynchronousCommit, d.WaitsForStandby(), d.SyncStandbys, async, d.UnknownStandbys)
	a.durabilityMu.Lock()
	changed := a.durability != d
	a.durability = d
	a.durabilityMu.Unlock()
	if always || changed {
		a.log.Info("database durability", "fsync", d.Fsync, "synchronous_commit", d.SynchronousCommit,
			"synchronous_standby_names", d.SynchronousStandbyNames, "standbys", d.Standbys,
			"sync_standbys", d.SyncStandbys, "unknown_standbys", d.UnknownStandbys)
	}
	if err := d.Check(); err != nil {
		a.log.Error("DATABASE CAN LOSE ACKNOWLEDGED COMMITS", "error", err)
	}
	if w := d.Warning(); w != "" {
		a.log.Warn("DATABASE CAN LOSE COMMITS IN A FAILOVER", "warning", w)
	}
	if s := d.Stall(); s != "" {
		a.log.Error("DATABASE COMMITS WAIT FOR A MISSING STANDBY", "error", s)
	}
}
