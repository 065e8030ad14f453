package main

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5/pgconn"
)

// The compose file runs PostgreSQL as a primary and a synchronous standby,
// the topology Settle expects (docs/operations.md). With no Docker engine
// to start them, these tests read the pair's configuration as PostgreSQL
// and the postgres image would: the settings each server gets (ALTER
// SYSTEM in the primary's first-run scripts, then -c on its command line,
// which wins), the standby's primary_conninfo, the pg_hba.conf they both
// read, and what Settle's processes connect to.

// isPostgres reports whether a compose service is one of the PostgreSQL
// servers.
func isPostgres(s types.ServiceConfig) bool { return strings.HasPrefix(s.Image, "postgres:") }

// initDir is where the postgres image looks for its first-run scripts.
const initDir = "/docker-entrypoint-initdb.d/"

// alterSystem matches the settings a first-run script makes with ALTER
// SYSTEM SET name = 'value'.
var alterSystem = regexp.MustCompile(`(?im)^\s*ALTER\s+SYSTEM\s+SET\s+(\w+)\s*(?:=|TO)\s*'([^']*)'`)

// pgSettings returns the server settings that s starts with beyond the
// defaults: those its first-run scripts set with ALTER SYSTEM, then those
// of its command line (-c name=value, --name=value), which win.
func pgSettings(s types.ServiceConfig) (map[string]string, error) {
	settings := map[string]string{}
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind || !strings.HasPrefix(v.Target, initDir) {
			continue
		}
		b, err := os.ReadFile(v.Source)
		if err != nil {
			return nil, err
		}
		for _, m := range alterSystem.FindAllStringSubmatch(string(b), -1) {
			settings[strings.ToLower(m[1])] = m[2]
		}
	}
	args := []string(s.Command)
	for i := 0; i < len(args); i++ {
		kv := ""
		switch {
		case args[i] == "-c" && i+1 < len(args):
			i++
			kv = args[i]
		case strings.HasPrefix(args[i], "--") && strings.Contains(args[i], "="):
			kv = strings.TrimPrefix(args[i], "--")
		default:
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		settings[strings.ToLower(strings.ReplaceAll(k, "-", "_"))] = strings.Trim(v, "'")
	}
	return settings, nil
}

// conninfo parses a libpq key=value connection string whose values need no
// quoting.
func conninfo(s string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = v
	}
	return out
}

// syncStandbyName matches synchronous_standby_names: FIRST n (names),
// ANY n (names), n (names) or a bare list.
var syncStandbyName = regexp.MustCompile(`(?i)^\s*(?:(?:FIRST|ANY)\s+)?(?:(\d+)\s*)?\((.*)\)\s*$`)

// syncStandbys returns the standby names a primary waits for and how many
// of them must confirm each commit.
func syncStandbys(setting string) (names []string, count int) {
	list, count := setting, 1
	if m := syncStandbyName.FindStringSubmatch(setting); m != nil {
		list = m[2]
		if m[1] != "" {
			count, _ = strconv.Atoi(m[1]) // digits, by the pattern
		}
	}
	for _, n := range strings.Split(list, ",") {
		if n = strings.Trim(strings.TrimSpace(n), `"`); n != "" {
			names = append(names, n)
		}
	}
	return names, count
}

// mountSource returns the file on the host that s mounts at target.
func mountSource(s types.ServiceConfig, target string) (string, bool) {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == target {
			return v.Source, true
		}
	}
	return "", false
}

// hbaAllowsReplication reports whether the pg_hba.conf at path lets user
// make replication connections over the network.
func hbaAllowsReplication(path, user string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(f[0], "#") || !strings.HasPrefix(f[0], "host") {
			continue
		}
		// TYPE DATABASE USER ADDRESS METHOD: the first line that matches
		// decides; "all" databases does not include replication.
		if slices.Contains(strings.Split(f[1], ","), "replication") && (f[2] == user || f[2] == "all") {
			return f[4] != "reject", nil
		}
	}
	return false, nil
}

