package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
)

// benchDB is the benchmark's own view of the database under test: it
// empties it between runs and reads the counters that say what a run cost.
type benchDB struct {
	cluster *pgcluster.Cluster // the coordinator, on Citus
	citus   *pgcluster.Citus   // nil on plain PostgreSQL
	// standby is the primary's synchronous standby, when measured with one.
	standby *pgcluster.Cluster
	url     string
	pool    *pgxpool.Pool
	// pgss says whether pg_stat_statements counts statements (round trips).
	pgss       bool
	postmaster int
	// nodes are the postmasters of the coordinator and the workers, on
	// Citus; postmaster is then the coordinator's.
	nodes   []int
	version string
}

// dbName is the database every part of the benchmark uses.
const dbName = "settle_bench"

// startDB starts a throwaway cluster the usual way (fsync and
// synchronous_commit on), creates and migrates the benchmark's database
// and, when pgss, restarts the cluster once with pg_stat_statements loaded
// so that round trips can be counted.
//
// With standby, every commit also waits for a synchronous standby (on the
// same machine: the figure is the cost of the protocol, not of a network).
func startDB(ctx context.Context, pgss, standby bool) (_ *benchDB, err error) {
	opts := pgcluster.Options{}
	if standby {
		opts.Config = []string{"synchronous_standby_names=*"}
	}
	cluster, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	var sb *pgcluster.Cluster
	defer func() {
		if err != nil {
			if sb != nil {
				sb.Stop()
			}
			cluster.Stop()
		}
	}()
	if standby {
		if sb, err = cluster.StartStandby(ctx, "bench-standby"); err != nil {
			return nil, fmt.Errorf("start the standby: %w", err)
		}
	}
	db, err := setupDB(ctx, cluster, nil, pgss)
	if err != nil {
		return nil, err
	}
	db.standby = sb
	return db, nil
}

// startCitusDB is startDB on a throwaway Citus cluster (a coordinator and
// two workers, durable, Citus's default 32 shards per table), without
// pg_stat_statements.
func startCitusDB(ctx context.Context) (_ *benchDB, err error) {
	cc, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{})
	if err != nil {
		return nil, fmt.Errorf("start Citus: %w", err)
	}
	defer func() {
		if err != nil {
			cc.Stop()
		}
	}()
	if err := cc.CreateDatabase(ctx, dbName, ""); err != nil {
		return nil, err
	}
	return setupDB(ctx, cc.Coordinator, cc, false)
}

