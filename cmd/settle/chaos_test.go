package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/failpoint"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/chaos"
	"github.com/settlepay/settle/internal/lab/mutant"
)

// chaosSeed is the seed of TestChaos; SETTLE_CHAOS_SEED overrides it, to
// replay a failure or to try another schedule.
const chaosSeed = 20260611

// TestChaos runs Settle (this test binary as three replicas and two
// reconcilers) on a durable PostgreSQL under a seeded schedule of kills,
// failpoint crashes, freezes, PostgreSQL crashes and terminated backends,
// and checks that no money was lost or taken twice. It is bounded to run in
// CI in a few minutes under -race; `settle chaos -duration 10m` soaks.
//
// It runs alone (no t.Parallel): it uses both cores of a small CI machine.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for minutes; skipped with -short")
	}
	seed := uint64(chaosSeed)
	if s := os.Getenv("SETTLE_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SETTLE_CHAOS_SEED=%q: %v", s, err)
		}
	}
	duration := 90 * time.Second
	if s := os.Getenv("SETTLE_CHAOS_DURATION"); s != "" {
		var err error
		if duration, err = time.ParseDuration(s); err != nil {
			t.Fatalf("SETTLE_CHAOS_DURATION=%q: %v", s, err)
		}
	}
	cfg := chaos.Config{
		Binary:     os.Args[0],
		Env:        []string{"SETTLE_TEST_AS_MAIN=1"},
		Seed:       seed,
		Duration:   duration,
		Clients:    16,
		Orders:     int(14 * duration.Seconds()),
		AdyenShare: chaos.DefaultAdyenShare,
		RouteShare: chaos.DefaultRouteShare,
	}
	sum := runChaosTest(t, cfg)
	for _, v := range sum.Violations {
		t.Errorf("violation: %s", v)
	}
	for _, p := range sum.Problems {
		t.Errorf("problem: %s", p)
	}
	if t.Failed() {
		t.Fatalf("seed %d failed; replay with SETTLE_CHAOS_SEED=%d; logs in %s", seed, seed, sum.LogDir)
	}
	// The gateway audit read every simulator account ("refpsp" and the
	// three of the routes) and found nothing (InvAudit above).
	if sum.AuditRuns != 4 {
		t.Errorf("the audit ran %d times, want once per simulator account (4): %s", sum.AuditRuns, sum)
	}
	// The run must have been the storm it claims to be. A loaded machine
	// makes fewer checkouts than planned and lands fewer kills (a kill of a
	// process still restarting is not counted): half of each is a storm.
	if duration >= 90*time.Second {
		kills := int(chaos.DefaultFaults().KillsPerMinute * duration.Minutes())
		if sum.Orders < cfg.Orders/2 || sum.Kills < kills/2 || sum.DBRestarts < 2 || sum.Freezes < 1 || sum.BackendKills < 1 ||
			sum.Actions < 10 || sum.AdyenOrders < cfg.Orders/20 || sum.TechnicalCancels < 1 ||
			sum.Routed < cfg.Orders/10 || sum.Cascades < 5 || sum.DownStretches < 5 || sum.RouteChanges < 1 {
			t.Errorf("too little happened (planned %d orders and %d kills): %s", cfg.Orders, kills, sum)
		}
	}
	for _, fp := range []string{failpoint.AfterClaim, failpoint.AfterGateway, failpoint.MidBatch} {
		if sum.Failpoints[fp] == 0 {
			t.Errorf("failpoint %s never fired", fp)
		}
	}
}

