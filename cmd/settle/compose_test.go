package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v4"
)

// The compose file is configuration too. These tests load it the way docker
// compose does, with the compose-spec loader but no Docker engine and no
// network, and hold it to the binary's own subcommands, flags, environment
// variables and validation: renaming a setting in config.go without updating
// docker-compose.yml fails here, not at `docker compose up`.

const (
	repoRoot = "../.."
	// settleBin is where the Dockerfile puts the binary; the image has no
	// shell, so health checks exec it by this path.
	settleBin = "/usr/local/bin/settle"
)

// settleFlagSet builds a subcommand's flag set the way commands.go does.
// load is nil for gatewaysim, which has no config.
func settleFlagSet(name string, getenv func(string) string) (fs *flag.FlagSet, load func() (*config, error)) {
	fs = flag.NewFlagSet("settle "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if name == "gatewaysim" {
		fs.String("addr", "127.0.0.1:8089", "listen address")
		simFlags(fs)
		return fs, nil
	}
	load = bindConfig(fs, getenv, nil, commandOptions[name]...)
	if name == "audit" {
		auditRunFlags(fs)
	}
	return fs, load
}

// helpFlags returns the flags that `settle <name> -h` lists, or ok false if
// the binary has no such subcommand.
func helpFlags(t *testing.T, name string) (flags []string, ok bool) {
	t.Helper()
	var stderr bytes.Buffer
	err := dispatch(context.Background(), []string{name, "-h"}, func(string) string { return "" }, io.Discard, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		return nil, false
	}
	// flag.PrintDefaults writes each flag as "  -name [type]", its usage
	// on the next line after a tab.
	for line := range strings.Lines(stderr.String()) {
		if rest, found := strings.CutPrefix(line, "  -"); found {
			flags = append(flags, strings.Fields(rest)[0])
		}
	}
	return flags, true
}

// loadCompose loads docker-compose.yml offline: the only resource loader is
// the local one, so an include of a remote file fails instead of fetching
// it, and the loader never pulls or inspects images. The host's environment
// is not consulted, so ${VAR} interpolation is the same on every machine.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "docker-compose.yml")
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: path, Content: content}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.SkipResolveEnvironment = true
		o.ResourceLoaders = nil
	})
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

// settleServices returns the services that run the settle image, by name.
func settleServices(p *types.Project) map[string]types.ServiceConfig {
	out := map[string]types.ServiceConfig{}
	for name, s := range p.Services {
		if !isPostgres(s) {
			out[name] = s
		}
	}
	return out
}

func TestComposeLoads(t *testing.T) {
	p := loadCompose(t)
	want := []string{"gatewaysim", "migrate", "postgres", "postgres-standby", "reconcile", "serve"}
	if got := slices.Sorted(maps.Keys(p.Services)); !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	for _, name := range []string{"postgres", "postgres-standby"} {
		if img := p.Services[name].Image; !strings.HasPrefix(img, "postgres:15") {
			t.Errorf("%s image = %q, want postgres:15", name, img)
		}
	}
	built := map[string]bool{}
	for name, s := range settleServices(p) {
		if s.Build != nil {
			// The loader resolves the context to an absolute path.
			dockerfile := cmp.Or(s.Build.Dockerfile, "Dockerfile")
			if !filepath.IsAbs(dockerfile) {
				dockerfile = filepath.Join(s.Build.Context, dockerfile)
			}
			b, err := os.ReadFile(dockerfile)
			if err != nil {
				t.Errorf("%s: build: %v", name, err)
			} else if !bytes.Contains(b, []byte(settleBin)) {
				t.Errorf("%s: %s does not install the binary at %s, where health checks exec it", name, dockerfile, settleBin)
			}
			built[s.Image] = true
		}
	}
	for name, s := range settleServices(p) {
		if s.Build == nil && !built[s.Image] {
			t.Errorf("%s: image %q is neither built here nor by another service", name, s.Image)
		}
	}
}

func TestComposeCommandsMatchBinary(t *testing.T) {
	for name := range commandOptions {
		got, ok := helpFlags(t, name)
		if !ok {
			t.Errorf("settle %s -h: not a subcommand", name)
			continue
		}
		fs, _ := settleFlagSet(name, func(string) string { return "" })
		var want []string
		fs.VisitAll(func(f *flag.Flag) { want = append(want, f.Name) })
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("settle %s takes flags %v; this test thinks %v: update commandOptions", name, got, want)
		}
	}
}