// replicationProblems checks the compose file's PostgreSQL pair: a primary
// whose every commit waits for the standby, a standby streaming from the
// primary under the name the primary waits for, both reachable for
// replication and rewindable, started in that order, and every Settle
// process naming both, writing to the one that accepts writes. It returns
// what is wrong, one sentence each.
func replicationProblems(p *types.Project) []string {
	var bad []string
	problem := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	// Which server is which: the standby is told where its primary is.
	var primary, standby string
	var pgNames []string
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		s := p.Services[name]
		if !isPostgres(s) {
			continue
		}
		pgNames = append(pgNames, name)
		settings, err := pgSettings(s)
		if err != nil {
			problem("%s: %v", name, err)
			continue
		}
		if settings["primary_conninfo"] != "" {
			standby = name
		} else {
			primary = name
		}
	}
	if len(pgNames) != 2 || primary == "" || standby == "" {
		problem("want two PostgreSQL services, a primary and a standby with primary_conninfo; have %v (standby %q)", pgNames, standby)
		return bad
	}
	ps, ss := p.Services[primary], p.Services[standby]
	primarySettings, _ := pgSettings(ps)
	standbySettings, _ := pgSettings(ss)

	// The standby streams from the primary, under a name.
	ci := conninfo(standbySettings["primary_conninfo"])
	appName, replUser := ci["application_name"], ci["user"]
	if ci["host"] != primary {
		problem("%s: primary_conninfo streams from host %q, not the primary %s", standby, ci["host"], primary)
	}
	if appName == "" || replUser == "" {
		problem("%s: primary_conninfo names no application_name or user (%q)", standby, standbySettings["primary_conninfo"])
	}
	if ss.Image != ps.Image {
		problem("%s: image %s, the primary runs %s: a standby must run the primary's major version", standby, ss.Image, ps.Image)
	}
	// Its first copy comes from the primary too (pg_basebackup reads
	// libpq's environment).
	env := func(s types.ServiceConfig, k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	if env(ss, "PGHOST") != primary || env(ss, "PGUSER") != replUser {
		problem("%s: its base backup comes from %s as %s, not from the primary %s as %s", standby, env(ss, "PGHOST"), env(ss, "PGUSER"), primary, replUser)
	}
	if len(ss.Entrypoint) == 0 {
		problem("%s: no entrypoint that copies the primary (pg_basebackup) before starting as a standby", standby)
	} else if script, ok := mountSource(ss, ss.Entrypoint[len(ss.Entrypoint)-1]); !ok {
		problem("%s: entrypoint %v is not a file of this repository", standby, []string(ss.Entrypoint))
	} else if b, err := os.ReadFile(script); err != nil {
		problem("%s: %v", standby, err)
	} else if !strings.Contains(string(b), "pg_basebackup") || !strings.Contains(string(b), "standby.signal") {
		problem("%s: %s neither copies the primary with pg_basebackup nor marks the copy a standby", standby, script)
	}

	// The primary waits for it on every commit.
	names, count := syncStandbys(primarySettings["synchronous_standby_names"])
	if appName != "" && (!slices.Contains(names, appName) || count < 1) {
		problem("%s: synchronous_standby_names = %q does not wait for the standby %s (application_name %q): a failover could lose acknowledged commits",
			primary, primarySettings["synchronous_standby_names"], standby, appName)
	}
	switch sc := primarySettings["synchronous_commit"]; sc {
	case "", "on", "remote_apply", "remote_write":
	default:
		problem("%s: synchronous_commit = %s: commits would not wait for the standby", primary, sc)
	}
	for _, name := range []string{primary, standby} {
		settings := map[string]map[string]string{primary: primarySettings, standby: standbySettings}[name]
		if settings["fsync"] == "off" {
			problem("%s: fsync = off (Settle refuses it)", name)
		}
		if settings["wal_level"] == "minimal" || settings["max_wal_senders"] == "0" {
			problem("%s: wal_level = %q, max_wal_senders = %q: it cannot stream to a standby", name, settings["wal_level"], settings["max_wal_senders"])
		}
		// Either may be the primary, and stream to the other.
		hba, ok := mountSource(p.Services[name], settings["hba_file"])
		if !ok {
			problem("%s: hba_file %q is not a file of this repository: nothing shows that %s may replicate", name, settings["hba_file"], replUser)
		} else if allowed, err := hbaAllowsReplication(hba, replUser); err != nil || !allowed {
			problem("%s: %s does not let %s replicate over the network (%v)", name, hba, replUser, err)
		}
	}
	// The replication role exists, and pg_rewind can rewind a failed
	// primary to follow the new one.
	var initSQL strings.Builder
	for _, v := range ps.Volumes {
		if v.Type == types.VolumeTypeBind && strings.HasPrefix(v.Target, initDir) {
			b, _ := os.ReadFile(v.Source)
			initSQL.Write(b)
		}
	}
	if !regexp.MustCompile(`(?i)CREATE\s+ROLE\s+` + regexp.QuoteMeta(replUser) + `\s+WITH\s+REPLICATION`).MatchString(initSQL.String()) {
		problem("%s: no first-run script creates the replication role %s", primary, replUser)
	}
	if !strings.Contains(env(ps, "POSTGRES_INITDB_ARGS"), "--data-checksums") && primarySettings["wal_log_hints"] != "on" {
		problem("%s: neither data checksums nor wal_log_hints: pg_rewind could not make it a standby after a failover", primary)
	}
	// Each has its own data.
	data := func(s types.ServiceConfig) string {
		for _, v := range s.Volumes {
			if v.Target == "/var/lib/postgresql/data" {
				return v.Source
			}
		}
		return ""
	}
	if d := data(ss); d == "" || d == data(ps) {
		problem("%s: its data volume %q is not its own", standby, d)
	}

	// Start order and health: the standby starts from a running primary,
	// is healthy only once it streams, and everything that waits for the
	// primary waits for it too, since every commit does.
	if d, ok := ss.DependsOn[primary]; !ok || d.Condition != types.ServiceConditionHealthy {
		problem("%s: does not wait for %s to be healthy before copying it", standby, primary)
	}
	if hc := ss.HealthCheck; hc == nil || hc.Disable ||
		!strings.Contains(strings.Join(hc.Test, " "), "pg_stat_wal_receiver") || !strings.Contains(strings.Join(hc.Test, " "), "streaming") {
		problem("%s: its health check does not ask whether it streams (pg_stat_wal_receiver): accepting connections is not following the primary", standby)
	}
	for name, s := range p.Services {
		if d, ok := s.DependsOn[primary]; ok && name != standby {
			if sd, ok := s.DependsOn[standby]; !ok || sd.Condition != d.Condition {
				problem("%s: waits for %s (%s) but not for %s: its commits would wait for the standby", name, primary, d.Condition, standby)
			}
		}
	}

	// Settle names both servers and writes to the one that accepts writes.
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		dbURL := env(p.Services[name], "DATABASE_URL")
		if isPostgres(p.Services[name]) || dbURL == "" {
			continue
		}
		cfg, err := pgconn.ParseConfig(dbURL)
		if err != nil {
			problem("%s: DATABASE_URL: %v", name, err)
			continue
		}
		hosts := []string{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)}
		for _, fb := range cfg.Fallbacks {
			hosts = append(hosts, fmt.Sprintf("%s:%d", fb.Host, fb.Port))
		}
		hosts = slices.Compact(slices.Sorted(slices.Values(hosts)))
		want := []string{primary + ":5432", standby + ":5432"}
		slices.Sort(want)
		if !slices.Equal(hosts, want) {
			problem("%s: DATABASE_URL names %v, want both servers %v: after a failover Settle would not find the new primary", name, hosts, want)
		}
		u, err := url.Parse(dbURL)
		if err != nil || u.Query().Get("target_session_attrs") != "read-write" {
			problem("%s: DATABASE_URL does not say target_session_attrs=read-write: connections could go to the standby", name)
		}
	}
	return bad
}

