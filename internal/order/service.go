package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Store keeps orders, attempts and their history. Every write is guarded by
// the state it expects, so that any number of servers and reconcilers can
// share one database.
type Store interface {
	// CreateOrder inserts o in PENDING, or returns the existing order with the
	// same merchant reference when its parameters are the same (a
	// *ConflictError when they differ).
	CreateOrder(ctx context.Context, o Order) (Order, error)
	// Order returns an order by id; an order outside scope is ErrNotFound.
	Order(ctx context.Context, scope Scope, id string) (Order, error)
	// OrderByReference returns a merchant's order by merchant reference.
	OrderByReference(ctx context.Context, merchantID, ref string) (Order, error)
	// FindOrders returns a merchant's orders that query names (see
	// Service.Find), newest first, at most 20.
	FindOrders(ctx context.Context, merchantID, query string) ([]Order, error)
	// Attempt returns a merchant's attempt by id.
	Attempt(ctx context.Context, merchantID, id string) (Attempt, error)
	// OrderAttempt returns a merchant's order and its attempt attemptID as
	// they stood at one moment (one read).
	OrderAttempt(ctx context.Context, merchantID, orderID, attemptID string) (Order, Attempt, error)
	// Claim moves a PENDING order to CHARGING with a new attempt, in one
	// short transaction; see Claim.
	Claim(ctx context.Context, c Claim) (ClaimResult, error)
	// Settle records a gateway's answer for the order's current attempt,
	// guarded by state = CHARGING and current_attempt = s.AttemptID. It
	// reports false, and changes nothing, when the guard does not hold.
	Settle(ctx context.Context, s Settlement) (Order, bool, error)
	// CreateClaimed inserts o already claimed by c (both events, one
	// commit; the attempt keeps c.Customer) and reports true; it inserts
	// nothing and reports false when o's merchant reference is taken. When c's request id is taken (by
	// another order's attempt, since the reference was free), it inserts
	// nothing and returns a *ConflictError.
	CreateClaimed(ctx context.Context, o Order, c Claim) (Order, Attempt, bool, error)
	// Transition locks an order, asks decide for the move to make from the
	// state it is in, and makes it with its event, in one transaction. An
	// order outside scope is ErrNotFound.
	Transition(ctx context.Context, scope Scope, id string, decide func(Order) (Move, error)) (Order, error)
	// History returns a merchant's order's events and attempts, oldest
	// first.
	History(ctx context.Context, merchantID, id string) ([]Event, []Attempt, error)
	// Routing returns what the charge path needs of a merchant's order to
	// choose the gateway of its next attempt.
	Routing(ctx context.Context, merchantID, orderID string) (Routing, error)
}

// Claim asks the store to start an attempt. When the order is in From and
// no attempt has used RequestID, the store creates attempt AttemptID, moves
// the order to To with Event, and sets reconcile_at to database now + Lease,
// so that a crash from then on is found by the reconciler.
type Claim struct {
	MerchantID    string
	OrderID       string
	RequestID     string
	PaymentMethod string // empty: the order's
	// Customer is the gateway's customer for the new attempt, or empty.
	Customer  string
	AttemptID string
	From, To  State
	Event     EventName
	Lease     time.Duration
	Actor     Actor

	// Gateway is the gateway the new attempt goes to, which the order
	// takes as its own; empty: the order's. CascadeAfter and Skipped are
	// recorded with the attempt (Attempt), Reason with the claim's event.
	Gateway, CascadeAfter, Skipped, Reason string
	// Follows, when not nil, is the attempt a route was chosen after (""
	// for none): the claim holds only while it is the order's current
	// attempt, so that a route chosen on a stale read is never claimed.
	Follows *string
}

// ClaimResult is the order after a claim, and the attempt that the request
// id names: the new one when Claimed, or the earlier one when the request id
// was used before (possibly on another order).
type ClaimResult struct {
	Order   Order
	Attempt *Attempt
	Claimed bool
}

