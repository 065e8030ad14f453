// Package reconcile settles operations at a gateway whose outcome is
// unknown: attempts (CHARGING, REQUIRES_ACTION orders) and refunds
// (REFUNDING). One loop (RunOnce) leases the due ones of every kind, asks
// their gateway about each by reference, and settles it with the same
// guard as the service's lifecycle (package order, operation.go); each
// kind declares its lookup, its decision table and its settle (attempts.go,
// refunds.go). An outcome that cannot be learned is never turned into a
// failure by a timer: when the backoff schedule is exhausted the operation
// goes to NEEDS_REVIEW.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
	"github.com/settlepay/settle/internal/order"
)

// Store is what the reconciler needs of storage.
type Store interface {
	// ClaimDue leases up to limit due CHARGING orders, pushing their
	// reconcile_at forward by lease, skipping orders others hold.
	ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error)
	// ClaimOrder leases one CHARGING order now, due or not; it reports
	// false when there is no such CHARGING order.
	ClaimOrder(ctx context.Context, id string, lease time.Duration) (order.Due, bool, error)
	// Settle is order.Store's guarded settle. Concurrent settles share a
	// statement and a commit (postgres.Store groups them).
	Settle(ctx context.Context, s order.Settlement) (order.Order, bool, error)
}

// ReviewStore is what the slow recheck of orders in NEEDS_REVIEW needs;
// postgres.Store implements it. A store without it has no slow recheck.
type ReviewStore interface {
	// ClaimReviewDue leases up to limit NEEDS_REVIEW orders whose recheck
	// has come, pushing it cadence forward.
	ClaimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error)
	// Transition is order.Store's locked, guarded transition.
	Transition(ctx context.Context, scope order.Scope, id string, decide func(order.Order) (order.Move, error)) (order.Order, error)
}

// DefaultReviewCadence is Config.ReviewCadence when it is zero.
const DefaultReviewCadence = time.Hour

// Config is the reconciler's schedule.
type Config struct {
	// Schedule is the wait before each check of an unknown outcome: the
	// charge path waits Schedule[0] before the first check; after check n
	// could not settle the order, the next comes Schedule[n] later (with
	// jitter). After len(Schedule) checks the order goes to NEEDS_REVIEW.
	Schedule []time.Duration
	// BatchSize bounds the orders leased at once.
	BatchSize int
	// Concurrency bounds the lookups in flight at once.
	Concurrency int
	// PollInterval is the wait between polls when nothing is due.
	PollInterval time.Duration
	// LookupTimeout bounds one gateway lookup.
	LookupTimeout time.Duration
	// NoShowHorizon is the longest time after an attempt began that its
	// charge request could still reach the gateway (gateway timeout plus a
	// safety margin). "Not found" means "not charged" only after it.
	NoShowHorizon time.Duration
	// ActionExpiry is how long an attempt may wait for the customer to act
	// (REQUIRES_ACTION, 3-D Secure) before the reconciler cancels it at the
	// gateway and returns the order to PENDING. Zero means
	// DefaultActionExpiry.
	ActionExpiry time.Duration
	// Failpoint, when set, is called mid-batch ("reconcile-mid-batch").
	Failpoint func(name string)
	// OnCheck, when set, is told each check's result: the event it
	// settled the order with, or "recheck".
	OnCheck func(result string)
	// ReviewCadence is how often an order in NEEDS_REVIEW is looked up
	// again, so that a charge the gateway shows late moves it to PAID.
	// Zero is DefaultReviewCadence.
	ReviewCadence time.Duration
	// OnEventSettled, when set, is told how long after a gateway's event
	// made it due (Wake) an order was settled by this reconciler.
	OnEventSettled func(time.Duration)
	// ActionRecheckMax caps the wait between two checks of an attempt that
	// waits for the customer (see actionRecheck). Zero is
	// DefaultActionRecheckMax.
	ActionRecheckMax time.Duration
	// Budgets holds each gateway's outbound request budget by gateway
	// name, the same as the order.Service of the same process is given; a
	// gateway without one has no budget.
	Budgets map[string]*order.Budget
}