func TestComposeReplication(t *testing.T) {
	for _, msg := range replicationProblems(loadCompose(t)) {
		t.Error(msg)
	}
}

// TestComposeReplicationCatches breaks the compose file's replication in
// each way that loses commits, or Settle's way to the primary, and
// requires replicationProblems to say so: a check that cannot fail proves
// nothing.
func TestComposeReplicationCatches(t *testing.T) {
	setCommand := func(svc string, args ...string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services[svc]
			s.Command = append(slices.Clone(s.Command), args...)
			p.Services[svc] = s
		}
	}
	setEnv := func(svc, k string, v func(string) string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services[svc]
			old := ""
			if s.Environment[k] != nil {
				old = *s.Environment[k]
			}
			nv := v(old)
			s.Environment = maps.Clone(s.Environment)
			s.Environment[k] = &nv
			p.Services[svc] = s
		}
	}
	setConninfo := func(from, to string) func(*types.Project) {
		return func(p *types.Project) {
			s := p.Services["postgres-standby"]
			cmd := slices.Clone(s.Command)
			for i, a := range cmd {
				cmd[i] = strings.ReplaceAll(a, from, to)
			}
			s.Command = cmd
			p.Services["postgres-standby"] = s
		}
	}
	tests := []struct {
		name, want string
		mutate     func(*types.Project)
	}{
		{"URL names only the primary", "DATABASE_URL names",
			setEnv("serve", "DATABASE_URL", func(u string) string { return strings.Replace(u, ",postgres-standby:5432", "", 1) })},
		{"URL leaves out target_session_attrs", "target_session_attrs=read-write",
			setEnv("reconcile", "DATABASE_URL", func(u string) string { return strings.Replace(u, "&target_session_attrs=read-write", "", 1) })},
		{"standby asynchronous", "synchronous_standby_names", setCommand("postgres", "-c", "synchronous_standby_names=")},
		{"primary waits for another name", "synchronous_standby_names", setCommand("postgres", "-c", "synchronous_standby_names=FIRST 1 (elsewhere)")},
		{"commits do not wait", "synchronous_commit", setCommand("postgres", "-c", "synchronous_commit=local")},
		{"standby under another name", "synchronous_standby_names", setConninfo("application_name=standby", "application_name=replica")},
		{"standby streams from elsewhere", "streams from host", setConninfo("host=postgres ", "host=db9 ")},
		{"not rewindable", "pg_rewind", setEnv("postgres", "POSTGRES_INITDB_ARGS", func(string) string { return "" })},
		{"standby health is only pg_isready", "health check", func(p *types.Project) {
			s := p.Services["postgres-standby"]
			s.HealthCheck = &types.HealthCheckConfig{Test: types.HealthCheckTest{"CMD", "pg_isready", "-h", "127.0.0.1"}}
			p.Services["postgres-standby"] = s
		}},
		{"migrate does not wait for the standby", "but not for postgres-standby", func(p *types.Project) {
			s := p.Services["migrate"]
			deps := types.DependsOnConfig{}
			for k, v := range s.DependsOn {
				if k != "postgres-standby" {
					deps[k] = v
				}
			}
			s.DependsOn = deps
			p.Services["migrate"] = s
		}},
		{"standby starts before the primary is healthy", "before copying it", func(p *types.Project) {
			s := p.Services["postgres-standby"]
			s.DependsOn = nil
			p.Services["postgres-standby"] = s
		}},
		{"standby shares the primary's data", "is not its own", func(p *types.Project) {
			s := p.Services["postgres-standby"]
			s.Volumes = slices.Clone(s.Volumes)
			for i, v := range s.Volumes {
				if v.Target == "/var/lib/postgresql/data" {
					s.Volumes[i].Source = "pgdata"
				}
			}
			p.Services["postgres-standby"] = s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadCompose(t)
			tt.mutate(p)
			bad := replicationProblems(p)
			if !slices.ContainsFunc(bad, func(m string) bool { return strings.Contains(m, tt.want) }) {
				t.Errorf("replicationProblems = %q, want one saying %q", bad, tt.want)
			}
		})
	}
}
