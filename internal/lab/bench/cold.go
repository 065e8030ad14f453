package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
)

// The cold series: each run starts from an empty database, migrated by
// the server's binary (settle migrate up) as a new deployment's is, with
// autovacuum as the cluster has it, and a new server on it under load
// from its first second, with no warm-up. A connection caches the plan of
// each statement it prepares; plans made while the tables are nearly
// empty, or analyzed so, can scan them whole as they grow (#35: 865
// orders/s for the first 15 s of a new database, against 2,100 warm).

// coldWindow is the start that the cold series judges, and coldSlice the
// slices it is shown in.
const (
	coldWindow = 15 * time.Second
	coldSlice  = 5 * time.Second
)

// growingTables are the tables that the order paths (CreateOrder and
// ChargeOrder, CreateAndChargeOrder) grow: a sequential scan of one costs
// more with every order.
var growingTables = []string{"orders", "charge_attempts", "order_events"}

// coldRun is one run of a path on a new database at c clients: newOp
// makes its operation (orderOp, oneCallOp).
func (b *benchmark) coldRun(ctx context.Context, c int, newOp func(*grpc.ClientConn, string) func(int) op) (_ ColdRun, err error) {
	b.seq++
	name := fmt.Sprintf("settle_cold%d", b.seq)
	if err := b.db.createDatabase(ctx, name); err != nil {
		return ColdRun{}, err
	}
	defer func() { err = errors.Join(err, b.db.dropDatabase(ctx, name)) }()
	url := b.db.cluster.URL(name)
	if err := migrateWith(ctx, b.cfg.Server, url); err != nil {
		return ColdRun{}, err
	}
	before, err := b.db.tableReads(ctx, name)
	if err != nil {
		return ColdRun{}, err
	}
	srv, err := startServer(ctx, b.cfg.Server, url, b.dir, fmt.Sprintf("cold-c%d-%d", c, b.seq), false)
	if err != nil {
		return ColdRun{}, err
	}
	var res loadResult
	m, err := b.measure(ctx, srv, true, func() (work, error) {
		var err error
		res, err = b.load(ctx, c, b.cfg.Duration, newOp(srv.conn, name))
		return loadWork(res, err)
	})
	if err != nil {
		err = fmt.Errorf("%w\nserver log: %s", err, srv.logTail())
	}
	// The server's backends report their scans as they end.
	if serr := srv.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return ColdRun{}, err
	}
	after, err := b.db.tableReads(ctx, name)
	if err != nil {
		return ColdRun{}, err
	}
	// pg_stat_statements counts the benchmark's own database, not this one.
	m.StatementsPerOp, m.RoundTripsPerOp = -1, -1
	r := ColdRun{Measurement: m, Tables: map[string]TableReads{}}
	for table, a := range after {
		was := before[table]
		if d := (TableReads{Scans: a.Scans - was.Scans, RowsRead: a.RowsRead - was.RowsRead,
			IndexRowsFetched: a.IndexRowsFetched - was.IndexRowsFetched}); d.Scans > 0 || d.IndexRowsFetched > 0 {
			r.Tables[table] = d
		}
	}
	whole, first := int(b.cfg.Duration/time.Second), int(b.firstWindow()/time.Second)
	r.FirstPerSecond = round(float64(sum(res.answered[:first]))/float64(first), 1)
	for s, n := 0, int(coldSlice/time.Second); s+n <= whole; s += n {
		r.SlicesPerSecond = append(r.SlicesPerSecond, round(float64(sum(res.answered[s:s+n]))/float64(n), 1))
	}
	return r, nil
}