// TestChaosFailover runs the chaos workload and faults with PostgreSQL as
// a primary and a synchronous standby, every database restart of the
// schedule a failover (the standby cut off for a second or two, the
// primary killed, the standby promoted, the old primary rewound and
// rejoined), and checks that no committed order, attempt or event was lost
// and nothing charged twice. `settle chaos -failover async` shows what an
// asynchronous standby breaks under the same faults (not run here: it is
// expected to fail, and what it finds varies from run to run).
func TestChaosFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for minutes; skipped with -short")
	}
	faults := chaos.DefaultFaults()
	faults.DBRestartsPerMinute = 6
	faults.FailpointRounds = 0
	duration := 40 * time.Second
	sum := runChaosTest(t, chaos.Config{
		Binary:   os.Args[0],
		Env:      []string{"SETTLE_TEST_AS_MAIN=1"},
		Seed:     chaosSeed,
		Duration: duration,
		Clients:  16,
		Orders:   int(10 * duration.Seconds()),
		Faults:   faults,
		Failover: chaos.FailoverSync,
	})
	for _, v := range sum.Violations {
		t.Errorf("violation: %s", v)
	}
	for _, p := range sum.Problems {
		t.Errorf("problem: %s", p)
	}
	if sum.Failovers < 2 {
		t.Errorf("too few failovers: %s", sum)
	}
	if t.Failed() {
		t.Fatalf("failover run failed; logs in %s", sum.LogDir)
	}
	t.Log(sum)
}

// brokenClaimGuard makes claims ignore the order's state: a second click
// on a CHARGING or PAID order charges again. The guard is broken in the
// grouped statement and in its one-row form alike.
var brokenClaimGuard = []mutant.Mutation{{
	File: "internal/postgres/sql/claims.sql",
	Old:  "ord.state = st.from_state",
	New:  "true",
}, {
	File: "internal/postgres/sql/claim.sql",
	Old:  "ord.state = st.from_state",
	New:  "true",
}}