// Settlement is what a gateway said about an attempt. With an Event, the
// order moves to To and the event is recorded; without one it stays
// CHARGING and is checked again after RecheckIn.
type Settlement struct {
	// MerchantID is the order's merchant: the settle statement names it,
	// so that on Citus it runs on the merchant's shard.
	MerchantID string
	OrderID    string
	AttemptID  string
	Result     Result
	Event      EventName
	To         State
	// From is the state the order must be in for its attempt: CHARGING
	// when empty, or REQUIRES_ACTION. Without an Event the order stays in it.
	From      State
	RecheckIn time.Duration
	// Checked counts this settlement as one reconciler check.
	Checked   bool
	LastError string
	Actor     Actor
	Reason    string
	// Lease, when set, is the order's reconcile_at as the reconciler's
	// lease of it set it (Due.Order.ReconcileAt): the settle applies only
	// while the order's reconcile_at is still that. A gateway event that
	// woke the order during the lookup moved it (the verdict may predate
	// what the event reports: Adyen's CAPTURE_FAILED after the capture
	// the lookup replayed), and so did another lease; the settle then
	// loses, as to any other, and the order, due, is looked up again.
	// The charge path leaves it zero: its claim is its guard.
	Lease time.Time
}

// Move is one transition decided by Store.Transition's caller.
type Move struct {
	Event  EventName
	To     State
	Actor  Actor
	Reason string
	// Attempt, when set, is recorded as the current attempt's result.
	Attempt *Result
}

// Config is the charge path's timing.
type Config struct {
	// DefaultGateway charges orders created without a gateway.
	DefaultGateway string
	// GatewayTimeout bounds one gateway call.
	GatewayTimeout time.Duration
	// Grace is added to GatewayTimeout for the claim's lease: the reconciler
	// leaves a claimed order alone until then.
	Grace time.Duration
	// FirstRecheck is when an unknown outcome is first checked again.
	FirstRecheck time.Duration
	// Failpoint, when set, is called at the named instants of the charge
	// path ("after-claim", "after-gateway"); crash tests arm it to kill the
	// process there.
	Failpoint func(name string)
	// LookupReuse is how long an answer of a lookup of an attempt waiting
	// for the customer that settled nothing is reused for the same order
	// as it stands in the database (see lookupGroup); zero reuses none, and
	// concurrent lookups of one attempt are coalesced either way.
	LookupReuse time.Duration
	// Budgets holds each gateway's outbound request budget by gateway
	// name; a gateway without one has no budget. The reconciler of the
	// same process must be given the same budgets.
	Budgets map[string]*Budget
	// Unconfigured names, for each gateway this server could have but
	// has not, the setting that would configure it ("stripe":
	// "STRIPE_SECRET_KEY"): an order for one is refused with the hint.
	Unconfigured map[string]string
	// Accounts describes each gateway account for OpsService.GetRoutes:
	// its kind and credentials' fingerprint; a gateway not named has
	// none to show.
	Accounts map[string]AccountInfo
	// Breakers are the gateways' breakers (breaker.go), shared by the
	// process's Services; nil gives this Service its own, by default.
	Breakers *Breakers
}

// Service charges and refunds orders, each an operation at a gateway
// taken through one lifecycle: claim, call, settle (see operation.go).
type Service struct {
	store Store
	// refunds is store, when it keeps refunds too; nil refuses refunds.
	refunds RefundStore
	// holds is store, when it keeps captures and voids; nil refuses them.
	holds HoldStore
	// reviews is store, when it keeps the review queue; nil finds no
	// review item.
	reviews ReviewStore
	// disputes is store, when it keeps disputes; nil refuses them.
	disputes DisputeStore
	// routes is store, when it keeps merchants' route rules; nil keeps
	// every order's routes in the checkout's order.
	routes RouteStore
	rules  ruleCache
	// oneRoute holds orders known to have one route, whose charges need
	// not read their routing.
	oneRoute oneRoute
	gateways map[string]Gateway
	// refunders names the gateways that can refund, for the refund claim's
	// guard.
	refunders []string
	cfg       Config
	log       *slog.Logger
	lookups   *lookupGroup
	breakers  *Breakers
}

