package chaos

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/sim"
)

// Summary is what a run did and found.
type Summary struct {
	Seed uint64
	// Orders counts the orders CreateOrder answered with.
	Orders int
	// Charges counts the ChargeOrder calls the clients made, and Refunds
	// the RefundOrder calls.
	Charges, Refunds int
	// Actions counts the ChargeOrder answers REQUIRES_ACTION (3-D Secure).
	Actions int
	// Authorized counts the ChargeOrder answers AUTHORIZED (capture
	// MANUAL), Captures and Voids the CaptureOrder and VoidOrder calls.
	Authorized, Captures, Voids int
	// Kills counts processes killed with SIGKILL, by the harness or by an
	// armed failpoint.
	Kills int
	// Failpoints counts the firings of each failpoint.
	Failpoints map[string]int
	// Exits counts processes that exited by themselves otherwise (such as a
	// replica refused at start while the database was down).
	Exits        int
	Freezes      int
	DBRestarts   int
	BackendKills int
	// Failovers counts the failovers; NoPrimary is how long each left no
	// primary (kill to promotion), and ServeAgain how long until a
	// replica wrote again (kill to an order created).
	Failovers             int
	NoPrimary, ServeAgain []time.Duration
	// States counts the orders in each state at the end.
	States map[string]int
	// Charged counts the gateway's successful charges.
	Charged int
	// Events counts the events for the merchant (order.paid, …), and
	// Deliveries the POSTs of them its endpoint accepted.
	Events, Deliveries int
	// AdyenOrders counts the orders on the fake Adyen, AdyenStates them
	// by state at the end; AdyenNotified the notifications a replica
	// accepted, AdyenLost those the network lost (by eventCode), and
	// TechnicalCancels the technical cancels Settle sent that succeeded.
	AdyenOrders, AdyenNotified, TechnicalCancels int
	AdyenStates                                  map[string]int
	AdyenLost                                    map[string]int
	// Routed counts the orders made with routes, Cascaded those charged on
	// more than one gateway, and Cascades the attempts that cascaded
	// after another's proven non-charge; DownStretches the times the
	// account "down" was taken down.
	Routed, Cascaded, Cascades, DownStretches int
	// RouteChanges counts the changes of the merchant's route rules made
	// while the checkouts ran.
	RouteChanges int
	// AuditRuns counts the gateway audit's runs after the drain, one per
	// simulator account, and Audit their findings by class (InvAudit).
	AuditRuns int
	Audit     map[audit.Class]int
	// Violations are the broken invariants: the run failed.
	Violations []Violation
	// Problems are what else went wrong: a failpoint that never fired, a
	// data race or a panic in a process's log. The run failed.
	Problems []string
	// LogDir holds the logs, when they were kept.
	LogDir  string
	Elapsed time.Duration
}

// OK reports whether the run found nothing wrong.
func (s Summary) OK() bool { return len(s.Violations) == 0 && len(s.Problems) == 0 }

// String is the run's one summary line.
func (s Summary) String() string {
	line := fmt.Sprintf("chaos: seed=%d orders=%d charges=%d refunds=%d actions=%d authorized=%d captures=%d voids=%d kills=%d freezes=%d db_restarts=%d backend_kills=%d events=%d deliveries=%d violations=%d",
		s.Seed, s.Orders, s.Charges, s.Refunds, s.Actions, s.Authorized, s.Captures, s.Voids, s.Kills, s.Freezes, s.DBRestarts, s.BackendKills, s.Events, s.Deliveries, len(s.Violations))
	if len(s.Violations) > 0 {
		n := map[int]int{}
		for _, v := range s.Violations {
			n[v.Invariant]++
		}
		var parts []string
		for _, inv := range slices.Sorted(maps.Keys(n)) {
			parts = append(parts, fmt.Sprintf("%d:%s=%d", inv, invariantNames[inv], n[inv]))
		}
		line += " (" + strings.Join(parts, " ") + ")"
	}
	if s.AuditRuns > 0 {
		n := 0
		for _, c := range s.Audit {
			n += c
		}
		line += fmt.Sprintf(" audit_runs=%d audit_findings=%d audit_classes=%s", s.AuditRuns, n, classCounts(s.Audit))
	}
	if s.AdyenOrders > 0 {
		lost := 0
		for _, n := range s.AdyenLost {
			lost += n
		}
		line += fmt.Sprintf(" adyen_orders=%d adyen_notified=%d adyen_lost=%d technical_cancels=%d",
			s.AdyenOrders, s.AdyenNotified, lost, s.TechnicalCancels)
	}
	if s.Routed > 0 {
		line += fmt.Sprintf(" routed=%d cascaded=%d cascades=%d down_stretches=%d route_changes=%d", s.Routed, s.Cascaded,
			s.Cascades, s.DownStretches, s.RouteChanges)
	}
	if s.Failovers > 0 {
		line += fmt.Sprintf(" failovers=%d no_primary_median=%s serve_again_median=%s",
			s.Failovers, median(s.NoPrimary).Round(time.Millisecond), median(s.ServeAgain).Round(time.Millisecond))
	}
	if len(s.Problems) > 0 {
		line += fmt.Sprintf(" problems=%d", len(s.Problems))
	}
	return line
}

