package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// A primary and its standbys: StartStandby copies a running cluster with
// pg_basebackup into a new cluster that streams from it; Promote makes a
// standby the primary; Rejoin rewinds a former primary with pg_rewind and
// starts it as a standby of the new one. Everything runs as the postgres
// OS user from the local binaries, with no other software. The primary
// must have been started with Options.Rewindable.

// StartStandby starts a standby of c named name (its application_name,
// which synchronous_standby_names refers to), streaming from c over the
// unix socket, and waits until it accepts connections.
func (c *Cluster) StartStandby(ctx context.Context, name string) (*Cluster, error) {
	s := &Cluster{binDir: c.binDir, cred: c.cred, fast: c.fast, config: c.config, done: make(chan struct{}), ownsDir: true}
	var err error
	if s.dir, err = os.MkdirTemp("", "settle-pg-standby-"); err != nil {
		return nil, err
	}
	s.dataDir = filepath.Join(s.dir, "data")
	if err := s.chown(s.dir); err != nil {
		s.Stop()
		return nil, err
	}
	out, err := s.command("pg_basebackup", "-D", s.dataDir, "-d", c.conninfo(name), "-X", "stream",
		"--checkpoint=fast", "--no-sync").CombinedOutput()
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("pg_basebackup: %w: %s", err, out)
	}
	if err := s.follow(c, name); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Promote makes the standby c the primary, and waits until it accepts
// writes.
func (c *Cluster) Promote(ctx context.Context) error {
	out, err := c.command("pg_ctl", "promote", "-w", "-t", "60", "-D", c.dataDir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %w: %s", err, out)
	}
	// The new timeline reaches the control file, where pg_rewind reads
	// it, only at a checkpoint: without one, rewinding the old primary
	// from this one finds "no rewind required" and the old primary cannot
	// follow.
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("checkpoint after promotion: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint after promotion: %w", err)
	}
	return nil
}

// Rejoin makes c, a former primary that has stopped (killed, as when its
// machine is lost), a standby of primary named name: pg_rewind takes back
// what c wrote that primary never received, and c streams from primary.
func (c *Cluster) Rejoin(ctx context.Context, primary *Cluster, name string) error {
	out, err := c.command("pg_rewind", "--target-pgdata", c.dataDir, "--source-server", primary.conninfo(name),
		"--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_rewind: %w: %s", err, out)
	}
	if err := c.follow(primary, name); err != nil {
		return err
	}
	return c.Start(ctx)
}

// FreezeSender stops (SIGSTOP) the WAL sender that streams c's WAL to the
// standby named name, waiting up to 30 seconds for the standby to stream
// first: from then on the standby receives nothing, as when the link
// between the two machines fails or the standby's host stalls. An
// asynchronous standby falls behind while c goes on committing; c's
// commits wait for a synchronous one. Stopping the sender rather than the
// standby's receiver leaves nothing in flight between them to arrive
// later. The freeze lasts until c stops: Kill and Stop end the frozen
// sender with SIGKILL (c's machine is lost with everything the standby
// never received).
func (c *Cluster) FreezeSender(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("freeze the WAL sender to %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid int
		err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming'`, name).Scan(&pid)
		if err == nil {
			c.frozenMu.Lock()
			defer c.frozenMu.Unlock()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return fmt.Errorf("freeze the WAL sender to %s (pid %d): %w", name, pid, err)
			}
			c.frozen = append(c.frozen, pid)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			return fmt.Errorf("freeze the WAL sender to %s: no sender streaming to it: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// follow configures c as a standby streaming from primary under name.
func (c *Cluster) follow(primary *Cluster, name string) error {
	signal := filepath.Join(c.dataDir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	auto := filepath.Join(c.dataDir, "postgresql.auto.conf")
	b, err := os.ReadFile(auto)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "primary_conninfo") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, fmt.Sprintf("primary_conninfo = '%s'", primary.conninfo(name)))
	if err := os.WriteFile(auto, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	for _, f := range []string{signal, auto} {
		if err := c.chown(f); err != nil {
			return err
		}
	}
	return nil
}

// appendConf adds a line to the data directory's postgresql.auto.conf.
func (c *Cluster) appendConf(line string) error {
	auto := filepath.Join(c.dataDir, "postgresql.auto.conf")
	f, err := os.OpenFile(auto, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return c.chown(auto)
}

// conninfo is a libpq connection string to c's socket as application
// name, for replication and pg_rewind.
func (c *Cluster) conninfo(name string) string {
	return fmt.Sprintf("host=%s user=postgres dbname=postgres application_name=%s", c.dir, name)
}

// URLs returns a connection URL for database db naming every cluster's
// socket, as a client of a primary and its standbys is configured: the
// client picks the one that fits its target_session_attrs.
func URLs(db string, clusters ...*Cluster) string {
	dirs := make([]string, len(clusters))
	for i, c := range clusters {
		dirs[i] = c.dir
	}
	return fmt.Sprintf("postgres:///%s?host=%s&user=postgres&sslmode=disable", db, strings.Join(dirs, ","))
}
