package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/settlepay/settle/"

// TestImportDirections keeps the map of the code (docs/contributing.md)
// true: the domain imports no storage, transport or lab code, the
// reconciler knows no database, group commit knows nothing of Settle, the
// webhook listener knows no gateway, telemetry and the gateway adapters
// know nothing of each other (an adapter reports to the gateway.Observer
// in its Config), and nothing in the product imports the lab, whose
// harnesses only cmd/settle runs.
func TestImportDirections(t *testing.T) {
	imports := goList(t, "{{.ImportPath}} {{join .Imports \" \"}}", "../../...")
	deps := goList(t, "{{.ImportPath}} {{join .Deps \" \"}}", "../../internal/order", "../../internal/reconcile",
		"../../internal/batch", "../../internal/webhook", "../../internal/telemetry", "../../internal/gateway/...")
	forbidden := func(pkg string, in map[string][]string, bad ...string) {
		t.Helper()
		for _, dep := range in[module+pkg] {
			for _, b := range bad {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
	transport := []string{"net/http", "google.golang.org/grpc", module + "gen", module + "internal/grpcapi"}
	storage := []string{"github.com/jackc/pgx/v5", module + "internal/postgres", module + "migrations"}
	lab := []string{module + "internal/lab"}
	forbidden("internal/order", deps, concat(transport, storage, lab, []string{module + "internal/gateway", module + "internal/reconcile", module + "internal/telemetry"})...)
	forbidden("internal/reconcile", deps, concat(transport, storage, lab)...)
	// Group commit serves settles now, refunds and events later: it knows
	// none of them.
	forbidden("internal/batch", deps, module+"internal")
	// Each adapter verifies and reads its own events: the listener routes
	// by path to the order.EventReceiver it is given.
	adapters := []string{module + "internal/gateway/refpsp", module + "internal/gateway/stripe", module + "internal/gateway/sim"}
	forbidden("internal/webhook", deps, adapters...)
	// Telemetry observes the adapters through gateway.Observer, and the
	// adapters are handed one: neither imports the other.
	forbidden("internal/telemetry", deps, adapters...)
	for _, a := range adapters {
		forbidden(strings.TrimPrefix(a, module), deps, module+"internal/telemetry", module+"internal/webhook")
	}
	// The throwaway clusters serve dev, the tests and the lab alike.
	forbidden("internal/pgcluster", imports, module+"internal")
	for pkg, imps := range imports {
		rel := strings.TrimPrefix(pkg, module)
		if strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "internal/lab/") {
			continue
		}
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module+"internal/lab/") {
				continue
			}
			t.Errorf("%s imports the lab (%s): only cmd/settle and tests may", rel, imp)
		}
	}
}

// goList runs go list with format on pkgs and returns, for each package,
// the words after its import path.
func goList(t *testing.T, format string, pkgs ...string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}
