package bench

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sqlFiles holds the pgbench scripts of the SQL floors (sql/README.md
// explains each); scripts is the same files by their own names.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var scripts = func() fs.FS {
	sub, err := fs.Sub(sqlFiles, "sql")
	if err != nil {
		panic(err) // "sql" is a valid path: cannot happen
	}
	return sub
}()

// pgbench runs the pgbench scripts of sql/ against one database.
type pgbench struct {
	path    string // the pgbench binary
	dir     string // the scripts, written out, and the latency logs
	host    string // the server's socket directory
	db      string
	version string
}

func newPgbench(dir, host, db string) (*pgbench, error) {
	path, err := findPgbench()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", path, err)
	}
	if err := os.CopyFS(filepath.Join(dir, "scripts"), scripts); err != nil {
		return nil, fmt.Errorf("write out the pgbench scripts: %w", err)
	}
	return &pgbench{path: path, dir: dir, host: host, db: db, version: strings.TrimSpace(string(out))}, nil
}

// ErrNoPgbench is the benchmark's error when pgbench cannot be found.
var ErrNoPgbench = errors.New("pgbench not found beside the PostgreSQL server binaries or in PATH (Debian: apt-get install postgresql-client)")

// findPgbench looks for pgbench beside the server binaries (so that the
// two versions match) and then in PATH.
func findPgbench() (string, error) {
	var dirs []string
	for _, name := range []string{"postgres", "initdb"} {
		if p, err := exec.LookPath(name); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				dirs = append(dirs, filepath.Dir(real))
			}
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(found[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(found[j])))
		return vi > vj
	})
	for _, d := range append(dirs, found...) {
		p := filepath.Join(d, "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", ErrNoPgbench
}

// scriptRoundTrips counts the SQL commands of a pgbench script: pgbench
// sends them one at a time and waits for each answer, so each is one
// round trip. (pg_stat_statements cannot count them for a prepared-mode
// pgbench: PostgreSQL 15 counts a prepared BEGIN or COMMIT only the first
// time a connection runs it.)
func scriptRoundTrips(script string) (int, error) {
	b, err := fs.ReadFile(scripts, script)
	if err != nil {
		return 0, err
	}
	n, open := 0, false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "--"):
		case strings.HasPrefix(line, `\gset`):
			n, open = n+1, false
		case strings.HasPrefix(line, `\`): // another meta-command
		case strings.HasSuffix(line, ";"):
			n, open = n+1, false
		default:
			open = true
		}
	}
	if open {
		return 0, fmt.Errorf("pgbench script %s: its last SQL command has no end", script)
	}
	return n, nil
}

// pgbenchResult is one pgbench run: one pgbench transaction is one order.
type pgbenchResult struct {
	ops       int
	tps       float64
	elapsed   time.Duration
	latencies []time.Duration
	cpu       time.Duration // pgbench's own CPU: the client's
}

var (
	tpsRE       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	processedRE = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	failedRE    = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

// run runs script with c clients, for d (or, with transactions > 0, that
// many transactions per client), in prepared mode, and logs every
// transaction's latency.
func (p *pgbench) run(ctx context.Context, script string, c int, d time.Duration, transactions int, defines ...string) (pgbenchResult, error) {
	logDir, err := os.MkdirTemp(p.dir, "pgbench-log-")
	if err != nil {
		return pgbenchResult{}, err
	}
	defer os.RemoveAll(logDir)
	args := []string{"-M", "prepared", "-n", "-c", strconv.Itoa(c), "-j", strconv.Itoa(min(c, 2)),
		"-f", filepath.Join(p.dir, "scripts", script), "-l", "--log-prefix", filepath.Join(logDir, "tx"),
		"-h", p.host, "-U", "postgres"}
	if transactions > 0 {
		args = append(args, "-t", strconv.Itoa(transactions))
	} else {
		args = append(args, "-T", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))))
	}
	for _, def := range defines {
		args = append(args, "-D", def)
	}
	args = append(args, p.db)
	cmd := exec.CommandContext(ctx, p.path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	res := pgbenchResult{elapsed: time.Since(start)}
	if cmd.ProcessState != nil {
		res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	text := out.String()
	if err != nil {
		return res, fmt.Errorf("pgbench -f %s -c %d: %w\n%s", script, c, err, tail(text, 2000))
	}
	if m := failedRE.FindStringSubmatch(text); m != nil && m[1] != "0" {
		return res, fmt.Errorf("pgbench -f %s -c %d: %s failed transactions\n%s", script, c, m[1], tail(text, 2000))
	}
	m := tpsRE.FindStringSubmatch(text)
	n := processedRE.FindStringSubmatch(text)
	if m == nil || n == nil {
		return res, fmt.Errorf("pgbench -f %s: cannot read its output:\n%s", script, tail(text, 2000))
	}
	res.tps, _ = strconv.ParseFloat(m[1], 64)
	res.ops, _ = strconv.Atoi(n[1])
	if res.latencies, err = readLatencyLogs(logDir); err != nil {
		return res, err
	}
	if len(res.latencies) != res.ops {
		return res, fmt.Errorf("pgbench -f %s: %d transactions but %d logged", script, res.ops, len(res.latencies))
	}
	return res, nil
}

// readLatencyLogs reads pgbench's per-transaction logs (-l): the third
// field of each line is the transaction's latency in microseconds.
func readLatencyLogs(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "tx.*"))
	if err != nil {
		return nil, err
	}
	var lats []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("pgbench log %s: %q: %w", name, sc.Text(), err)
			}
			lats = append(lats, time.Duration(us)*time.Microsecond)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return lats, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