// NewService returns a Service. gateways maps gateway names to adapters and
// must hold cfg.DefaultGateway.
func NewService(store Store, gateways map[string]Gateway, cfg Config, log *slog.Logger) (*Service, error) {
	if _, ok := gateways[cfg.DefaultGateway]; !ok {
		return nil, fmt.Errorf("default gateway %q is not configured", cfg.DefaultGateway)
	}
	if cfg.GatewayTimeout <= 0 || cfg.Grace < 0 || cfg.FirstRecheck <= 0 || cfg.LookupReuse < 0 {
		return nil, errors.New("gateway timeout and first recheck must be positive, grace and lookup reuse not negative")
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = func(string) {}
	}
	refunds, _ := store.(RefundStore)
	holds, _ := store.(HoldStore)
	reviews, _ := store.(ReviewStore)
	disputes, _ := store.(DisputeStore)
	routes, _ := store.(RouteStore)
	breakers := cfg.Breakers
	if breakers == nil {
		var err error
		breakers, err = NewBreakers(slices.Collect(maps.Keys(gateways)), BreakerConfig{SlowCall: cfg.GatewayTimeout / 2, ProbeLease: cfg.GatewayTimeout + cfg.Grace})
		if err != nil {
			return nil, err
		}
	}
	var refunders []string
	for _, name := range slices.Sorted(maps.Keys(gateways)) {
		if _, ok := gateways[name].(Refunder); ok {
			refunders = append(refunders, name)
		}
	}
	return &Service{store: store, refunds: refunds, holds: holds, reviews: reviews, disputes: disputes, routes: routes, gateways: gateways,
		refunders: refunders, cfg: cfg, log: log, lookups: &lookupGroup{reuse: cfg.LookupReuse, recent: map[string]recentLookup{}}, breakers: breakers}, nil
}

// Create creates an order for merchantID, idempotently on its reference.
func (s *Service) Create(ctx context.Context, merchantID string, n NewOrder) (Order, error) {
	o, err := s.newOrder(ctx, merchantID, n)
	if err != nil {
		return Order{}, err
	}
	got, err := s.store.CreateOrder(ctx, o)
	// An order with o's id is the one this call created, with n's routes;
	// another (the reference's order, for a retry) may have others.
	if err == nil && got.ID == o.ID && len(o.Routes) < 2 {
		s.oneRoute.add(merchantID, o.ID)
	}
	return got, err
}

// unknownGateway refuses an order for a gateway this server does not have.
// It names the gateway, and the setting that configures it, only when the
// name is one it knows: a client's other text is never echoed.
func (s *Service) unknownGateway(field, name string) error {
	if setting, ok := s.cfg.Unconfigured[name]; ok {
		return &ValidationError{Field: field, Reason: fmt.Sprintf("%q is not configured on this server; set %s", name, setting)}
	}
	names := slices.Sorted(maps.Keys(s.gateways))
	return &ValidationError{Field: field, Reason: "is not a gateway of this server; use one of: " + strings.Join(names, ", ")}
}

// newOrder validates n and makes the PENDING order it asks for.
func (s *Service) newOrder(ctx context.Context, merchantID string, n NewOrder) (Order, error) {
	if err := n.Validate(); err != nil {
		return Order{}, err
	}
	id := NewID()
	if len(n.Routes) > 0 {
		if err := s.newRoutes(ctx, merchantID, id, &n); err != nil {
			return Order{}, err
		}
	}
	if n.Gateway == "" {
		n.Gateway = s.cfg.DefaultGateway
	}
	gw, ok := s.gateways[n.Gateway]
	if !ok {
		return Order{}, s.unknownGateway("gateway", n.Gateway)
	}
	if c, ok := gw.(AmountChecker); ok {
		if err := c.CheckAmount(n.Amount); err != nil {
			return Order{}, err
		}
	}
	switch n.Capture {
	case "", CaptureAutomatic:
		n.Capture = CaptureAutomatic
	case CaptureManual:
		if _, ok := gw.(Capturer); !ok {
			return Order{}, &ValidationError{Field: "capture", Reason: fmt.Sprintf("MANUAL needs a gateway that can capture; %q cannot", n.Gateway)}
		}
	default:
		return Order{}, &ValidationError{Field: "capture", Reason: "must be AUTOMATIC or MANUAL"}
	}
	return Order{
		Capture:           n.Capture,
		ID:                id,
		MerchantID:        merchantID,
		MerchantReference: n.MerchantReference,
		Amount:            n.Amount,
		PaymentMethod:     n.PaymentMethod,
		Gateway:           n.Gateway,
		Routes:            n.Routes,
		State:             StatePending,
	}, nil
}

