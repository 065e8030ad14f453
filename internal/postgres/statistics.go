package postgres

import (
	"context"
	_ "embed"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statistics of a young database
//
// Each connection caches a generic plan of every statement it prepares,
// made from the statistics of the moment and kept until the next ANALYZE
// of a table it reads. On a new deployment (a new database, a new
// merchant's shard) the first plans are made while the tables hold a few
// rows, where reading a merchant's every order costs what reading one by
// its key does, and the plan that reads them all can win the tie. It
// then runs at every call while the table grows, until autovacuum's
// first ANALYZE, which can be minutes away: settle bench's cold series
// showed 0.5-0.8 of the warm throughput in the first 15 s, and one load
// test's plans kept scanning for minutes.
//
// So the store analyzes a table itself whenever it has doubled since its
// statistics were taken, from 100 rows up to a million; past that,
// autovacuum's own thresholds (10 % of the table) keep up, and a plan made
// for half the table is made for a table of the same shape. Each ANALYZE
// samples at most 30,000 rows and drops the plans cached on the table, so
// that the next calls plan for what is there: about twenty ANALYZEs per
// table over its first million rows. ANALYZE (SKIP_LOCKED) passes over a
// table another process is analyzing. On Citus the coordinator holds no
// rows of a distributed table: each worker's autovacuum analyzes its
// shards, and this does nothing there.

const (
	statsFloor = 100
	statsUpTo  = 1_000_000
)

//go:embed sql/grown_tables.sql
var grownTablesSQL string

// KeepStatistics analyzes, every interval until ctx ends, the tables that
// have doubled since their statistics were taken (see above).
func (s *Store) KeepStatistics(ctx context.Context, log *slog.Logger, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e, err := s.engine(ctx)
		if err != nil {
			continue // the database is not reachable yet
		}
		if _, citus := e.(*citusEngine); citus {
			return
		}
		if err := s.analyzeGrown(ctx, log); err != nil && ctx.Err() == nil {
			log.Warn("could not refresh the statistics of grown tables", "err", err)
		}
	}
}

// analyzeGrown analyzes the tables that have doubled since their last
// statistics.
func (s *Store) analyzeGrown(ctx context.Context, log *slog.Logger) error {
	rows, err := queryAll[struct {
		Name string `db:"name"`
	}](ctx, s.pool, grownTablesSQL, pgx.StrictNamedArgs{"floor": statsFloor, "up_to": statsUpTo})
	if err != nil {
		return err
	}
	for _, r := range rows {
		start := time.Now()
		if _, err := s.pool.Exec(ctx, "ANALYZE (SKIP_LOCKED) "+pgx.Identifier{r.Name}.Sanitize()); err != nil {
			return err
		}
		log.Debug("analyzed a grown table", "table", r.Name, "duration", time.Since(start))
	}
	return nil
}
