// Package chaos is Settle's chaos harness, in the spirit of Jepsen's bank
// test: it runs Settle for real (several `settle serve` replicas and
// `settle reconcile` sidecars as subprocesses, on a durable throwaway
// PostgreSQL, against the gateway simulator with seeded random faults that
// does not deduplicate, and a fake Adyen whose notifications are delayed,
// reordered, duplicated and lost), drives concurrent checkout clients at it over
// gRPC, and meanwhile kills, freezes and restarts everything on a schedule
// drawn from a seed. At the end it stops the faults, lets the reconcilers
// settle what is left, and checks from the gateway's ledger, the database
// and what the clients were told that no money was lost or taken twice
// (the invariants are listed with InvOneCharge and the constants after it).
//
// The fault schedule is a function of the seed alone, so a failing seed can
// be run again with the same faults at the same instants; the interleaving
// of the workload with them is not deterministic, so a replay reproduces
// the conditions of a failure, not necessarily the failure.
//
// # The bound on freezes
//
// A replica is frozen (SIGSTOP) for longer than a claim's lease (gateway
// timeout + claim grace), so that reconcilers look at its orders while it
// is stopped, but for less than the no-show horizon minus the longest time
// the gateway hides a charge it made from lookups (a slow answer, a held
// timeout) and a margin: with the defaults, between 1.8s and 2.5s against a
// 5s horizon. A process frozen with a charge request half-sent can deliver
// it when it resumes; if the charge became visible only after the horizon,
// a reconciler would already have taken "no charge at the gateway" to mean
// "never charged" and let the customer pay again, and the late request
// would have charged a second time. No protocol without idempotency keys
// can tell a request that is late from one that never comes, which is why
// the horizon must exceed the longest pause a deployment can suffer plus
// the gateway's longest hidden window (the gateway call's deadline, fixed
// before the claim, bounds the pause of a process that is merely slow
// rather than stopped).
package chaos

import (
	"fmt"
	"io"
	"time"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/sim"
)

// The timings of the processes under test: short, so that a run of a few
// minutes sees many leases expire and many reconciliations.
const (
	gatewayTimeout = time.Second
	claimGrace     = 500 * time.Millisecond
	noShowHorizon  = 5 * time.Second
	recheckStep    = 200 * time.Millisecond
	recheckSteps   = 40
	pollInterval   = 100 * time.Millisecond
	// simHold is how long the simulator holds a "timeout" answer (longer
	// than the gateway timeout) and, for some, hides the charge from
	// lookups.
	simHold = 1500 * time.Millisecond
	// actionExpiry is how long a customer has to complete a 3-D Secure
	// challenge before the reconcilers cancel the attempt: short, so that
	// abandoned challenges expire, and late customers race the cancel,
	// within a run.
	actionExpiry = 3 * time.Second
	// merchant is the merchant of the clients' API key.
	merchant = "chaos"
	// quiesceTimeout bounds the wait for the reconcilers to settle every
	// CHARGING order at the end, as long as their checks make no progress:
	// each check of an operation still in flight (its reconcile_count
	// rising) pushes the end of the wait to quiesceTimeout after it, up to
	// quiesceMax. An operation whose outcome cannot be learnt (Adyen's
	// notification of it lost) goes to review only after every step of the
	// schedule, one reconciler round each; on Citus under the faults a
	// round takes a second or more, so the schedule outlasts a fixed wait,
	// while one that nobody checks any more still ends it.
	quiesceTimeout = 60 * time.Second
	quiesceMax     = 150 * time.Second
	// deliverTimeout bounds the wait, after quiescence, for every event to
	// be delivered: a worker killed holding a lease holds its events for
	// the lease (9 × the 1 s delivery timeout + 5 s), and a refused
	// delivery waits 5 to 10 s, then 10 to 20 s, before its next tries.
	deliverTimeout = 90 * time.Second
	// eventRefusalRate is the share of deliveries the merchant's endpoint
	// refuses (503), and eventSecret its signing secret.
	eventRefusalRate = 0.05
	eventSecret      = "evsec_chaos_0123456789abcdef"
	// gatewayEvents is how the simulator pushes its events to the
	// replicas' webhook listeners: some delayed, duplicated, out of order,
	// some lost (and more lost to replicas killed while they arrive);
	// gatewayEventSecret signs them.
	gatewayEventSecret = "whsec_chaos_0123456789abcdef0123456789"
	// The fake Adyen's account, key and notifications' HMAC key.
	adyenAPIKey  = "AQE_chaos_key"
	adyenAccount = "SettleChaosECOM"
	adyenHMACKey = "44782def547aaa06c910c43932b1eb0c71fc68d9d0c057550c48ec2acf6ba056"
	// adyenLoss is the share of Adyen's notifications the network loses
	// (the harness's proxy answers "[accepted]" and forwards nothing):
	// their attempts wait for the no-show horizon and the technical
	// cancel, their captures and refunds for the reconciler's schedule.
	adyenLoss = 0.15
)