func TestComposeSettleServices(t *testing.T) {
	known := map[string]string{} // environment variable → flag
	for _, o := range options {
		known[o.env] = o.flag
	}
	for svc, s := range settleServices(loadCompose(t)) {
		t.Run(svc, func(t *testing.T) {
			if len(s.Entrypoint) > 0 {
				t.Fatalf("entrypoint %v overrides the image's settle binary", s.Entrypoint)
			}
			if len(s.Command) == 0 {
				t.Fatal("no command: the image has no default subcommand")
			}
			sub, args := s.Command[0], s.Command[1:]
			if _, ok := commandOptions[sub]; !ok {
				t.Fatalf("command %q: not one of the subcommands %v", sub, slices.Sorted(maps.Keys(commandOptions)))
			}

			env := map[string]string{}
			for k, v := range s.Environment {
				if v != nil {
					env[k] = *v
				}
				if k != "DATABASE_URL" && !strings.HasPrefix(k, "SETTLE_") && !strings.HasPrefix(k, "STRIPE_") {
					continue
				}
				flagName, ok := known[k]
				switch {
				case !ok:
					t.Errorf("environment %s: settle has no such variable (see `settle config`)", k)
				case !slices.Contains(commandOptions[sub], flagName):
					t.Errorf("environment %s: settle %s does not use --%s", k, sub, flagName)
				}
			}
			getenv := func(k string) string { return env[k] }

			fs, load := settleFlagSet(sub, getenv)
			for _, a := range args {
				if name, ok := strings.CutPrefix(a, "-"); ok {
					name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
					if fs.Lookup(name) == nil {
						t.Errorf("command %v: settle %s has no flag -%s", []string(s.Command), sub, name)
					}
				}
			}
			if t.Failed() {
				return
			}
			if err := fs.Parse(args); err != nil {
				t.Fatalf("command %v: %v", []string(s.Command), err)
			}

			// The configuration the container starts with must pass the
			// checks the binary makes at start.
			switch sub {
			case "gatewaysim":
				if fs.NArg() != 0 {
					t.Errorf("command %v: unexpected arguments %v", []string(s.Command), fs.Args())
				}
				addr := fs.Lookup("addr").Value.String()
				checkReachable(t, "--addr", addr)
				checkProbe(t, s, addr)
				return
			case "migrate":
				if fs.NArg() != 1 || fs.Arg(0) != "up" {
					t.Errorf("command %v: want migrate up", []string(s.Command))
				}
			default:
				if fs.NArg() != 0 {
					t.Errorf("command %v: unexpected arguments %v", []string(s.Command), fs.Args())
				}
			}
			cfg, err := load()
			if err == nil {
				err = cfg.validate()
			}
			if err != nil {
				t.Fatalf("configuration: %v", err)
			}
			if cfg.DatabaseURL == "" {
				t.Error("no DATABASE_URL")
			}
			if sub != "migrate" {
				checkProbe(t, s, cfg.MetricsListen)
			}
			if sub == "serve" {
				checkReachable(t, "--listen", cfg.Listen)
				opts, err := cfg.serverOptions()
				if err != nil {
					t.Fatalf("configuration: %v", err)
				}
				if len(opts.Keys) == 0 {
					t.Error("serve has no API keys: anyone on the network could call it")
				}
				if cfg.WebhookListen == "" {
					t.Error("serve has no webhook listener: gateways' events would not reach it")
				} else {
					checkReachable(t, "--webhook-listen", cfg.WebhookListen)
					if _, err := cfg.webhookTLS(); err != nil {
						t.Errorf("configuration: %v", err)
					}
				}
			}
		})
	}
}

// checkReachable fails if addr listens on loopback only, where neither other
// containers nor a published port can reach it.
func checkReachable(t *testing.T, setting, addr string) {
	t.Helper()
	if isLoopback(addr) {
		t.Errorf("%s %s: loopback only, unreachable from outside the container", setting, addr)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		t.Errorf("%s %s: %v", setting, addr, err)
	}
}