// Get returns an order by id, if it is within scope.
func (s *Service) Get(ctx context.Context, scope Scope, id string) (Order, error) {
	if err := CheckID("id", id); err != nil {
		return Order{}, err
	}
	o, err := s.store.Order(ctx, scope, id)
	if err != nil || o.State != StateRequiresAction {
		return o, err
	}
	// A checkout polling for the customer's return gets the answer now.
	a, err := s.store.Attempt(ctx, o.MerchantID, o.CurrentAttempt)
	if err != nil {
		return Order{}, err
	}
	settled, _, err := s.resume(ctx, o, a)
	if errors.Is(err, ErrBudgetExhausted) {
		// The order as stored is true; the gateway is asked again on the
		// next poll, or by the reconciler.
		return o, nil
	}
	return settled, err
}

// GetByReference returns merchantID's order by merchant reference.
func (s *Service) GetByReference(ctx context.Context, merchantID, ref string) (Order, error) {
	if err := CheckReference("merchant_reference", ref); err != nil {
		return Order{}, err
	}
	return s.store.OrderByReference(ctx, merchantID, ref)
}

// Find returns merchantID's orders that an operator's query names: by the
// order's id or merchant reference; by the id (our reference at the
// gateway), request key or gateway id of one of its attempts, refunds,
// captures or voids; or by a dispute's gateway id. A query that is no
// valid reference (a card number among them) is refused.
func (s *Service) Find(ctx context.Context, merchantID, query string) ([]Order, error) {
	if err := CheckReference("query", query); err != nil {
		return nil, err
	}
	return s.store.FindOrders(ctx, merchantID, query)
}

// Cancel moves merchantID's PENDING order to CANCELED.
func (s *Service) Cancel(ctx context.Context, merchantID, id, reason string) (Order, error) {
	if err := CheckID("order_id", id); err != nil {
		return Order{}, err
	}
	if err := CheckReason("reason", reason, false); err != nil {
		return Order{}, err
	}
	o, err := s.store.Transition(ctx, ForMerchant(merchantID), id, func(o Order) (Move, error) {
		to, err := Next(o.State, EventCancel)
		return Move{Event: EventCancel, To: to, Actor: ActorAPI, Reason: reason}, err
	})
	if err == nil {
		Transition{OrderID: o.ID, From: StatePending, To: o.State, Event: EventCancel, Actor: ActorAPI}.Log(ctx, s.log)
	}
	return o, err
}

// NewID returns a new time-ordered id, for an order (an attempt's and a
// refund's are derived: AttemptID, RefundID).
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Namespaces of the derived ids (UUIDv5): fixed forever, since a changed
// namespace would give a replayed request a new gateway key.
var (
	attemptNamespace = uuid.MustParse("5e771e00-c4a7-4b1e-9a3d-a77e0a7c0001")
	refundNamespace  = uuid.MustParse("5e771e00-c4a7-4b1e-9a3d-a77e0a7c0002")
)

// AttemptID is the id of the attempt that merchantID's request requestID
// makes on order orderID: the same three always give the same id, which
// is the attempt's gateway reference and idempotency key. A replay after a
// claim was lost (an asynchronous standby promoted before it had the
// commit) therefore sends the gateway the same key again, and a gateway
// that honours keys (Stripe) charges once.
func AttemptID(merchantID, orderID, requestID string) string {
	return derivedID(attemptNamespace, merchantID, strings.ToLower(orderID), requestID)
}

// RefundID is the id of the refund that merchantID's request requestID
// makes on order orderID, derived as AttemptID is, for the same reason: it
// is the refund's gateway reference and idempotency key.
func RefundID(merchantID, orderID, requestID string) string {
	return derivedID(refundNamespace, merchantID, strings.ToLower(orderID), requestID)
}

// derivedID is the UUIDv5 of the parts under ns. Each part is prefixed
// with its length, so that no two lists of parts give the same name.
func derivedID(ns uuid.UUID, parts ...string) string {
	var name []byte
	for _, p := range parts {
		name = fmt.Appendf(name, "%d:%s", len(p), p)
	}
	return uuid.NewSHA1(ns, name).String()
}
