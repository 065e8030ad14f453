package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/pgcluster"
)

// FailoverMode says whether, and how, a run fails PostgreSQL over.
type FailoverMode string

// The failover modes.
const (
	// NoFailover restarts the one PostgreSQL in place.
	NoFailover FailoverMode = ""
	// FailoverSync fails over to a synchronous standby: every commit a
	// client was told of is on both servers.
	FailoverSync FailoverMode = "sync"
	// FailoverAsync fails over to an asynchronous standby, which can lack
	// the last commits: a run shows what that breaks.
	FailoverAsync FailoverMode = "async"
)

// startDB starts a durable PostgreSQL (fsync on, so that an immediate
// shutdown is a real crash and recovery) and, for a failover run, its
// standby.
func (h *harness) startDB(ctx context.Context) error {
	opts := pgcluster.Options{}
	switch h.cfg.Failover {
	case NoFailover:
	case FailoverSync:
		opts.Rewindable, opts.Config = true, []string{"synchronous_standby_names=*"}
	case FailoverAsync:
		opts.Rewindable = true
	default:
		return fmt.Errorf("chaos: failover %q is none of sync, async", h.cfg.Failover)
	}
	var err error
	if h.cluster, err = pgcluster.Start(ctx, opts); err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	h.names = map[*pgcluster.Cluster]string{h.cluster: "pg-a"}
	if h.cfg.Failover == NoFailover {
		return nil
	}
	if h.standby, err = h.cluster.StartStandby(ctx, "pg-b"); err != nil {
		h.cluster.Stop()
		return fmt.Errorf("start the standby: %w", err)
	}
	h.names[h.standby] = "pg-b"
	return nil
}

// stopDB stops the servers, keeping their logs.
func (h *harness) stopDB() {
	for c, name := range h.names {
		copyFile(filepath.Join(c.Dir(), "postgres.log"), filepath.Join(h.dir, name+".log"))
		c.Stop()
	}
}

// dbURL is the URL of database db for Settle's processes: every server's
// socket, when there is a standby, so that they follow the primary.
func (h *harness) dbURL(db string) string {
	if h.standby == nil {
		return h.cluster.URL(db)
	}
	return pgcluster.URLs(db, h.cluster, h.standby)
}

// failover cuts the standby off from the primary for a while (its WAL
// sender frozen), then loses the primary's machine (an immediate
// shutdown, which is what its clients see of a dead machine), promotes
// the standby after the fault's downtime (the failover manager's
// detection), measures until a replica writes again, and rewinds the old
// primary to follow the new one.
//
// On one machine a standby keeps up, so without the cut an asynchronous
// standby would lose nothing and the async run would prove nothing. With
// it, an asynchronous standby lacks every commit of the cut, which the
// primary acknowledged to Settle and Settle to its clients; a synchronous
// standby's primary holds those commits unacknowledged, so Settle answers
// UNAVAILABLE during the cut and nothing it said is lost.
//
// The caller holds dbMu.
func (h *harness) failover(ctx context.Context, f Fault) {
	old, next := h.cluster, h.standby
	cut := failoverCut(f)
	h.logf("%s: failover from %s to %s, cut off from it for %s first", f, h.names[old], h.names[next], cut.Round(time.Millisecond))
	if err := old.FreezeSender(ctx, h.names[next]); err != nil {
		h.logf("failover: %v; failing over without the cut", err)
	} else {
		select {
		case <-time.After(cut):
		case <-ctx.Done():
		}
	}
	behind := walPosition(ctx, old, "pg_current_wal_lsn()")
	killed := time.Now()
	old.Kill()
	select {
	case <-time.After(f.Down):
	case <-ctx.Done():
	}
	bg := context.WithoutCancel(ctx)
	if behind != "" {
		if lost := walPosition(bg, next, "pg_wal_lsn_diff('"+behind+"', pg_last_wal_receive_lsn())"); lost != "" {
			h.logf("failover: %s never received %s bytes of %s's WAL", h.names[next], lost, h.names[old])
		}
	}
	if err := next.Promote(bg); err != nil {
		h.problem("failover: promote %s: %v", h.names[next], err)
		return
	}
	noPrimary := time.Since(killed)
	h.cluster, h.standby = next, old
	// With a synchronous standby, commits wait until the old primary
	// follows; the probe runs meanwhile.
	served := make(chan time.Duration, 1)
	go func() { served <- h.probe(bg, killed) }()
	if err := old.Rejoin(bg, next, h.names[old]); err != nil {
		h.problem("failover: rejoin %s as a standby: %v", h.names[old], err)
	}
	serveAgain := <-served
	h.count(func(s *Summary) {
		s.Failovers++
		s.NoPrimary = append(s.NoPrimary, noPrimary)
		s.ServeAgain = append(s.ServeAgain, serveAgain)
	})
	h.logf("failover done: no primary for %s, Settle wrote again after %s", noPrimary.Round(time.Millisecond), serveAgain.Round(time.Millisecond))
}

// failoverCut is how long a failover cuts the standby off before the
// primary is lost: 1 to 2 seconds, drawn from the fault's seed, so that
// the sync and async runs of one seed cut at the same instants.
func failoverCut(f Fault) time.Duration {
	return time.Second + time.Duration(f.Seed%uint64(time.Second))
}

// walPosition evaluates expr, a WAL position or a distance between two,
// on c; "" when c cannot say.
func walPosition(ctx context.Context, c *pgcluster.Cluster, expr string) string {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return ""
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	if err := conn.QueryRow(ctx, "SELECT ("+expr+")::text").Scan(&v); err != nil {
		return ""
	}
	return v
}

// probe creates orders through the replicas, in turn, until one is
// created, and returns the time since since.
func (h *harness) probe(ctx context.Context, since time.Time) time.Duration {
	for i := 0; ; i++ {
		c := h.clients[i%len(h.clients)]
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.CreateOrder(cctx, &settlev1.CreateOrderRequest{
			MerchantReference: "failover-probe-" + strconv.FormatInt(since.UnixNano(), 36) + "-" + strconv.Itoa(i),
			Amount:            &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
		cancel()
		if err == nil || ctx.Err() != nil || time.Since(since) > time.Minute {
			if err != nil {
				h.logf("failover probe: %v", err)
			}
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// median is the middle of ds (0 for none).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}
