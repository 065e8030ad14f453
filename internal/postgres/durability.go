package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
)

// Durability is what the database promises about a commit, as Settle's
// session sees it: a claim it was told is committed must survive a crash
// of the server (fsync) and, when standbys stream from it, the loss of the
// machine (a synchronous standby).
type Durability struct {
	// Fsync is false when the server never forces its writes to disk.
	Fsync bool `db:"fsync"`
	// SynchronousCommit is the session's synchronous_commit: off, local,
	// remote_write, on or remote_apply.
	SynchronousCommit string `db:"synchronous_commit"`
	// SynchronousStandbyNames names the standbys a commit waits for.
	SynchronousStandbyNames string `db:"synchronous_standby_names"`
	// InRecovery is true on a standby.
	InRecovery bool `db:"in_recovery"`
	// Standbys counts the standbys streaming from the server now.
	Standbys int `db:"standbys"`
	// SyncStandbys counts those whose replies a commit waits for.
	SyncStandbys int `db:"sync_standbys"`
	// UnknownStandbys counts those whose state the role may not read
	// (grant it pg_monitor).
	UnknownStandbys int `db:"unknown_standbys"`
}

//go:embed sql/durability.sql
var durabilitySQL string

// ReadDurability reads the database's durability settings and the state of
// its standbys.
func ReadDurability(ctx context.Context, pool *pgxpool.Pool) (Durability, error) {
	var d Durability
	err := retry(ctx, func() error {
		var err error
		d, err = queryOne[Durability](ctx, pool, durabilitySQL, nil)
		return err
	})
	return d, err
}

// ErrUnsafeDurability is returned by Check for a database that can lose a
// commit it acknowledged even without losing its machine.
var ErrUnsafeDurability = errors.New("the database can lose acknowledged commits")

// Check returns an error wrapping ErrUnsafeDurability when the server can
// forget a commit it acknowledged by crashing alone: with fsync off (the
// operating system may never have written it) or synchronous_commit off
// (it was acknowledged before it reached the log on disk). A lost claim
// followed by a retry is a second charge at a gateway that honours no
// idempotency key.
func (d Durability) Check() error {
	switch {
	case !d.Fsync:
		return fmt.Errorf("%w: fsync is off", ErrUnsafeDurability)
	case d.SynchronousCommit == "off":
		return fmt.Errorf("%w: synchronous_commit is off", ErrUnsafeDurability)
	}
	return nil
}

// Warning says what the database can lose when its machine is lost, or ""
// when a commit waits for a synchronous standby: standbys streaming but
// none synchronous (a failover to one can lose the last commits), commits
// that do not wait for the synchronous standbys named, or standbys whose
// state the role may not read.
func (d Durability) Warning() string {
	switch {
	case d.Standbys > 0 && d.UnknownStandbys == d.Standbys:
		return "standbys are streaming but this role cannot see whether any is synchronous: grant it pg_monitor"
	case d.Standbys > 0 && d.SyncStandbys == 0:
		return "standbys are streaming but none is synchronous: a failover can lose committed claims, and a retried charge after a lost claim can charge twice at a gateway that honours no idempotency key; set synchronous_standby_names"
	case d.SyncStandbys > 0 && d.SynchronousCommit == "local":
		return "synchronous_commit is local: commits do not wait for the synchronous standby, so a failover can lose committed claims"
	}
	return ""
}

// WaitsForStandby reports whether Settle's commits wait for synchronous
// standbys: synchronous_standby_names names some, and the session's
// synchronous_commit is on, remote_write or remote_apply (local and off do
// not wait for standbys).
func (d Durability) WaitsForStandby() bool {
	return d.SynchronousStandbyNames != "" && d.SynchronousCommit != "local" && d.SynchronousCommit != "off"
}

// Stall says why commits cannot finish, or "" when they can: Settle's
// commits wait for a synchronous standby and none is streaming, so
// PostgreSQL holds every commit until one connects (it never gives up on
// its own). Standbys whose state the role may not read are taken for
// synchronous: Warning asks for pg_monitor then.
func (d Durability) Stall() string {
	if d.WaitsForStandby() && d.SyncStandbys == 0 && d.UnknownStandbys == 0 {
		return "synchronous_standby_names is set but no standby is synchronous: every commit waits until one connects, and calls answer UNAVAILABLE meanwhile; start or reconnect the standby it names, or, to run on one node knowingly, set synchronous_standby_names to ''"
	}
	return ""
}

//go:embed sql/writable.sql
var writableSQL string

// Writable returns nil when the database answers and accepts writes, and
// an error wrapping order.ErrUnavailable otherwise: a standby, a demoted or
// fenced primary, or no server at all. It is the readiness check.
func Writable(ctx context.Context, pool *pgxpool.Pool) error {
	w, err := queryOne[struct {
		Writable bool `db:"writable"`
	}](ctx, pool, writableSQL, nil)
	if err != nil {
		return translate(err)
	}
	if !w.Writable {
		return fmt.Errorf("%w: the database is read-only (a standby, or a demoted primary)", order.ErrUnavailable)
	}
	return nil
}