// adyenNotify is how the fake Adyen's notifications misbehave besides
// their loss: delayed up to 2s (so out of order), some held back a
// further second, some sent twice.
var adyenNotify = adyenfake.NotifyFaults{
	MaxDelay:     2 * time.Second,
	Reorder:      0.15,
	ReorderDelay: time.Second,
	Duplicate:    0.2,
	RetryMin:     100 * time.Millisecond,
	RetryMax:     2 * time.Second,
}

// adyenRandom are the fake Adyen's random faults on tok_ok and tok_random
// payments, their modifications and technical cancels: answers lost after
// the payment was made (held, 500, dropped), 500s before, slow answers.
var adyenRandom = adyenfake.RandomFaults{Refuse: 0.05, TimeoutAfter: 0.04, FiveXXBefore: 0.03, FiveXXAfter: 0.04,
	DropAfter: 0.04, Slow: 0.1, SlowMax: 300 * time.Millisecond}

// gatewayEvents sets how the simulator's events misbehave.
var gatewayEvents = sim.Events{
	Secrets:   []string{gatewayEventSecret},
	Delay:     50 * time.Millisecond,
	Reorder:   time.Second,
	Duplicate: 0.2,
	Loss:      0.1,
	Attempts:  3,
}

// Config configures a run. Zero fields take the defaults noted.
type Config struct {
	// Binary is the settle binary run as replicas and reconcilers.
	Binary string
	// Env is added to the environment of every process run from Binary.
	Env []string
	// Seed decides the fault schedule and the simulator's faults.
	Seed uint64
	// Duration is how long the clients run and faults are injected
	// (default 2m). Settling and checking take some seconds more.
	Duration time.Duration
	// Clients is the number of concurrent checkout clients (default 16).
	Clients int
	// Orders is how many orders the clients aim to create over Duration
	// (default 10 a second); fewer are created when Settle is slower.
	Orders int
	// Replicas and Reconcilers are the numbers of `settle serve` and
	// `settle reconcile` processes (defaults 3 and 2).
	Replicas, Reconcilers int
	// Faults are the fault rates (zero value: DefaultFaults).
	Faults Faults
	// ManualShare is the share of checkouts that authorize now and
	// capture later (default 0.15); a run that must see holds raises it.
	ManualShare float64
	// ActionShare is the share of the simulator's checkouts paid with its
	// 3-D Secure card (default 0.1); a run that must see challenges
	// expire under late customers raises it.
	ActionShare float64
	// AdyenShare is the share of checkouts on the gateway "adyen", a fake
	// Adyen in the harness's process whose notifications are delayed,
	// reordered, duplicated and lost (0: none; unlike the other fields,
	// zero is no default; DefaultAdyenShare is the command's).
	AdyenShare float64
	// RouteShare is the share of checkouts made with routes over two or
	// three refpsp gateway accounts that misbehave each its own way (one
	// going down, one timing out, one declining technically; see
	// accounts.go), "refpsp" the last (0: none, and no accounts; like
	// AdyenShare, zero is no default; DefaultRouteShare is the command's).
	RouteShare float64
	// DisputeShare is the share of the simulator's charges it disputes,
	// at each of the run's two rounds of disputes (default 0.1; see
	// disputes.go).
	DisputeShare float64
	// Failover, when set, runs PostgreSQL as a primary and a standby, and
	// each database restart of the schedule becomes a failover: the
	// standby is cut off for 1 to 2 seconds (the primary's WAL sender
	// frozen), then the primary is killed, the standby promoted, the old
	// primary rewound and rejoined as the standby. FailoverSync makes the
	// standby synchronous (commits wait during the cut; no committed claim
	// can be lost); FailoverAsync leaves it asynchronous, which loses the
	// commits of the cut: expect violations.
	Failover FailoverMode
	// Gateway are the simulator's fault rates (zero value: DefaultGateway).
	Gateway sim.RandomFaults
	// LogDir receives every process's log; default a temporary directory,
	// removed after a run with nothing to report.
	LogDir string
	// Citus runs Settle on a throwaway Citus cluster (a coordinator and two
	// workers, tables distributed by merchant); the database restarts then
	// crash and restart a worker, in turn, instead of the one server.
	Citus bool
	// Lie, when set, is called once every process has stopped, before the
	// gateway audit and the checks, with the run's simulators by gateway
	// account ("refpsp", and the accounts of the orders with routes): a
	// test makes the gateway lie with the simulator's discrepancies
	// (sim.Sim.Duplicate, Hide, ...), which the audit and the invariants
	// must then report. An error fails the run.
	Lie func(sims map[string]*sim.Sim) error
	// Log receives the run's progress: each fault as it happens, every
	// violation with the order's history. Nil discards it.
	Log io.Writer
}

