package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// The gateway audit (issue #31) after the drain: once every process is
// stopped and before the ledgers are read, the harness audits each
// simulator account the run used over the run's whole span, through the
// audit's own API, the store on the run's database and the refpsp
// adapter listing the simulator over HTTP, as `settle audit` would. With
// the real Settle it must find nothing; a gateway made to lie
// (Config.Lie) or a mutant that charges twice must show in its findings
// as in the checker's invariants.
//
// The audit's no-show horizon is zero here, which a deployment must never
// configure: no process is left to send a charge request, so the run's
// window is closed as soon as its margin has passed. The Adyen orders are
// not audited here: the fake Adyen is no simulator account, whose lies
// the harness injects; the Adyen adapter's listing, from the fake's daily
// reports, is audited in package audit's tests.

// auditMargin is the audit's margin: both clocks, the simulator's and the
// database's, are this machine's.
const auditMargin = 200 * time.Millisecond

// auditActor is who the harness's audit runs are recorded as started by.
const auditActor = "chaos"

// gatewayAccount is a simulator account the run used, by its gateway name
// in Settle, served at url.
type gatewayAccount struct {
	name string
	url  string
	gw   *sim.Sim
}

// auditResult is what the audit found in a run.
type auditResult struct {
	runs int
	// counts holds the findings of every account's run, by class.
	counts map[audit.Class]int
	// violations are the findings that break InvAudit.
	violations []Violation
}

// audit audits the merchant's accounts over [from, now), once the margin
// has passed.
func (h *harness) audit(ctx context.Context, accounts []gatewayAccount, from time.Time) (auditResult, error) {
	res := auditResult{counts: map[audit.Class]int{}}
	store := postgres.NewStore(h.pool)
	gateways := map[string]order.Gateway{}
	for _, a := range accounts {
		c, err := refpsp.New(refpsp.Config{BaseURL: a.url, APIKey: "sk_chaos", Timeout: 10 * time.Second})
		if err != nil {
			return res, err
		}
		gateways[a.name] = c
	}
	au, err := audit.New(store, gateways, audit.Config{Margin: auditMargin}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return res, err
	}
	w := audit.Window{From: from, To: time.Now()}
	time.Sleep(2 * auditMargin) // the window closes
	for _, a := range accounts {
		r, err := au.Audit(ctx, merchant, a.name, w, auditActor)
		if err != nil {
			return res, fmt.Errorf("audit %s: %w", a.name, err)
		}
		res.runs++
		if !r.Covered {
			return res, fmt.Errorf("audit %s: not covered: %s", a.name, r.NotCovered)
		}
		for c, n := range r.Counts {
			res.counts[c] += int(n)
		}
		fs, err := store.Findings(ctx, merchant, r.ID)
		if err != nil {
			return res, fmt.Errorf("audit %s: findings: %w", a.name, err)
		}
		h.logf("audit %s: window [%s, %s), %d records matched, findings %s", a.name, w.From.Format("15:04:05.000"),
			w.To.Format("15:04:05.000"), r.Seen, classCounts(r.Counts))
		for _, f := range fs {
			if v, ok := findingViolation(a.name, f); ok {
				res.violations = append(res.violations, v)
			}
		}
	}
	return res, nil
}

// findingViolation is the violation of InvAudit that finding f of
// account's audit makes, if any: every finding but FOREIGN, a charge made
// outside Settle, which the audit only reports.
func findingViolation(account string, f audit.Finding) (Violation, bool) {
	if f.Class == audit.Foreign {
		return Violation{}, false
	}
	return Violation{Invariant: InvAudit, Order: f.OrderID, Msg: fmt.Sprintf(
		"the audit of %s found %s: gateway record %q, attempt %q, Settle %s, gateway %s",
		account, f.Class, f.GatewayRecordID, f.AttemptID, f.Settle, f.GatewayRecord)}, true
}

// classCounts renders counts by class, the critical first, those with
// none left out: "DUPLICATE:2,FOREIGN:1", or "-" when there are none.
func classCounts[N int | int64](counts map[audit.Class]N) string {
	var parts []string
	for _, c := range audit.Classes {
		if n := counts[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", c, n))
		}
	}
	// A class the list does not know is shown too, after the others.
	for _, c := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(audit.Classes, c) && counts[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", c, counts[c]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