func setupDB(ctx context.Context, cluster *pgcluster.Cluster, cc *pgcluster.Citus, pgss bool) (_ *benchDB, err error) {
	admin, err := postgres.Open(ctx, cluster.URL("postgres"), 1)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if pgss {
		var available bool
		if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&available); err != nil {
			return nil, err
		}
		if pgss = available; pgss {
			// pgcluster.Start has no option for server settings: set it for
			// the next start, and restart (an immediate shutdown, and a
			// recovery of an all but empty cluster).
			if _, err := admin.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`); err != nil {
				return nil, err
			}
			admin.Close()
			cluster.Kill()
			if err := cluster.Start(ctx); err != nil {
				return nil, fmt.Errorf("restart PostgreSQL with pg_stat_statements: %w", err)
			}
			if admin, err = postgres.Open(ctx, cluster.URL("postgres"), 1); err != nil {
				return nil, err
			}
			defer admin.Close()
		}
	}
	if cc == nil {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
			return nil, fmt.Errorf("create database: %w", err)
		}
	}
	db := &benchDB{cluster: cluster, citus: cc, url: cluster.URL(dbName), pgss: pgss}
	if db.pool, err = postgres.Open(ctx, db.url, 2); err != nil {
		return nil, err
	}
	if err := postgres.Migrate(ctx, db.pool); err != nil {
		db.pool.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if pgss {
		if _, err := db.pool.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
			db.pool.Close()
			return nil, err
		}
	}
	if err := db.seed(ctx); err != nil {
		db.pool.Close()
		return nil, err
	}
	if err := db.pool.QueryRow(ctx, `SHOW server_version`).Scan(&db.version); err != nil {
		db.pool.Close()
		return nil, err
	}
	// The cluster keeps its data in "data" under its private directory
	// when it was not given a data directory.
	if db.postmaster, err = postmasterPID(filepath.Join(cluster.Dir(), "data")); err != nil {
		db.pool.Close()
		return nil, err
	}
	if cc != nil {
		for _, n := range cc.Nodes() {
			pid, err := postmasterPID(filepath.Join(n.Dir(), "data"))
			if err != nil {
				db.pool.Close()
				return nil, err
			}
			db.nodes = append(db.nodes, pid)
		}
	}
	return db, nil
}

// historyOrders is how many settled orders the database holds before the
// first run.
const historyOrders = 50_000

// seedSQL makes historyOrders PAID orders, each with its attempt and its
// three events, as the charge path leaves them, their order.paid events
// long delivered (deliver_at NULL); then a refund of 1 from each, with its
// three events, as the refund path leaves it (the order
// PARTIALLY_REFUNDED, the refund.succeeded event delivered).
var seedSQL = []string{
	`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
	 SELECT gen_random_uuid(), 'default', 'history-' || i, 100 + i, 'GBP', 'tok_ok', 'instant', 'PAID'
	 FROM generate_series(1, $1::int) i`,
	`INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency, outcome, gateway_charge_id, settled_at)
	 SELECT gen_random_uuid(), id, merchant_id, 'req-' || merchant_reference, payment_method, amount_minor, currency, 'succeeded', 'ch_history', now()
	 FROM orders`,
	`UPDATE orders SET current_attempt = a.id FROM charge_attempts a
	 WHERE a.merchant_id = orders.merchant_id AND a.order_id = orders.id`,
	`INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id, deliver_at)
	 SELECT o.merchant_id, o.id, e.from_state, e.to_state, e.event, 'api', CASE WHEN e.event <> 'create' THEN o.current_attempt END,
	   NULL
	 FROM orders o, (VALUES (1, NULL, 'PENDING', 'create'), (2, 'PENDING', 'CHARGING', 'charge'), (3, 'CHARGING', 'PAID', 'succeed'))
	   AS e(n, from_state, to_state, event)
	 ORDER BY o.id, e.n`,
	`INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, actor, state,
	   outcome, gateway_refund_id, settled_at)
	 SELECT merchant_id, gen_random_uuid(), id, 'refund-' || merchant_reference, 1, 1, currency, 'api', 'SUCCEEDED',
	   'succeeded', 're_history', now()
	 FROM orders`,
	`UPDATE orders SET state = 'PARTIALLY_REFUNDED', refunded_minor = 1`,
	`INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, deliver_at)
	 SELECT r.merchant_id, r.order_id, r.id, e.from_state, e.to_state, e.event, 'api', NULL
	 FROM refunds r, (VALUES (1, NULL, 'PENDING', 'create'), (2, 'PENDING', 'REFUNDING', 'refund'), (3, 'REFUNDING', 'SUCCEEDED', 'succeed'))
	   AS e(n, from_state, to_state, event)
	 ORDER BY r.id, e.n`,
}

// seed gives the database a history, and its statistics. Settle runs
// against tables that hold orders and refunds and that autovacuum has
// analyzed: on a freshly migrated, never analyzed database, PostgreSQL's
// generic plan for "WHERE id = $1 AND merchant_id = $2" scans orders by
// merchant (every order, for a single merchant), and its plan for a
// refund's "request_id = $3" reads every refund, until autovacuum's first
// ANALYZE; the benchmark would measure that minute rather than the steady
// state.
func (db *benchDB) seed(ctx context.Context) error {
	for i, q := range seedSQL {
		var args []any
		if i == 0 {
			args = []any{historyOrders}
		}
		if _, err := db.pool.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("seed the database's history: %w", err)
		}
	}
	if _, err := db.pool.Exec(ctx, `VACUUM ANALYZE orders, charge_attempts, order_events, refunds, refund_events`); err != nil {
		return fmt.Errorf("seed the database's history: %w", err)
	}
	return nil
}

// refundFloorOrders makes the PAID orders of the refund floor, one per
// pgbench client (merchant reference refund-floor-<client_id>), with an
// amount no run refunds in full.
func (db *benchDB) refundFloorOrders(ctx context.Context, clients int) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency,
		payment_method, gateway, state)
	SELECT gen_random_uuid(), 'default', 'refund-floor-' || n, 1000000000000, 'GBP', 'tok_ok', 'instant', 'PAID'
	FROM generate_series(0, $1 - 1) AS n
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING`, clients)
	if err != nil {
		return fmt.Errorf("make the refund floor's orders: %w", err)
	}
	return nil
}

