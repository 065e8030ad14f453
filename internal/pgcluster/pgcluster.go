// Package pgcluster starts a throwaway PostgreSQL server from the locally
// installed binaries, for `settle dev`, the tests (through postgrestest) and
// the lab's chaos harness and benchmark. It is not Settle's storage: that is
// package postgres, which knows nothing of how its server was started.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a throwaway PostgreSQL server started from the locally
// installed binaries, listening only on a unix socket in a private
// directory. As root it runs as the postgres OS user, since PostgreSQL
// refuses to run as root. The server is killed if this process dies.
type Cluster struct {
	dir     string // private directory: socket, and data unless kept elsewhere
	dataDir string
	binDir  string
	cred    *syscall.Credential
	cmd     *exec.Cmd
	done    chan struct{}
	ownsDir bool
	fast    bool
	config  []string

	// frozen holds the WAL senders FreezeSender stopped, which Kill and
	// Stop end with SIGKILL: a stopped process neither takes the
	// postmaster's SIGQUIT nor sends anything more.
	frozenMu sync.Mutex
	frozen   []int
}

// Options configure Start.
type Options struct {
	// DataDir keeps the data there across runs; empty means a temp dir that
	// Stop removes.
	DataDir string
	// Fast trades durability for speed (fsync off), for tests.
	Fast bool
	// Config holds more server settings, each "name=value" (Citus's
	// shared_preload_libraries, for one).
	Config []string
	// Rewindable makes a cluster that pg_rewind can rewind after a
	// failover (Rejoin): initialized with data checksums, and keeping
	// 256MB of WAL (pg_rewind reads the old primary's WAL back to the last
	// checkpoint it shares with the new one). Both are in the data
	// directory, not on the command line, since pg_rewind's own recovery
	// run of a crashed old primary sees only the data directory.
	Rewindable bool
}

// Start initializes (when needed) and starts a cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{binDir: bin, fast: opts.Fast, config: opts.Config, done: make(chan struct{})}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root, but there is no postgres OS user to run PostgreSQL as (PostgreSQL refuses to run as root)")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if c.dir, err = os.MkdirTemp("", "settle-pg-"); err != nil {
		return nil, err
	}
	c.ownsDir = true
	c.dataDir = filepath.Join(c.dir, "data")
	if opts.DataDir != "" {
		if c.dataDir, err = filepath.Abs(opts.DataDir); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{c.dir, c.dataDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			c.Stop()
			return nil, err
		}
		if err := c.chown(d); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err != nil {
		args := []string{"-D", c.dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"}
		if opts.Rewindable {
			args = append(args, "--data-checksums")
		}
		out, err := c.command("initdb", args...).CombinedOutput()
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("initdb: %w: %s", err, out)
		}
		if opts.Rewindable {
			if err := c.appendConf("wal_keep_size = '256MB'"); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	if err := c.Start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Start starts the server (again, after Kill or Restart) and waits until it
// accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	args := []string{"-D", c.dataDir, "-k", c.dir, "-c", "listen_addresses=", "-c", "max_connections=300",
		"-c", "shared_buffers=128MB"}
	if c.fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, kv := range c.config {
		args = append(args, "-c", kv)
	}
	cmd := c.command("postgres", args...)
	logf, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	c.cmd, c.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited at start; see %s", filepath.Join(c.dir, "postgres.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within a minute: %w", err)
		}
	}
}

// Kill stops the server at once, as a crash would (SIGQUIT: immediate
// shutdown, recovery from WAL at the next start).
func (c *Cluster) Kill() {
	c.signal(syscall.SIGQUIT)
}

// URL returns a connection URL for database db over the unix socket.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres:///%s?host=%s&user=postgres&sslmode=disable", db, c.dir)
}

// Dir is the private directory holding the socket and the server log.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down (fast mode) and removes its files, unless the
// data directory was given to be kept.
func (c *Cluster) Stop() {
	c.signal(syscall.SIGINT)
	if c.ownsDir {
		os.RemoveAll(c.dir)
	}
}

func (c *Cluster) signal(sig syscall.Signal) {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	c.frozenMu.Lock()
	for _, pid := range c.frozen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	c.frozen = nil
	c.frozenMu.Unlock()
	c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.binDir, name), args...)
	// The server must not outlive us, and must not get our terminal's ^C
	// before we have stopped the clients that use it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	return os.Chown(path, int(c.cred.Uid), int(c.cred.Gid))
}

// findBinDir finds the PostgreSQL server binaries: in PATH, where pg_config
// says, or under /usr/lib/postgresql (newest version first).
func findBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// A link in PATH (Debian's /usr/local/bin/initdb) points into the
		// directory that also holds pg_basebackup and pg_rewind.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries found (initdb in PATH, pg_config --bindir, /usr/lib/postgresql/*/bin): " +
		"install them (Debian: apt-get install postgresql) or set DATABASE_URL to a server you have")
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}
