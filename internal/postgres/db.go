// Package postgres implements Settle's storage on PostgreSQL with pgx: the
// order store and migrations. It is the only package that begins and
// commits transactions.
//
// Every statement is a file in sql/, embedded whole and run with named
// arguments (pgx.StrictNamedArgs), so that it can be read, and pasted into
// psql, as it runs; no SQL is put together at run time. Result columns are
// named after the db tags of the row types in rows.go.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
)

// Open connects a pool to url with at most maxConns connections. The URL
// may name several hosts (a cluster: postgres://h1,h2/settle); each new
// connection goes to the first that accepts writes, unless the URL sets
// target_session_attrs itself, so that after a failover the pool finds the
// new primary without a restart. No connection is made until one is used.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message can quote the URL, password included.
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL URL or DSN")
	}
	// Every Settle process writes: a connection to a standby would only
	// fail its statements with SQLSTATE 25006.
	if !strings.Contains(url, "target_session_attrs") {
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	// A connection whose server answered "read-only" is on a demoted or
	// fenced primary: it is handed to no one again, and the pool's next
	// connection looks for the writable server. (PrepareConn runs when a
	// connection is acquired; AfterRelease would cost a goroutine on every
	// release.)
	cfg.ConnConfig.Tracer = readOnlyTracer{}
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		return c.PgConn().CustomData()[readOnlyKey] == nil, nil
	}
	// Plans must not depend on when autovacuum last ran. A connection
	// caches the plan of each statement it prepares; one planned while a
	// new deployment's tables were nearly empty (or analyzed so) read them
	// whole at every run as they grew, until the next ANALYZE, which can
	// be minutes away: a sequential scan, or a hash join that reads the
	// outbox whole to update the few events it leased. Every hot statement
	// reads by key, so Settle's own connections plan no sequential scan
	// and no hash or merge join where another plan exists (operators' psql
	// is not affected); where two plans tie on nearly empty tables, the
	// statement names its key (see sql/README.md).
	// TestNoSequentialScansWhileTablesGrow counts the scans and
	// TestGenericPlansReadByKey reads every statement's cached plan.
	for _, p := range []string{"enable_seqscan", "enable_hashjoin", "enable_mergejoin"} {
		if _, set := cfg.ConnConfig.RuntimeParams[p]; !set {
			cfg.ConnConfig.RuntimeParams[p] = "off"
		}
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

const readOnlyKey = "settle.read_only"

// notDelegated is the SQLSTATE of a call of migration 00016's functions
// that Citus ran on the coordinator instead of delegating it to the
// merchant's worker. Citus stops delegating on a connection for good once
// it has lost count of its recursive planning (13.2.2), so the connection
// is closed, and the call is retried on another.
const notDelegated = "SE001"

// readOnlyTracer marks a connection whose statement failed with SQLSTATE
// 25006 (read_only_sql_transaction), or on Citus with notDelegated, for
// the pool to close it.
type readOnlyTracer struct{}

func (readOnlyTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (readOnlyTracer) TraceQueryEnd(_ context.Context, c *pgx.Conn, data pgx.TraceQueryEndData) {
	var pgErr *pgconn.PgError
	if errors.As(data.Err, &pgErr) && (pgErr.Code == "25006" || pgErr.Code == notDelegated) {
		c.PgConn().CustomData()[readOnlyKey] = true
	}
}

// maxRetries bounds the retries of a transaction refused with a
// serialization failure or a deadlock, or of a call that Citus did not
// delegate.
const maxRetries = 5

// retry runs fn until it succeeds, fails for good, or has been refused
// maxRetries times with SQLSTATE 40001 or 40P01, which PostgreSQL and the
// distributed engines that speak its protocol ask clients to retry, or
// notDelegated (whose connection the pool has closed).
func retry(ctx context.Context, fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		if err == nil || !retryable(err) || i == maxRetries {
			return translate(err)
		}
		backoff := time.Duration(1<<i)*5*time.Millisecond + rand.N(5*time.Millisecond)
		select {
		case <-ctx.Done():
			return translate(err)
		case <-time.After(backoff):
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == notDelegated)
}

// translate turns pgx errors into the domain's: a failure to reach or keep
// the database is order.ErrUnavailable; the domain's own errors pass.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var (
		pgErr   *pgconn.PgError
		valErr  *order.ValidationError
		confErr *order.ConflictError
		stErr   *order.StateError
	)
	switch {
	case errors.Is(err, order.ErrNotFound), errors.As(err, &valErr), errors.As(err, &confErr), errors.As(err, &stErr):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &pgErr):
		// Class 08 (connection), 57 (operator intervention, such as a
		// terminated backend or a shutdown), 53 (insufficient resources),
		// 40 (retries exhausted) and 58 (system error: Citus's coordinator
		// losing a worker mid-statement, "failed to COPY to shard") say
		// nothing about the request itself.
		// Neither does 25006 (read_only_sql_transaction), a statement sent
		// to a primary that has been demoted or fenced during a failover.
		if pgErr.Code == "25006" {
			return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
		}
		// notDelegated still, after maxRetries fresh connections: Citus
		// keeps running the call on the coordinator, which refuses to
		// write there. Nothing was written, and the client may retry.
		if pgErr.Code == notDelegated {
			return fmt.Errorf("%w: %w", order.ErrMisrouted, err)
		}
		switch pgErr.Code[:2] {
		case "08", "57", "53", "40", "58":
			return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
		}
		return err
	case pgconn.SafeToRetry(err), pgconn.Timeout(err), isConnErr(err):
		return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	return err
}

// isConnErr reports whether err is the connection failing: a refused dial,
// a reset, an EOF from a server that went away.
func isConnErr(err error) bool {
	var (
		connErr *pgconn.ConnectError
		netErr  net.Error
	)
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, pgx.ErrTxClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// withTx runs fn in a transaction: commit when fn returns nil, roll back
// otherwise, and run it again on a serialization failure or deadlock.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return withTxOptions(ctx, pool, pgx.TxOptions{}, fn)
}

// withSnapshot is withTx for reads that must show one moment: a read-only
// REPEATABLE READ transaction, whose statements all see the snapshot of its
// first.
func withSnapshot(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return withTxOptions(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func withTxOptions(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return retry(ctx, func() error {
		return pgx.BeginTxFunc(ctx, pool, opts, fn)
	})
}