// captureFloorOrders makes the AUTHORIZED orders (capture manual) of the
// capture floor, one per pgbench client (merchant reference
// capture-floor-<client_id>), each with its authorizing attempt and a hold
// no run captures in full.
func (db *benchDB) captureFloorOrders(ctx context.Context, clients int) error {
	_, err := db.pool.Exec(ctx, `WITH o AS (
		INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
			current_attempt, capture_mode, authorized_minor, capture_before)
		SELECT gen_random_uuid(), 'default', 'capture-floor-' || n, 1000000000000, 'GBP', 'tok_ok', 'instant',
			'AUTHORIZED', gen_random_uuid(), 'manual', 1000000000000, now() + interval '7 days'
		FROM generate_series(0, $1 - 1) AS n
		ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
		RETURNING *
	)
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency,
		outcome, gateway_charge_id, settled_at)
	SELECT current_attempt, id, merchant_id, 'req-' || merchant_reference, payment_method, amount_minor, currency,
		'succeeded', 'ch_' || merchant_reference, now()
	FROM o`, clients)
	if err != nil {
		return fmt.Errorf("make the capture floor's orders: %w", err)
	}
	return nil
}

func (db *benchDB) close() {
	db.pool.Close()
	if db.citus != nil {
		db.citus.Stop()
		return
	}
	db.cluster.Stop()
	if db.standby != nil {
		db.standby.Stop()
	}
}

// nodeCPU returns the CPU time of each Citus node (coordinator first), or
// nil on plain PostgreSQL.
func (db *benchDB) nodeCPU() ([]time.Duration, error) {
	var out []time.Duration
	for _, pid := range db.nodes {
		d, err := treeCPU(pid)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// checkpoint checkpoints, so that no run pays for full-page images that the
// run before it owes, and zeroes the statement counts. The tables keep
// growing from run to run, as a payment database does; the runs of each
// point are interleaved, so that each kind meets the same sizes.
func (db *benchDB) checkpoint(ctx context.Context) error {
	if _, err := db.pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if db.pgss {
		if _, err := db.pool.Exec(ctx, `SELECT /* settle-bench */ pg_stat_statements_reset()`); err != nil {
			return fmt.Errorf("reset pg_stat_statements: %w", err)
		}
	}
	return nil
}

// counters are the database's running totals that a run's cost is read from.
type counters struct {
	// xid is the next transaction id: every transaction that writes takes
	// one, so its growth counts commits (and aborts, which fail a run).
	xid int64
	// calls counts the statements executed in the benchmark's database,
	// less the benchmark's own; -1 without pg_stat_statements. With no
	// pipelining, one statement is one round trip.
	calls int64
	// cpu is the CPU time of PostgreSQL: the postmaster and every backend.
	cpu time.Duration
}

func (db *benchDB) counters(ctx context.Context) (counters, error) {
	c := counters{calls: -1}
	if err := db.pool.QueryRow(ctx, `SELECT /* settle-bench */ pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&c.xid); err != nil {
		return c, fmt.Errorf("read the transaction id: %w", err)
	}
	if db.pgss {
		err := db.pool.QueryRow(ctx, `SELECT /* settle-bench */ coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%settle-bench%'`).Scan(&c.calls)
		if err != nil {
			return c, fmt.Errorf("read pg_stat_statements: %w", err)
		}
	}
	var err error
	if c.cpu, err = treeCPU(db.postmaster); err != nil {
		return c, fmt.Errorf("read PostgreSQL's CPU time: %w", err)
	}
	if db.citus != nil {
		nodes, err := db.nodeCPU()
		if err != nil {
			return c, fmt.Errorf("read the Citus nodes' CPU time: %w", err)
		}
		c.cpu = 0
		for _, d := range nodes {
			c.cpu += d
		}
	}
	return c, nil
}