// report fills the summary with the end state and logs every violation,
// with the history of the orders concerned, and the processes' problems.
func (h *harness) report(snap snapshot, hist *history, violations []Violation) {
	h.mu.Lock()
	s := &h.sum
	s.Orders, s.Charges, s.Refunds, s.Actions = len(hist.orders), hist.charges, hist.refundCalls, hist.actions
	s.Authorized, s.Captures, s.Voids = hist.authorized, hist.captureCalls, hist.voidCalls
	s.Violations = violations
	for _, o := range snap.orders {
		s.States[o.state]++
		if o.gateway == adyenGateway {
			if s.AdyenStates == nil {
				s.AdyenStates = map[string]int{}
			}
			s.AdyenOrders++
			s.AdyenStates[o.state]++
		}
	}
	s.Routed, s.Cascaded, s.Cascades = routeCounts(snap)
	s.AdyenNotified, s.AdyenLost = snap.adyen.sent, snap.adyen.lost
	for _, tc := range snap.adyen.techCancels {
		if tc.Status == adyenfake.ModSucceeded {
			s.TechnicalCancels++
		}
	}
	var charged, declined int
	for _, c := range snap.ledger {
		if c.Status == "succeeded" {
			charged++
		} else {
			declined++
		}
	}
	s.Charged = charged
	refunded := map[string]int{}
	for _, r := range snap.refundLedger {
		refunded[r.Status]++
	}
	for _, e := range snap.events {
		if e.typ != "" {
			s.Events++
		}
	}
	for _, e := range snap.refundEvents {
		if e.typ != "" {
			s.Events++
		}
	}
	s.Deliveries = len(snap.received)
	h.mu.Unlock()

	h.logf("clients: %s", hist.stats())
	h.logf("end state: orders by state %v; gateway: %d charges, %d declines, refunds by status %v; failpoints fired %v; %d processes exited by themselves",
		s.States, charged, declined, refunded, s.Failpoints, s.Exits)
	if s.AdyenOrders > 0 {
		h.logf("adyen: orders by state %v; %d payments; notifications lost by eventCode %v; %d technical cancels (%d succeeded)",
			s.AdyenStates, len(snap.adyen.payments), s.AdyenLost, len(snap.adyen.techCancels), s.TechnicalCancels)
	}
	for _, v := range violations {
		h.logf("VIOLATION %s", v)
	}
	h.describeOrders(snap, violations)
	for _, p := range slices.Concat(h.replicas, h.recons) {
		problems, notes := scanLog(p.logPath)
		for _, msg := range problems {
			h.problem("%s: %s (see %s)", p.name, msg, p.logPath)
		}
		for _, msg := range notes {
			h.logf("note: %s: %s (see %s)", p.name, msg, p.logPath)
		}
	}
}

// describeOrders logs the history of the first few orders with violations.
func (h *harness) describeOrders(snap snapshot, violations []Violation) {
	seen := map[string]bool{}
	for _, v := range violations {
		if v.Order == "" || seen[v.Order] || len(seen) == 10 {
			continue
		}
		seen[v.Order] = true
	}
	if len(seen) == 0 {
		return
	}
	var (
		evs      = map[string][]dbEvent{}
		attempts = map[string][]dbAttempt{}
		ofOrder  = map[string]string{} // attempt → order
		charges  = map[string][]sim.Charge{}
	)
	for _, e := range snap.events {
		if seen[e.order] {
			evs[e.order] = append(evs[e.order], e)
		}
	}
	for _, a := range snap.attempts {
		ofOrder[a.id] = a.order
		if seen[a.order] {
			attempts[a.order] = append(attempts[a.order], a)
		}
	}
	for _, c := range snap.ledger {
		if o := ofOrder[c.Reference]; seen[o] {
			charges[o] = append(charges[o], c)
		}
	}
	for _, o := range snap.orders {
		if seen[o.id] {
			h.logf("%s%s%s", describe(o, evs[o.id], attempts[o.id], charges[o.id]), describeHolds(snap, o, ofOrder), describeAdyen(snap, o, ofOrder))
		}
	}
}