// DefaultSchedule checks within seconds, then ever less often, and hands
// the order to a person after about 22 hours.
var DefaultSchedule = []time.Duration{
	5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
	10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour,
}

// DefaultActionRecheckMax is Config.ActionRecheckMax when it is zero: an
// abandoned challenge of an hour costs about 25 lookups (each check waits
// half the attempt's age, up to this), not one every few seconds.
const DefaultActionRecheckMax = 5 * time.Minute

// DefaultActionExpiry is how long a customer has to complete the gateway's
// challenge when Config.ActionExpiry is zero.
const DefaultActionExpiry = time.Hour

// Reconciler settles unknown outcomes.
type Reconciler struct {
	store Store
	// refunds is store, when it keeps refunds too.
	refunds RefundStore
	// reviews is store, when it can recheck orders in review.
	reviews ReviewStore
	// holds is store, when it keeps captures and voids.
	holds    HoldStore
	gateways map[string]order.Gateway
	cfg      Config
	log      *slog.Logger
	// wake holds one wake-up for Run: see Wake.
	wake chan struct{}

	mu sync.Mutex
	// woken holds when each order was made due by a gateway's event, until
	// it is settled, for Config.OnEventSettled; guarded by mu.
	woken map[string]time.Time
}

// maxWoken bounds Reconciler.woken: past it, the oldest half is forgotten
// (orders woken but settled by another reconciler).
const maxWoken = 10000

// New returns a Reconciler.
func New(store Store, gateways map[string]order.Gateway, cfg Config, log *slog.Logger) (*Reconciler, error) {
	if len(cfg.Schedule) == 0 || cfg.BatchSize <= 0 || cfg.Concurrency <= 0 || cfg.PollInterval <= 0 ||
		cfg.LookupTimeout <= 0 || cfg.NoShowHorizon <= 0 {
		return nil, errors.New("reconcile: schedule, batch size, concurrency, poll interval, lookup timeout and no-show horizon must be set")
	}
	for _, d := range cfg.Schedule {
		if d <= 0 {
			return nil, errors.New("reconcile: every step of the schedule must be positive")
		}
	}
	if cfg.ActionExpiry == 0 {
		cfg.ActionExpiry = DefaultActionExpiry
	}
	if cfg.ActionExpiry < 0 {
		return nil, errors.New("reconcile: the action expiry must not be negative")
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	if cfg.OnCheck == nil {
		cfg.OnCheck = func(string) {}
	}
	if cfg.OnEventSettled == nil {
		cfg.OnEventSettled = func(time.Duration) {}
	}
	if cfg.ReviewCadence <= 0 {
		cfg.ReviewCadence = DefaultReviewCadence
	}
	if cfg.ActionRecheckMax == 0 {
		cfg.ActionRecheckMax = DefaultActionRecheckMax
	}
	if cfg.ActionRecheckMax < 0 {
		return nil, errors.New("reconcile: the action recheck cap must not be negative")
	}
	refunds, _ := store.(RefundStore)
	reviews, _ := store.(ReviewStore)
	holds, _ := store.(HoldStore)
	return &Reconciler{store: store, refunds: refunds, reviews: reviews, holds: holds, gateways: gateways, cfg: cfg, log: log, wake: make(chan struct{}, 1),
		woken: map[string]time.Time{}}, nil
}

// lease is how far a check pushes reconcile_at: long enough for the lookup
// and the settle, so that no other reconciler checks the order meanwhile.
func (r *Reconciler) lease() time.Duration { return 2*r.cfg.LookupTimeout + 5*time.Second }

// Wake makes Run look for due orders now instead of at its next poll: a
// gateway's event has made order orderID due. The check of the order that
// follows uses up none of its schedule. Wakes that come while Run is busy
// collapse into one, so it never blocks.
func (r *Reconciler) Wake(orderID string) {
	if orderID != "" {
		r.mu.Lock()
		if len(r.woken) >= maxWoken {
			r.forgetOldestLocked()
		}
		r.woken[orderID] = time.Now()
		r.mu.Unlock()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Reconciler) forgetOldestLocked() {
	times := make([]time.Time, 0, len(r.woken))
	for _, t := range r.woken {
		times = append(times, t)
	}
	slices.SortFunc(times, time.Time.Compare)
	cut := times[len(times)/2]
	for id, t := range r.woken {
		if t.Before(cut) {
			delete(r.woken, id)
		}
	}
}

// Run polls for due orders until ctx ends. A full batch is followed at once
// by the next; otherwise it waits PollInterval, or until Wake.
func (r *Reconciler) Run(ctx context.Context) error {
	for {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "reconcile batch failed", "error", err)
		}
		if n == r.cfg.BatchSize && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.PollInterval):
		case <-r.wake:
		}
	}
}

