// Package postgrestest gives each test a fresh, migrated PostgreSQL
// database. It uses DATABASE_URL when set; otherwise it starts one
// throwaway cluster per test binary from the locally installed server
// binaries. Each test's database is cloned from a migrated template.
//
// A package that uses it calls Main from its TestMain.
package postgrestest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
)

var (
	once     sync.Once
	setupErr error
	cluster  *pgcluster.Cluster
	citus    *pgcluster.Citus // with SETTLE_TEST_CITUS=1, instead of cluster
	adminURL string           // a database to run CREATE DATABASE from
	serial   atomic.Int64
	prefix   = fmt.Sprintf("settle_test_%d_%d", os.Getpid(), rand.N(1_000_000))
	template = prefix + "_template"

	// A Citus cluster of CitusURL's own, when the tests do not all run on
	// Citus.
	citusOnce     sync.Once
	ownCitus      *pgcluster.Citus
	ownCitusError error
)

// Main runs the tests and then stops the cluster, if one was started.
func Main(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	if citus != nil {
		citus.Stop()
	}
	if ownCitus != nil {
		ownCitus.Stop()
	}
	os.Exit(code)
}

func setup() {
	ctx := context.Background()
	adminURL = os.Getenv("DATABASE_URL")
	if Citus() {
		setupErr = setupCitus(ctx)
		return
	}
	if adminURL == "" {
		// Tests run with fsync off; benchmarks that measure commits set
		// SETTLE_TEST_DURABLE=1 to keep PostgreSQL's durable defaults.
		fast := os.Getenv("SETTLE_TEST_DURABLE") != "1"
		cluster, setupErr = pgcluster.Start(ctx, pgcluster.Options{Fast: fast})
		if setupErr != nil {
			setupErr = fmt.Errorf("start a throwaway PostgreSQL (or set DATABASE_URL): %w", setupErr)
			return
		}
		adminURL = cluster.URL("postgres")
	}
	if setupErr = exec(ctx, adminURL, "CREATE DATABASE "+template); setupErr != nil {
		return
	}
	setupErr = migrate(ctx, withDB(adminURL, template))
}

// URL creates a fresh migrated database for the test and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	name := fmt.Sprintf("%s_%d", prefix, serial.Add(1))
	createDB(t, name, template)
	return withDB(adminURL, name)
}

// Pool returns a pool on a fresh migrated database, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(context.Background(), URL(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDB returns url with its database replaced by db.
func withDB(url, db string) string {
	scheme, rest, isURL := strings.Cut(url, "://")
	if !isURL {
		return url + " dbname=" + db // a key=value DSN: the last setting wins
	}
	hostPart, query, hasQuery := strings.Cut(rest, "?")
	host, _, _ := strings.Cut(hostPart, "/")
	out := scheme + "://" + host + "/" + db
	if hasQuery {
		out += "?" + query
	}
	return out
}

// EmptyURL creates a fresh database with no schema at all, for tests of
// what happens before migrations, and returns its URL.
func EmptyURL(t testing.TB) string {
	t.Helper()
	URL(t) // sets up the server
	name := fmt.Sprintf("%s_empty_%d", prefix, serial.Add(1))
	createDB(t, name, "")
	return withDB(adminURL, name)
}

// Drop drops the database at url, terminating its connections, as an
// outage would.
func Drop(t testing.TB, url string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if citus != nil {
		if err := citus.DropDatabase(context.Background(), cfg.Database); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := exec(context.Background(), adminURL, "DROP DATABASE "+cfg.Database+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
}

// Citus reports whether the tests run on Citus (SETTLE_TEST_CITUS=1): a
// throwaway coordinator and two workers, every database a Citus database
// with Settle's tables distributed by merchant. The Citus extension must be
// installed (scripts/citus-install); without it the tests fail rather than
// pass on plain PostgreSQL.
func Citus() bool { return os.Getenv("SETTLE_TEST_CITUS") == "1" }

func setupCitus(ctx context.Context) error {
	var err error
	if citus, err = startCitus(ctx); err != nil {
		return fmt.Errorf("SETTLE_TEST_CITUS=1: %w", err)
	}
	adminURL = citus.URL("postgres")
	return nil
}

// startCitus starts a throwaway Citus cluster with the migrated template.
func startCitus(ctx context.Context) (*pgcluster.Citus, error) {
	// Four shards per table: enough to spread merchants over both workers,
	// few enough that making the template is quick.
	c, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{Fast: os.Getenv("SETTLE_TEST_DURABLE") != "1",
		ShardCount: 4})
	if err != nil {
		return nil, fmt.Errorf("start a throwaway Citus cluster: %w", err)
	}
	err = c.CreateDatabase(ctx, template, "")
	if err == nil {
		err = migrate(ctx, c.URL(template))
	}
	if err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func migrate(ctx context.Context, url string) error {
	pool, err := postgres.Open(ctx, url, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.Migrate(ctx, pool)
}

// CitusURL is URL on Citus, whatever SETTLE_TEST_CITUS says, for the tests
// that run on both engines in one run (the store's conformance suite).
// Without SETTLE_TEST_CITUS=1 it starts a Citus cluster of its own at its
// first call, once per test binary. Without the Citus extension
// (scripts/citus-install) the test is skipped, and fails when CI is set.
func CitusURL(t testing.TB) string {
	t.Helper()
	if Citus() {
		return URL(t)
	}
	if !pgcluster.CitusInstalled() {
		if os.Getenv("CI") != "" {
			t.Fatal(pgcluster.ErrCitusMissing)
		}
		t.Skip(pgcluster.ErrCitusMissing)
	}
	citusOnce.Do(func() { ownCitus, ownCitusError = startCitus(context.Background()) })
	if ownCitusError != nil {
		t.Fatal(ownCitusError)
	}
	name := fmt.Sprintf("%s_%d", prefix, serial.Add(1))
	if err := ownCitus.CreateDatabase(context.Background(), name, template); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ownCitus.DropDatabase(context.Background(), name); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	return ownCitus.URL(name)
}

// CitusPool is Pool on Citus (see CitusURL).
func CitusPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(context.Background(), CitusURL(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// createDB creates database name from template (none: an empty database)
// for the test, and drops it when the test ends.
func createDB(t testing.TB, name, template string) {
	t.Helper()
	ctx := context.Background()
	drop := func() error {
		return exec(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	if citus != nil {
		if err := citus.CreateDatabase(ctx, name, template); err != nil {
			t.Fatal(err)
		}
		drop = func() error { return citus.DropDatabase(context.Background(), name) }
	} else {
		sql := "CREATE DATABASE " + name + " TEMPLATE template0"
		if template != "" {
			sql = "CREATE DATABASE " + name + " TEMPLATE " + template
		}
		if err := exec(ctx, adminURL, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
}