// checkProbe fails unless the service's health check probes the port that
// the service listens on (its metrics listener, which is off by default).
func checkProbe(t *testing.T, s types.ServiceConfig, listen string) {
	t.Helper()
	if s.HealthCheck == nil || len(s.HealthCheck.Test) < 4 {
		return // TestComposeHealthAndRestart says what is missing
	}
	probe := s.HealthCheck.Test[3]
	u, err := url.Parse(probe)
	if err != nil {
		t.Errorf("health check URL %q: %v", probe, err)
		return
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil || u.Port() != port {
		t.Errorf("health check probes %s, but the service listens on %q", probe, listen)
	}
}

func TestComposeHealthAndRestart(t *testing.T) {
	p := loadCompose(t)
	pg := p.Services["postgres"]
	if pg.HealthCheck == nil || !slices.Contains(pg.HealthCheck.Test, "pg_isready") {
		t.Errorf("postgres: want a pg_isready health check, have %+v", pg.HealthCheck)
	}
	subcommands := map[string]bool{}
	for svc, s := range p.Services {
		if svc == "migrate" {
			if s.Restart != types.RestartPolicyNo {
				t.Errorf("migrate: restart %q, want \"no\": it runs once", s.Restart)
			}
			if s.HealthCheck != nil && !s.HealthCheck.Disable {
				t.Errorf("migrate: a one-shot needs no health check")
			}
			continue
		}
		if s.Restart != types.RestartPolicyUnlessStopped {
			t.Errorf("%s: restart %q, want unless-stopped", svc, s.Restart)
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable {
			t.Errorf("%s: no health check", svc)
			continue
		}
		if isPostgres(s) {
			continue // TestComposeReplication checks the standby's
		}
		// The image is distroless: CMD-SHELL would find no shell.
		test := s.HealthCheck.Test
		if len(test) < 3 || test[0] != "CMD" || test[1] != settleBin {
			t.Errorf("%s: health check %v, want [CMD %s <subcommand> ...]", svc, []string(test), settleBin)
			continue
		}
		subcommands[test[2]] = true
	}
	for sub := range subcommands {
		_, ok := helpFlags(t, sub)
		if !ok {
			t.Errorf("health checks exec `settle %s`: not a subcommand", sub)
		}
	}

	// Start order: the database is up, the schema migrated, the gateway
	// answering, before anything uses them.
	wantDeps := map[string]map[string]string{
		"migrate":          {"postgres": types.ServiceConditionHealthy, "postgres-standby": types.ServiceConditionHealthy},
		"serve":            {"migrate": types.ServiceConditionCompletedSuccessfully, "gatewaysim": types.ServiceConditionHealthy},
		"reconcile":        {"migrate": types.ServiceConditionCompletedSuccessfully, "gatewaysim": types.ServiceConditionHealthy},
		"gatewaysim":       {},
		"postgres":         {},
		"postgres-standby": {"postgres": types.ServiceConditionHealthy},
	}
	for svc, want := range wantDeps {
		got := map[string]string{}
		for dep, d := range p.Services[svc].DependsOn {
			got[dep] = d.Condition
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: depends_on %v, want %v", svc, got, want)
		}
	}
}

// TestComposeAlertRules checks that deploy/prometheus's alert rule files
// (alerts.yml, and alerts-ha.yml for deployments with standbys) are
// Prometheus rule files in shape: groups of rules, each alerting rule with
// an expression, a duration and annotations that tell an operator what to
// do, and no alert named twice. (promtool check rules also checks the
// PromQL.)
func TestComposeAlertRules(t *testing.T) {
	var alerts []string
	for _, f := range alertFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		var file struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []struct {
					Alert       string            `yaml:"alert"`
					Expr        string            `yaml:"expr"`
					For         string            `yaml:"for"`
					Labels      map[string]string `yaml:"labels"`
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&file); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(file.Groups) == 0 {
			t.Fatalf("%s: no groups", name)
		}
		for _, g := range file.Groups {
			if g.Name == "" || len(g.Rules) == 0 {
				t.Errorf("%s: group %q: want a name and rules", name, g.Name)
			}
			for _, r := range g.Rules {
				if slices.Contains(alerts, r.Alert) {
					t.Errorf("%s: alert %s is named twice", name, r.Alert)
				}
				alerts = append(alerts, r.Alert)
				if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
					t.Errorf("%s: group %s: rule %q: want alert and expr", name, g.Name, r.Alert)
				}
				if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
					t.Errorf("%s: for %q: want a duration such as 5m", r.Alert, r.For)
				}
				if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["description"], "docs/operations.md") {
					t.Errorf("%s: want a summary, and a description pointing at the operator's recipes in docs/operations.md", r.Alert)
				}
				if !strings.Contains(r.Expr, "settle_") && !strings.Contains(r.Expr, "grpc_server_") {
					t.Errorf("%s: expr uses none of Settle's metrics", r.Alert)
				}
			}
		}
	}
	for _, want := range []string{"SettleStuckCharging", "SettleNeedsReview", "SettleGatewayUnknownRate", "SettlePossibleDoubleCharge",
		"SettleGatewayRefusedCredentials", "SettleGatewayBreakerOpen", "SettleCommitsWaitForMissingStandby", "SettleNoStandby"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}