// operation is one leased operation at a gateway, of any kind, as RunOnce
// checks it: what its kind declares (attempts.go, refunds.go). A kind is
// its store's lease of the due ones, a lookup, a decision table and a
// guarded settle; the loop, the lease, the schedule and the budget are
// the same for every kind.
type operation interface {
	// lookup asks the gateway how the operation stands (see ask).
	lookup(ctx context.Context, r *Reconciler) (order.Result, error)
	// settle decides by the kind's table what the answer (res, or err when
	// the gateway could not say) comes to, and records it under the kind's
	// guard, telling OnCheck and the log what it came to.
	settle(ctx context.Context, r *Reconciler, res order.Result, err error) error
}

// RunOnce leases one batch of due operations of every kind (attempts, then
// refunds) and checks each; then it rechecks a batch of orders in review.
// It returns how many attempts it leased, or refunds when that is more.
//
// The lookups run Concurrency at a time. A lookup's slot is freed as soon
// as the gateway has answered, before its settle: the settles of a backlog
// then wait together for the store's statement in progress and share the
// next one (one commit for many operations), and never hold lookups back.
func (r *Reconciler) RunOnce(ctx context.Context) (int, error) {
	attempts, err := r.store.ClaimDue(ctx, r.cfg.BatchSize, r.lease())
	if err != nil {
		return 0, fmt.Errorf("claim due orders: %w", err)
	}
	refunds, refundsErr := r.claimDueRefunds(ctx)
	held, heldErr := r.claimDueHoldWork(ctx)
	due := make([]operation, 0, len(attempts)+len(refunds)+len(held))
	for _, d := range attempts {
		due = append(due, &dueAttempt{Due: d})
	}
	for _, d := range refunds {
		due = append(due, &dueRefund{d})
	}
	due = append(due, held...)
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, r.cfg.Concurrency)
		mu   sync.Mutex
		errs = []error{refundsErr, heldErr}
	)
	for i, op := range due {
		if i == len(due)/2 && i > 0 {
			r.cfg.Failpoint(failpoint.MidBatch)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, lookupErr := op.lookup(ctx, r)
			<-sem
			// A settle that fails leaves the operation leased: it is
			// checked again when the lease expires, which is safe, because
			// a check settles only what it looked up, under the guard.
			if err := op.settle(ctx, r, res, lookupErr); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	errs = append(errs, r.runReviews(ctx))
	return max(len(attempts), len(refunds), len(held)), errors.Join(errs...)
}

// ask makes one lookup at gateway for a check, within LookupTimeout and
// the gateway's request budget, and logs it as line tells (a lookup the
// budget refused asked nothing, and logs nothing).
func (r *Reconciler) ask(ctx context.Context, line order.GatewayCall, lookup func(context.Context) (order.Result, error)) (order.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.LookupTimeout)
	defer cancel()
	if err := r.cfg.Budgets[line.Gateway].WaitLookup(ctx); err != nil {
		return order.Result{}, err
	}
	start := time.Now()
	res, err := lookup(ctx)
	line.Outcome, line.Latency, line.Err = res.Outcome, time.Since(start), err
	line.Log(ctx, r.log)
	return res, err
}

// jitter spreads d by ±20%, so that orders that timed out together are not
// all checked together again.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}