// firstWindow is the start of a cold run judged: coldWindow, or the whole
// run if shorter.
func (b *benchmark) firstWindow() time.Duration {
	return min(coldWindow, b.cfg.Duration.Truncate(time.Second))
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

// migrateWith migrates the database at url with the server's binary, as a
// deployment does before its first server starts.
func migrateWith(ctx context.Context, s Server, url string) error {
	cmd := exec.CommandContext(ctx, s.Binary, "migrate", "up")
	cmd.Env = append(append(os.Environ(), s.Env...), "DATABASE_URL="+url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("settle migrate up: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// createDatabase creates an empty database (a Citus database on Citus)
// beside the benchmark's own.
func (db *benchDB) createDatabase(ctx context.Context, name string) error {
	if db.citus != nil {
		return db.citus.CreateDatabase(ctx, name, "")
	}
	if _, err := db.pool.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func (db *benchDB) dropDatabase(ctx context.Context, name string) error {
	if db.citus != nil {
		return db.citus.DropDatabase(ctx, name)
	}
	if _, err := db.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// shardSuffix is the suffix of a Citus shard's table name (orders_102008).
var shardSuffix = regexp.MustCompile(`_[0-9]+$`)

// tableReads reads the sequential scans and index fetches of each table of database name from
// pg_stat_user_tables: on Citus those of every node, a table's shards
// summed under its name. A backend reports its counts when it goes idle
// (at most once a second) and when it ends: the server's have, once its
// connections are gone, which it waits for (a few seconds at most). On
// Citus, nodes keep connections to each other (application name
// citus_internal), and those that served the server's end with its
// connections to the coordinator, which is read first.
func (db *benchDB) tableReads(ctx context.Context, name string) (map[string]TableReads, error) {
	urls := []string{db.cluster.URL(name)}
	if db.citus != nil {
		urls = urls[:0]
		for _, n := range db.citus.Nodes() {
			urls = append(urls, n.URL(name))
		}
	}
	out := map[string]TableReads{}
	for _, url := range urls {
		if err := func() error {
			cfg, err := pgx.ParseConfig(url)
			if err != nil {
				return err
			}
			if db.citus != nil {
				// Citus hides shards from other clients' catalog reads.
				cfg.RuntimeParams["citus.override_table_visibility"] = "off"
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				var others int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
					AND application_name NOT LIKE 'citus_internal%'`).Scan(&others); err != nil {
					return err
				}
				if others == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if db.citus != nil && url != urls[0] {
				time.Sleep(time.Second) // for the workers' backends to end after the coordinator's
			}
			rows, err := conn.Query(ctx, `SELECT relname, coalesce(seq_scan, 0), coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0)
				FROM pg_stat_user_tables`)
			if err != nil {
				return err
			}
			for rows.Next() {
				var table string
				var s TableReads
				if err := rows.Scan(&table, &s.Scans, &s.RowsRead, &s.IndexRowsFetched); err != nil {
					return err
				}
				if db.citus != nil {
					table = shardSuffix.ReplaceAllString(table, "")
				}
				t := out[table]
				out[table] = TableReads{Scans: t.Scans + s.Scans, RowsRead: t.RowsRead + s.RowsRead,
					IndexRowsFetched: t.IndexRowsFetched + s.IndexRowsFetched}
			}
			return rows.Err()
		}(); err != nil {
			return nil, fmt.Errorf("read the sequential scans of %s: %w", name, err)
		}
	}
	return out, nil
}

// coldSeries sums up the cold runs of a path against its warm runs.
func coldSeries(runs []ColdRun, window time.Duration, warm float64) *Cold {
	ms := make([]Measurement, len(runs))
	for i, r := range runs {
		ms[i] = r.Measurement
	}
	med := ColdRun{Measurement: summarize(ms).Median, Tables: map[string]TableReads{}}
	med.FirstPerSecond = median(runs, func(r ColdRun) float64 { return r.FirstPerSecond })
	for i := range runs[0].SlicesPerSecond {
		med.SlicesPerSecond = append(med.SlicesPerSecond, median(runs, func(r ColdRun) float64 { return r.SlicesPerSecond[i] }))
	}
	tables := map[string]bool{}
	for _, r := range runs {
		for t := range r.Tables {
			tables[t] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(tables)) {
		med.Tables[t] = TableReads{
			Scans:            int64(median(runs, func(r ColdRun) float64 { return float64(r.Tables[t].Scans) })),
			RowsRead:         int64(median(runs, func(r ColdRun) float64 { return float64(r.Tables[t].RowsRead) })),
			IndexRowsFetched: int64(median(runs, func(r ColdRun) float64 { return float64(r.Tables[t].IndexRowsFetched) })),
		}
	}
	return &Cold{Median: med, Runs: runs, Window: window.String(), Warm: warm, VsWarm: ratio(med.FirstPerSecond, warm)}
}