// DefaultAdyenShare is the share of checkouts on Adyen of `settle chaos`
// and of TestChaos.
const DefaultAdyenShare = 0.2

// DefaultGateway are the simulator's fault rates of a run that does not
// set them: every kind of fault, often, and half the timeouts hidden from
// lookups while the charge is "landing".
func DefaultGateway() sim.RandomFaults {
	return sim.RandomFaults{Decline: 0.05, Timeout: 0.03, FiveXXAfterCharge: 0.03, DropAfterCharge: 0.03,
		FiveXXNoCharge: 0.03, Slow: 0.1, SlowMax: 300 * time.Millisecond, LookupNotFoundWhileInFlight: 0.5,
		RefundFailLater: 0.05}
}

// Plan returns the fault schedule a run with cfg would follow.
func Plan(cfg Config) ([]Fault, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return plan(cfg.Seed, cfg.planParams()), nil
}

func (c *Config) defaults() error {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Minute
	}
	if c.Clients <= 0 {
		c.Clients = 16
	}
	if c.Orders <= 0 {
		c.Orders = int(10 * c.Duration.Seconds())
	}
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.Reconcilers <= 0 {
		c.Reconcilers = 2
	}
	if c.Faults == (Faults{}) {
		c.Faults = DefaultFaults()
	}
	if c.ManualShare <= 0 {
		c.ManualShare = defaultManualShare
	}
	if c.ActionShare <= 0 {
		c.ActionShare = defaultActionShare
	}
	if c.DisputeShare <= 0 {
		c.DisputeShare = defaultDisputeShare
	}
	if c.Gateway == (sim.RandomFaults{}) {
		c.Gateway = DefaultGateway()
	}
	if c.Gateway.SlowMax <= 0 {
		c.Gateway.SlowMax = DefaultGateway().SlowMax
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.AdyenShare < 0 || c.AdyenShare > 1 {
		return fmt.Errorf("chaos: the Adyen share %g is not between 0 and 1", c.AdyenShare)
	}
	if c.RouteShare < 0 || c.RouteShare > 1 {
		return fmt.Errorf("chaos: the route share %g is not between 0 and 1", c.RouteShare)
	}
	if c.Gateway.SlowMax > gatewayTimeout/2 {
		return fmt.Errorf("chaos: the slowest gateway answer (%s) must be well under the gateway timeout (%s)", c.Gateway.SlowMax, gatewayTimeout)
	}
	if lo, hi := c.freezeBounds(); hi <= lo {
		return fmt.Errorf("chaos: no freeze fits between the lease (%s) and the no-show horizon (%s)", lo, hi)
	}
	return nil
}

// freezeBounds are the shortest and longest freeze: past a claim's lease,
// and short enough that a request sent on waking is charged, and visible
// to lookups, before the no-show horizon (see the package documentation).
func (c *Config) freezeBounds() (lo, hi time.Duration) {
	return gatewayTimeout + claimGrace + 300*time.Millisecond, noShowHorizon - c.hiddenFor() - time.Second
}

// hiddenFor is the longest the simulator hides a charge it made from
// lookups: a slow answer's delay, or a held timeout's when some are hidden.
func (c *Config) hiddenFor() time.Duration {
	if c.Gateway.LookupNotFoundWhileInFlight > 0 && c.Gateway.Timeout > 0 {
		return max(c.Gateway.SlowMax, simHold)
	}
	return c.Gateway.SlowMax
}

func (c *Config) planParams() planParams {
	lo, hi := c.freezeBounds()
	return planParams{duration: c.Duration, replicas: c.Replicas, reconcilers: c.Reconcilers, faults: c.Faults,
		freezeMin: lo, freezeMax: hi}
}