// TestChaosCatchesMutants runs a short chaos run against each build with
// one guard broken on purpose (applied at build time by internal/lab/mutant):
// the harness must see each through the invariant that guards it, or its
// green runs prove nothing. The gateway audit after the drain must see the
// double charges too; and in a run whose gateway lies (a second charge of
// one of Settle's references, made after the drain), the audit must find
// exactly that, as the ledger's invariant does, and nothing of the
// mutant's, which writes wrong events but moves no money wrongly.
func TestChaosCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs for a minute per mutant; skipped with -short")
	}
	for _, tc := range []struct {
		name string
		ms   []mutant.Mutation
		inv  int // the invariant that must report it
		what string
		// manual is the share of checkouts that authorize (0: the
		// default), raised where only holds can show the mutant; action
		// the share that meet 3-D Secure (0: the default), raised where
		// only late customers can show it; adyen the share on the fake
		// Adyen (0: none); routes the share made with routes (0: none).
		manual, action, adyen, routes float64
		// lie makes the gateway lie after the drain (nil: it does not);
		// audit, when set, checks the audit's findings by class.
		lie   func(map[string]*sim.Sim) error
		audit func(map[audit.Class]int) bool
	}{
		{"BrokenClaimGuard", brokenClaimGuard, chaos.InvOneCharge, "double charges in a build that claims whatever the state", 0, 0, 0, 0,
			nil, func(found map[audit.Class]int) bool {
				return found[audit.Duplicate]+found[audit.MissingInSettle] > 0
			}},
		{"UndeliveredEvents", []mutant.Mutation{deliveredBeforeAccepted}, chaos.InvEvents, "refused deliveries recorded as delivered", 0, 0, 0, 0, nil, nil},
		{"BrokenRefundGuard", brokenRefundGuard, chaos.InvRefunds, "refunds beyond the charge in a build that admits them", 0, 0, 0, 0, nil, nil},
		{"RefundEventsBeforeSettle", refundEventBeforeSettle, chaos.InvEvents,
			"refund events that announce the refund as it was before its settle, and for settles that lost their guard", 0, 0, 0, 0,
			duplicateOneCharge, func(found map[audit.Class]int) bool {
				return maps.Equal(found, map[audit.Class]int{audit.Duplicate: 1})
			}},
		{"ExpiryWithoutCancel", []mutant.Mutation{expiryWithoutCancel}, chaos.InvActionCharge,
			"3-D Secure challenges left open (and completed) for orders the expiry returned to PENDING", 0, 0.5, 0, 0, nil, nil},
		{"BrokenHoldGuard", []mutant.Mutation{brokenHoldGuard}, chaos.InvCaptureHold,
			"captures beyond the hold in a build that admits them", 0.6, 0, 0, 0, nil, nil},
		{"MissingNotificationIsDecline", []mutant.Mutation{missingNotificationIsDecline}, chaos.InvAdyenHold,
			"authorisations left held for orders whose missing notification was taken for a decline", 0, 0, 0.6, 0, nil, nil},
		{"CaptureFailedIsCaptured", []mutant.Mutation{captureFailedIsCaptured}, chaos.InvAdyenChargeSettled,
			"orders PAID for captures Adyen failed, with no review item, in a build that takes CAPTURE_FAILED for a success", 0, 0, 0.6, 0, nil, nil},
		{"RefundThroughDispute", refundThroughDispute, chaos.InvDisputeRefund,
			"refunds claimed during an open dispute in a build whose refund claim ignores disputes", 0, 0, 0, 0, nil, nil},
		{"CascadeAfterTimeout", mutant.CascadeAfterTimeout, chaos.InvCascadeWait,
			"attempts claimed on another gateway while the one before timed out, in a build that cascades after a timeout", 0, 0, 0, 0.8, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "settle-mutant")
			if err := mutant.Build(context.Background(), ".", "./cmd/settle", bin, tc.ms...); err != nil {
				t.Fatalf("build the mutant: %v", err)
			}
			sum := runChaosTest(t, chaos.Config{
				Binary:      bin,
				Seed:        chaosSeed,
				Duration:    20 * time.Second,
				Clients:     8,
				Orders:      200,
				Faults:      chaos.Faults{KillsPerMinute: 6, BackendKillsPerMinute: 3},
				ManualShare: tc.manual,
				ActionShare: tc.action,
				AdyenShare:  tc.adyen,
				RouteShare:  tc.routes,
				Lie:         tc.lie,
				LogDir:      t.TempDir(), // the run is meant to fail: keep no logs
			})
			if !hasInvariant(sum, tc.inv) {
				t.Fatalf("the harness did not see %s: %s", tc.what, sum)
			}
			if tc.lie != nil && !hasInvariant(sum, chaos.InvOneCharge) {
				t.Errorf("the invariants did not see the gateway's lie: %s", sum)
			}
			if tc.audit != nil && (!tc.audit(sum.Audit) || !hasInvariant(sum, chaos.InvAudit)) {
				t.Errorf("the audit's findings %v are not what the run did: %s", sum.Audit, sum)
			}
		})
	}
}

// duplicateOneCharge makes the simulator "refpsp" charge a second time
// with the reference of its first succeeded charge (AUTOMATIC), as a
// gateway that replays a request would: a double charge that Settle never
// asked for and never hears of.
func duplicateOneCharge(sims map[string]*sim.Sim) error {
	for _, c := range sims["refpsp"].Ledger() {
		if c.Status == sim.StatusSucceeded && c.Reference != "" && !c.Manual {
			_, err := sims["refpsp"].Duplicate(c.Reference)
			return err
		}
	}
	return errors.New("no succeeded charge to duplicate")
}

// brokenRefundGuard makes refund claims ignore what is left to refund: two
// refunds that do not both fit are both sent, and the customer gets back
// more than was paid. The guard is broken in the grouped statement and in
// its one-row form alike.
var brokenRefundGuard = inBothForms("internal/postgres/sql/refund_claims.sql", "internal/postgres/sql/refund_claim.sql",
	"AND want.amount <= want.left_minor", "AND true")

// refundThroughDispute makes refund claims ignore the order's open
// disputes: a refund is sent on top of a chargeback the network is still
// deciding (PostgreSQL's statements; the chaos runs here are not on Citus).
var refundThroughDispute = inBothForms("internal/postgres/sql/refund_claims.sql", "internal/postgres/sql/refund_claim.sql",
	"\t\tAND ord.open_disputes = 0\n", "")

