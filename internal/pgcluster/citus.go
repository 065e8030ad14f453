package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Citus is a throwaway Citus cluster on this machine: a coordinator and
// workers, each a Cluster of its own on its own unix socket, started (as
// root) as the postgres OS user. Clients connect to the coordinator only.
type Citus struct {
	// Coordinator is the node that clients connect to.
	Coordinator *Cluster
	// Workers hold the shards.
	Workers []*Cluster
}

// CitusOptions configure StartCitus.
type CitusOptions struct {
	// Workers is the number of worker nodes; 0 means 2.
	Workers int
	// ShardCount is the number of shards of each distributed table; 0
	// means Citus's default (32). Tests use fewer: distributing a table
	// creates every shard on the workers.
	ShardCount int
	// Fast trades durability for speed (fsync off), for tests.
	Fast bool
}

// ErrCitusMissing means the Citus extension is not installed in the local
// PostgreSQL.
var ErrCitusMissing = errors.New("the Citus extension is not installed in the local PostgreSQL: " +
	"run scripts/citus-install (it builds Citus once from the vendored source and caches it)")

// CitusInstalled reports whether the local PostgreSQL has the Citus
// extension.
func CitusInstalled() bool {
	bin, err := findBinDir()
	if err != nil {
		return false
	}
	// The binaries may be links (into /usr/local/bin, say) to the
	// installation, whose lib directory sits beside its bin.
	postgres, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres"))
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(filepath.Dir(postgres)), "lib", "citus.so"))
	return err == nil
}

// StartCitus starts a coordinator and workers. The cluster has no Citus
// database yet: CreateDatabase makes one.
func StartCitus(ctx context.Context, opts CitusOptions) (*Citus, error) {
	if !CitusInstalled() {
		return nil, ErrCitusMissing
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	config := []string{
		"shared_preload_libraries=citus",
		// A write that spans shards commits with two-phase commit.
		"max_prepared_transactions=200",
		// The coordinator's connections to workers count against theirs.
		"max_connections=400",
	}
	if opts.ShardCount > 0 {
		config = append(config, fmt.Sprintf("citus.shard_count=%d", opts.ShardCount))
	}
	c := &Citus{}
	node := func() (*Cluster, error) {
		return Start(ctx, Options{Fast: opts.Fast, Config: config})
	}
	var err error
	if c.Coordinator, err = node(); err != nil {
		return nil, fmt.Errorf("start the Citus coordinator: %w", err)
	}
	for i := range opts.Workers {
		w, err := node()
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start Citus worker %d: %w", i+1, err)
		}
		c.Workers = append(c.Workers, w)
	}
	return c, nil
}

// URL returns the coordinator's URL for database db.
func (c *Citus) URL(db string) string { return c.Coordinator.URL(db) }

// Nodes returns the coordinator and then the workers.
func (c *Citus) Nodes() []*Cluster { return append([]*Cluster{c.Coordinator}, c.Workers...) }

// CreateDatabase creates database name on every node. With no template it
// makes it a Citus database: the extension on every node, and the
// coordinator told where it and its workers are. With a template (a
// database made by CreateDatabase, with its tables distributed) each node
// copies its own part of the template, so the copy is a distributed
// database with the same shards, made in the time of a file copy.
func (c *Citus) CreateDatabase(ctx context.Context, name, template string) error {
	for _, n := range c.Nodes() {
		if err := createDatabase(ctx, n, name, template); err != nil {
			return fmt.Errorf("create database %s on %s: %w", name, n.Dir(), err)
		}
	}
	if template != "" {
		return nil
	}
	for _, n := range c.Nodes() {
		if err := execSQL(ctx, n.URL(name), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("create extension citus on %s: %w", n.Dir(), err)
		}
	}
	// Nodes are named by their socket directory: libpq takes a host that
	// starts with a slash as one.
	stmts := []string{fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %d)", quote(c.Coordinator.Dir()), 5432)}
	for _, w := range c.Workers {
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %d)", quote(w.Dir()), 5432))
	}
	return execSQL(ctx, c.URL(name), strings.Join(stmts, "; "))
}

func createDatabase(ctx context.Context, n *Cluster, name, template string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template == "" {
		return execSQL(ctx, n.URL("postgres"), sql)
	}
	sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	// Citus's maintenance daemon keeps a connection to each of its
	// databases, and comes back after it is ended; a template must have
	// none at the instant it is copied.
	for try := 0; ; try++ {
		err := execSQL(ctx, n.URL("postgres"), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "+
			"WHERE datname = "+quote(template)+" AND pid <> pg_backend_pid()")
		if err == nil {
			err = execSQL(ctx, n.URL("postgres"), sql)
		}
		var pgErr *pgconn.PgError
		if err == nil || try == 20 || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DropDatabase drops database name on every node, terminating its
// connections.
func (c *Citus) DropDatabase(ctx context.Context, name string) error {
	var errs []error
	for _, n := range c.Nodes() {
		errs = append(errs, execSQL(ctx, n.URL("postgres"),
			"DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"))
	}
	return errors.Join(errs...)
}

// Stop stops every node and removes their files.
func (c *Citus) Stop() {
	for _, n := range c.Nodes() {
		if n != nil {
			n.Stop()
		}
	}
}

func execSQL(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