// describeHolds renders an order's captures and voids, Settle's and the
// gateway's, for a report.
func describeHolds(snap snapshot, o dbOrder, ofOrder map[string]string) string {
	if !o.manual {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  hold: authorized %d, captured %d, capturing %d, voiding %t, closed %t\n", o.authorized, o.captured, o.capturing, o.voiding, o.closed)
	for _, c := range snap.captures {
		if c.order == o.id {
			fmt.Fprintf(&b, "  capture %s: request_id %s, %d final %t, %s, created %s\n", c.id, c.request, c.amount, c.final, c.state, c.created.Format("15:04:05.000"))
		}
	}
	for _, v := range snap.voids {
		if v.order == o.id {
			fmt.Fprintf(&b, "  void %s: request_id %s, %s\n", v.id, v.request, v.state)
		}
	}
	for _, g := range snap.captureLedger {
		if ofOrder[g.ChargeReference] == o.id {
			fmt.Fprintf(&b, "  gateway capture %s: reference %s, %d final %t, %s %s at %s\n", g.ID, g.Reference, g.Amount, g.Final, g.Status, g.FailureCode, g.Created.Format("15:04:05.000"))
		}
	}
	for _, g := range snap.voidLedger {
		if ofOrder[g.ChargeReference] == o.id {
			fmt.Fprintf(&b, "  gateway void %s: reference %s, %s %s at %s\n", g.ID, g.Reference, g.Status, g.FailureCode, g.Created.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// describeAdyen renders the fake Adyen's payments of an order, with what
// was asked of them, for a report.
func describeAdyen(snap snapshot, o dbOrder, ofOrder map[string]string) string {
	var b strings.Builder
	for _, p := range snap.adyen.payments {
		if ofOrder[p.Reference] != o.id {
			continue
		}
		fmt.Fprintf(&b, "  adyen payment %s: reference %s, token %s, manual %t, %s, authorised %d, captured %d, refunded %d, created %s\n",
			p.PSPReference, p.Reference, p.Token, p.ManualCapture, p.Status, p.AmountAuthorised, p.AmountCaptured, p.AmountRefunded,
			p.Created.Format("15:04:05.000"))
		for _, m := range slices.Concat(p.Captures, p.Cancels, p.Refunds, p.TechnicalCancels) {
			fmt.Fprintf(&b, "    %s %s: reference %s, %d %s, %s %s at %s\n", m.Kind, m.PSPReference, m.Reference, m.Amount, m.Currency,
				m.Status, m.Reason, m.Created.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// scanLog finds in a process's log what must never appear there (a data
// race, a panic), and what deserves a look (errors logged).
func scanLog(path string) (problems, notes []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	count := func(markers ...string) []string {
		var found []string
		for _, m := range markers {
			if n := strings.Count(string(b), m); n > 0 {
				found = append(found, fmt.Sprintf("%d× %q", n, m))
			}
		}
		return found
	}
	return count("WARNING: DATA RACE", "panic:", "fatal error:"), count("level=ERROR")
}

func (h *harness) summary() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sum
	s.Failpoints = maps.Clone(s.Failpoints)
	s.States = maps.Clone(s.States)
	s.Audit = maps.Clone(s.Audit)
	s.Problems = slices.Clone(s.Problems)
	return s
}

func (h *harness) count(f func(*Summary)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(&h.sum)
}

func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logf("PROBLEM %s", msg)
	h.count(func(s *Summary) { s.Problems = append(s.Problems, msg) })
}

func (h *harness) started() time.Time { return time.Unix(0, h.start.Load()) }

func (h *harness) since() time.Duration { return time.Since(h.started()).Round(time.Millisecond) }

// logf logs one line of progress, stamped with the time since the clients
// started, to the run's Log and to chaos.log.
func (h *harness) logf(format string, args ...any) {
	line := fmt.Sprintf("chaos +%6.1fs: %s\n", time.Since(h.started()).Seconds(), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	h.logMu.Lock()
	defer h.logMu.Unlock()
	io.WriteString(h.cfg.Log, line)
	if h.logFile != nil {
		io.WriteString(h.logFile, line)
	}
}