// inBothForms is the mutation of old into new in a grouped statement and
// in its one-row form.
func inBothForms(grouped, oneRow, old, new string) []mutant.Mutation {
	return []mutant.Mutation{{File: grouped, Old: old, New: new}, {File: oneRow, Old: old, New: new}}
}

// brokenHoldGuard makes capture claims ignore what is left of the hold:
// two captures that do not both fit are both sent, and so is one of more
// than is left; the gateway refuses what goes past its authorization.
var brokenHoldGuard = mutant.Mutation{
	File: "internal/postgres/sql/capture_claim.sql",
	Old:  "AND want.amount <= want.left_minor",
	New:  "AND true",
}

// refundEventBeforeSettle writes a refund's event from the refund row as the
// settle found it rather than as the settle left it, and even when the
// settle's guard did not hold: a refund that succeeds gets no
// refund.succeeded event (its row says REFUNDING), and a late answer after
// the reconciler settled the refund writes a second one for a move that
// did not happen.
var refundEventBeforeSettle = inBothForms("internal/postgres/sql/refund_settles.sql", "internal/postgres/sql/refund_settle.sql",
	"FROM upr r JOIN st ON st.refund_id = r.id WHERE st.event <> ''",
	"FROM lockedr r JOIN st ON st.refund_id = r.id WHERE st.event <> ''")

// expiryWithoutCancel makes the expiry of a 3-D Secure challenge take the
// attempt for canceled without canceling it at the gateway: the order is
// PENDING again while the customer can still complete the challenge and be
// charged.
var expiryWithoutCancel = mutant.Mutation{
	File: "internal/gateway/refpsp/refpsp.go",
	Old:  "res, err = c.cancel(ctx, req)",
	New:  `res, err = order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "canceled"}, nil`,
}

// missingNotificationIsDecline makes the Adyen adapter's Lookup take the
// silence of an attempt younger than the no-show horizon (its
// notification delayed, or lost) for a decline: the order is PENDING
// again, no technical cancel is sent, and the authorisation Adyen made
// stays held (or, once a second attempt pays, the customer is charged for
// one and held for the other).
var missingNotificationIsDecline = mutant.Mutation{
	File: "internal/gateway/adyen/adyen.go",
	Old: `order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
			fmt.Errorf("no notification about the attempt yet, and its payment request may still reach Adyen: %w", order.ErrNotYetKnown)`,
	New: `order.Result{Outcome: order.OutcomeDeclined, ChargeID: psp}, nil`,
}

// captureFailedIsCaptured makes the Adyen adapter read CAPTURE_FAILED as
// a success, as CAPTURE is: an AUTOMATIC order whose capture Adyen
// reported done and then failed stays PAID with nothing taken and no
// capture_failed review item, and a MANUAL order's capture stays
// SUCCEEDED the same way.
var captureFailedIsCaptured = mutant.Mutation{
	File: "internal/gateway/adyen/events.go",
	Old:  "failed := it.EventCode == EventCaptureFailed || it.EventCode == EventRefundFailed",
	New:  "failed := it.EventCode == EventRefundFailed",
}

func hasInvariant(s chaos.Summary, inv int) bool {
	for _, v := range s.Violations {
		if v.Invariant == inv {
			return true
		}
	}
	return false
}

// runChaosTest runs cfg, logging its progress, and returns its summary.
func runChaosTest(t *testing.T, cfg chaos.Config) chaos.Summary {
	t.Helper()
	lw := &lineWriter{t: t}
	cfg.Log = lw
	start := time.Now()
	sum, err := chaos.Run(context.Background(), cfg)
	lw.Flush()
	t.Logf("%s (%s)", sum, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	return sum
}

// lineWriter logs each line written to it with t.Log.
type lineWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.t.Log(string(w.buf))
		w.buf = nil
	}
}
