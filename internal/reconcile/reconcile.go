// Package reconcile settles orders whose gateway outcome is unknown. It
// leases due CHARGING orders, asks their gateway about the current attempt
// by reference, and settles them with the same guard as the charge path. An
// outcome that cannot be learned is never turned into a failure by a timer:
// when the backoff schedule is exhausted the order goes to NEEDS_REVIEW.
package reconcile

import (
	"cmp"
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
	reviews  ReviewStore
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
	return &Reconciler{store: store, refunds: refunds, reviews: reviews, gateways: gateways, cfg: cfg, log: log, wake: make(chan struct{}, 1),
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

// RunOnce leases one batch of due orders and checks each, then one batch
// of due refunds. It returns how many orders it leased, or refunds when
// that is more.
//
// The lookups run Concurrency at a time. A lookup's slot is freed as soon
// as the gateway has answered, before its settle: the settles of a backlog
// then wait together for the store's statement in progress and share the
// next one (one commit for many orders), and never hold lookups back.
func (r *Reconciler) RunOnce(ctx context.Context) (int, error) {
	due, err := r.store.ClaimDue(ctx, r.cfg.BatchSize, r.lease())
	if err != nil {
		return 0, fmt.Errorf("claim due orders: %w", err)
	}
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, r.cfg.Concurrency)
		mu   sync.Mutex
		errs []error
	)
	for i, d := range due {
		if i == len(due)/2 && i > 0 {
			r.cfg.Failpoint(failpoint.MidBatch)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A check a gateway's event asked for is not one of the
			// schedule's: it uses none of it.
			wokenAt, woken := r.takeWoken(d.Order.ID)
			res, lookupErr := r.lookup(ctx, d)
			<-sem
			// A settle that fails leaves the order leased: it is checked
			// again when the lease expires, which is safe, because a check
			// settles only the attempt it looked up, under the guard.
			if _, err := r.settle(ctx, r.decide(d, res, lookupErr, !woken), wokenAt); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	n, err := r.runRefunds(ctx)
	if rerr := r.runReviews(ctx); rerr != nil {
		errs = append(errs, rerr)
	}
	return max(len(due), n), errors.Join(append(errs, err)...)
}

// errNotInReview aborts a review's transition whose order has moved on.
var errNotInReview = errors.New("order no longer in review for this attempt")

// runReviews looks up, once every ReviewCadence, the current attempt of
// each order in NEEDS_REVIEW: a charge the gateway shows moves the order to
// PAID (event succeed, by the reconciler, which the operator sees in its
// history); anything else leaves it to a person until the next look.
func (r *Reconciler) runReviews(ctx context.Context) error {
	if r.reviews == nil {
		return nil
	}
	due, err := r.reviews.ClaimReviewDue(ctx, r.cfg.BatchSize, r.cfg.ReviewCadence)
	if err != nil {
		return fmt.Errorf("claim orders in review: %w", err)
	}
	var errs []error
	for _, d := range due {
		res, err := r.lookup(ctx, d)
		if err != nil || res.Outcome != order.OutcomeSucceeded {
			r.cfg.OnCheck("review_recheck")
			continue
		}
		reason := "gateway has the charge (found while the order was in review)"
		_, err = r.reviews.Transition(ctx, order.ForMerchant(d.Order.MerchantID), d.Order.ID, func(o order.Order) (order.Move, error) {
			if o.State != order.StateNeedsReview || o.CurrentAttempt != d.Attempt.ID {
				return order.Move{}, errNotInReview
			}
			to, err := order.Next(o.State, order.EventSucceed)
			return order.Move{Event: order.EventSucceed, To: to, Actor: order.ActorReconciler, Reason: reason,
				Attempt: &order.Result{Outcome: order.OutcomeSucceeded, ChargeID: res.ChargeID}}, err
		})
		switch {
		case errors.Is(err, errNotInReview):
			r.cfg.OnCheck("lost_race")
		case err != nil:
			errs = append(errs, fmt.Errorf("settle order %s in review: %w", d.Order.ID, err))
		default:
			r.cfg.OnCheck(string(order.EventSucceed))
			order.Transition{OrderID: d.Order.ID, AttemptID: d.Attempt.ID, From: order.StateNeedsReview, To: order.StatePaid,
				Event: order.EventSucceed, Actor: order.ActorReconciler}.Log(ctx, r.log)
		}
	}
	return errors.Join(errs...)
}

// CheckNow checks one CHARGING order at once, due or not, and returns it as
// it then stands; for an order in any other state (or none) it reports
// false and checks nothing. It reports false too when the check's settle
// lost to another (a late answer to the charge, a returning customer): the
// caller reads the order as that left it.
func (r *Reconciler) CheckNow(ctx context.Context, id string) (order.Order, bool, error) {
	due, ok, err := r.store.ClaimOrder(ctx, id, r.lease())
	if err != nil || !ok {
		return order.Order{}, false, err
	}
	res, err := r.lookup(ctx, due)
	o, err := r.settle(ctx, r.decide(due, res, err, false), time.Time{})
	if err != nil || o.ID == "" {
		// A settle that lost its race returns no order.
		return order.Order{}, false, err
	}
	return o, true, nil
}

// takeWoken reports whether a gateway's event made order id due lately
// (within a lease: a wake older than that was another reconciler's to
// check), and when; it forgets the wake, which one check answers.
func (r *Reconciler) takeWoken(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.woken[id]
	delete(r.woken, id)
	if !ok || time.Since(at) > r.lease() {
		return time.Time{}, false
	}
	return at, true
}

// settle settles what a check learned, and tells OnCheck and the log what
// it came to; wokenAt is when a gateway's event asked for the check, if
// one did.
func (r *Reconciler) settle(ctx context.Context, st order.Settlement, wokenAt time.Time) (order.Order, error) {
	o, ok, err := r.store.Settle(ctx, st)
	if err != nil {
		return order.Order{}, fmt.Errorf("settle order %s attempt %s: %w", st.OrderID, st.AttemptID, err)
	}
	switch {
	case !ok:
		r.cfg.OnCheck("lost_race")
	case st.Event == "":
		r.cfg.OnCheck("recheck")
	default:
		r.cfg.OnCheck(string(st.Event))
		if !wokenAt.IsZero() {
			r.cfg.OnEventSettled(time.Since(wokenAt))
		}
		order.Transition{OrderID: st.OrderID, AttemptID: st.AttemptID, From: cmp.Or(st.From, order.StateCharging), To: st.To,
			Event: st.Event, Actor: st.Actor}.Log(ctx, r.log)
	}
	return o, nil
}

func (r *Reconciler) lookup(ctx context.Context, d order.Due) (order.Result, error) {
	gw, ok := r.gateways[d.Order.Gateway]
	if !ok {
		return order.Result{}, fmt.Errorf("gateway %q is not configured here", d.Order.Gateway)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.LookupTimeout)
	defer cancel()
	if err := r.cfg.Budgets[d.Order.Gateway].WaitLookup(ctx); err != nil {
		return order.Result{}, err
	}
	start := time.Now()
	res, err := gw.Lookup(ctx, order.ChargeRequest{
		AttemptID:         d.Attempt.ID,
		OrderID:           d.Order.ID,
		MerchantReference: d.Order.MerchantReference,
		Amount:            d.Attempt.Amount,
		PaymentMethod:     d.Attempt.PaymentMethod,
		// The attempt's customer: a replay of Stripe's create must carry
		// every parameter of the first.
		Customer: d.Attempt.Customer,
		// From the attempt's age in database time, so that no two clocks
		// are compared.
		CreatedAt: time.Now().Add(-d.AttemptAge),
		// What the charge path (or an earlier check) learned of the
		// gateway's own id: Stripe reads the PaymentIntent by it.
		GatewayChargeID: d.Attempt.GatewayChargeID,
		// Past the expiry, an attempt still waiting for the customer is
		// canceled, which proves it uncharged; before it, it is only read.
		// An off-session attempt waits for nobody: it is canceled at once.
		CancelAwaitingAction: r.expired(d) || d.Attempt.AwaitsNobody(),
	})
	order.GatewayCall{Op: "lookup", Gateway: d.Order.Gateway, OrderID: d.Order.ID, AttemptID: d.Attempt.ID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, r.log)
	return res, err
}

// decide turns what the gateway said into a settlement. Only a scheduled
// check that could not learn the outcome uses up the schedule: an
// operator's ReconcileOrder (scheduled false) and a "not found" while the
// request may still arrive are not failed checks, and never send an order
// to NEEDS_REVIEW, however many of them come (13 operator checks within a
// second used to exhaust the schedule of a charge still in flight).
func (r *Reconciler) decide(d order.Due, res order.Result, err error, scheduled bool) order.Settlement {
	st := order.Settlement{MerchantID: d.Order.MerchantID, OrderID: d.Order.ID, AttemptID: d.Attempt.ID, Actor: order.ActorReconciler, Checked: scheduled, Result: res}
	// The settle writes the attempt's gateway id: keep the one recorded
	// unless this check learned it. The next check reads the attempt by it.
	st.Result.ChargeID = cmp.Or(res.ChargeID, d.Attempt.GatewayChargeID)
	st.From = d.Order.State
	switch {
	case errors.Is(err, order.ErrLookupExpired):
		return escalate(st, err.Error())
	case errors.Is(err, order.ErrBudgetExhausted):
		// Nothing was asked: no failed check.
		st.Checked = false
		st.LastError = "not looked up: the gateway's request budget was used up"
	case err != nil:
		st.LastError = err.Error()
	case res.Outcome == order.OutcomeSucceeded:
		return move(st, order.EventSucceed, "gateway has the charge")
	case res.Outcome == order.OutcomeDeclined && st.From == order.StateRequiresAction && r.expired(d):
		// A fail, so that the merchant hears that the payment did not go
		// through (order.payment_failed), with the reason in the history.
		return move(st, order.EventFail, "expired: the customer did not act in time; the gateway canceled the attempt: "+res.DeclineCode)
	case res.Outcome == order.OutcomeDeclined:
		return move(st, order.EventFail, "gateway declined: "+res.DeclineCode)
	case res.Outcome == order.OutcomeRequiresAction:
		// Waiting for the customer is not a failed check. Look again
		// ever less often, and no later than the expiry.
		st.Checked = false
		st.Result.NextAction = order.NextAction{}
		st.RecheckIn = min(r.actionRecheck(d.AttemptAge), max(r.cfg.ActionExpiry-d.AttemptAge, 0)+time.Second)
		if st.From == order.StateCharging {
			return move(st, order.EventRequireAction, "the gateway asks the customer to act")
		}
		st.LastError = "waiting for the customer to act"
		return st
	case res.Outcome == order.OutcomeNotFound && d.AttemptAge > r.cfg.NoShowHorizon:
		return move(st, order.EventFail, "gateway has no charge and the request can no longer arrive")
	case res.Outcome == order.OutcomeNotFound:
		st.Checked = false
		st.LastError = "gateway has no charge yet; the request may still arrive"
	default:
		st.LastError = fmt.Sprintf("gateway lookup answered %q", res.Outcome)
	}
	// Still unknown: check again later, or hand it to a person. An
	// off-session attempt keeps its mark, so that the next check cancels
	// it too.
	st.Result = order.Result{Outcome: order.OutcomeUnknown, ChargeID: st.Result.ChargeID}
	if d.Attempt.AwaitsNobody() {
		st.Result.DeclineCode = d.Attempt.DeclineCode
	}
	checks := d.Order.ReconcileCount
	if st.Checked {
		checks++
	}
	if checks >= len(r.cfg.Schedule) {
		return escalate(st, fmt.Sprintf("outcome still unknown after %d checks: %s", checks, st.LastError))
	}
	st.RecheckIn = jitter(r.cfg.Schedule[checks])
	if res.Outcome == order.OutcomeNotFound && err == nil {
		// No sooner than the horizon can settle it.
		st.RecheckIn = max(st.RecheckIn, r.cfg.NoShowHorizon-d.AttemptAge+time.Second)
	}
	return st
}

func move(st order.Settlement, ev order.EventName, reason string) order.Settlement {
	st.Event, st.To, st.Reason = ev, order.MustNext(cmp.Or(st.From, order.StateCharging), ev), reason
	return st
}

// actionRecheck is the wait before the next check of an attempt that has
// waited age for the customer: half its age, so that the waits grow
// exponentially (each check 1.5 times as far from the charge as the one
// before), at least the schedule's first step and at most
// ActionRecheckMax, with jitter. A customer who returns is answered at
// once by their checkout's call (GetOrder, ChargeOrder), and a gateway's
// event makes the order due now: these checks only find the ones nobody
// reports, and the expiry.
func (r *Reconciler) actionRecheck(age time.Duration) time.Duration {
	return jitter(min(max(age/2, r.cfg.Schedule[0]), r.cfg.ActionRecheckMax))
}

// expired reports whether the attempt of d has waited longer than a
// customer is given to act.
func (r *Reconciler) expired(d order.Due) bool { return d.AttemptAge > r.cfg.ActionExpiry }

func escalate(st order.Settlement, why string) order.Settlement {
	st.Result = order.Result{Outcome: order.OutcomeUnknown, ChargeID: st.Result.ChargeID}
	st.LastError = why
	return move(st, order.EventEscalate, why)
}

// jitter spreads d by ±20%, so that orders that timed out together are not
// all checked together again.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}
