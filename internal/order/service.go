package order

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/settlepay/settle/internal/failpoint"
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
}

// Service charges orders: claim, call, settle.
type Service struct {
	store Store
	// refunds is store, when it keeps refunds too; nil refuses refunds.
	refunds  RefundStore
	gateways map[string]Gateway
	cfg      Config
	log      *slog.Logger
	lookups  *lookupGroup
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
	return &Service{store: store, refunds: refunds, gateways: gateways, cfg: cfg, log: log,
		lookups: &lookupGroup{reuse: cfg.LookupReuse, recent: map[string]recentLookup{}}}, nil
}

// Create creates an order for merchantID, idempotently on its reference.
func (s *Service) Create(ctx context.Context, merchantID string, n NewOrder) (Order, error) {
	o, err := s.newOrder(merchantID, n)
	if err != nil {
		return Order{}, err
	}
	return s.store.CreateOrder(ctx, o)
}

// unknownGateway refuses an order for a gateway this server does not have.
// It names the gateway, and the setting that configures it, only when the
// name is one it knows: a client's other text is never echoed.
func (s *Service) unknownGateway(name string) error {
	if setting, ok := s.cfg.Unconfigured[name]; ok {
		return &ValidationError{Field: "gateway", Reason: fmt.Sprintf("%q is not configured on this server; set %s", name, setting)}
	}
	names := slices.Sorted(maps.Keys(s.gateways))
	return &ValidationError{Field: "gateway", Reason: "is not a gateway of this server; use one of: " + strings.Join(names, ", ")}
}

// newOrder validates n and makes the PENDING order it asks for.
func (s *Service) newOrder(merchantID string, n NewOrder) (Order, error) {
	if err := n.Validate(); err != nil {
		return Order{}, err
	}
	if n.Gateway == "" {
		n.Gateway = s.cfg.DefaultGateway
	}
	gw, ok := s.gateways[n.Gateway]
	if !ok {
		return Order{}, s.unknownGateway(n.Gateway)
	}
	if c, ok := GatewayAs[AmountChecker](gw); ok {
		if err := c.CheckAmount(n.Amount); err != nil {
			return Order{}, err
		}
	}
	return Order{
		ID:                NewID(),
		MerchantID:        merchantID,
		MerchantReference: n.MerchantReference,
		Amount:            n.Amount,
		PaymentMethod:     n.PaymentMethod,
		Gateway:           n.Gateway,
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

// resume asks the gateway about an attempt waiting for the customer
// (REQUIRES_ACTION) and settles what it learns, under the same guard as
// the reconciler: of a returning customer and the expiry, exactly one
// settles. It never cancels: only the expiry does. A gateway that cannot
// say leaves the order as it stands, for the reconciler. The lookup is
// coalesced with others of the same attempt (lookupWaiting); when the
// gateway's request budget refused it, resume returns ErrBudgetExhausted.
func (s *Service) resume(ctx context.Context, o Order, a Attempt) (Order, *Attempt, error) {
	gw, ok := s.gateways[o.Gateway]
	if !ok {
		return o, &a, nil
	}
	res, gerr := s.lookupWaiting(ctx, gw, o, a)
	if errors.Is(gerr, ErrBudgetExhausted) {
		return Order{}, nil, fmt.Errorf("look up order %s attempt %s: %w", o.ID, a.ID, gerr)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GatewayTimeout)
	defer cancel()
	st := Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: a.ID, From: StateRequiresAction,
		Result: res, Actor: ActorAPI}
	st.Result.ChargeID = cmp.Or(res.ChargeID, a.GatewayChargeID)
	switch {
	case gerr != nil:
		return o, &a, nil
	case res.Outcome == OutcomeSucceeded:
		st.Event, st.Reason = EventSucceed, "the customer completed the gateway's challenge"
	case res.Outcome == OutcomeDeclined:
		st.Event, st.Reason = EventFail, "declined: "+res.DeclineCode
	case res.Outcome == OutcomeRequiresAction:
		// Still waiting for the customer.
		a.NextAction = res.NextAction
		return o, &a, nil
	default:
		return o, &a, nil
	}
	st.To = MustNext(StateRequiresAction, st.Event)
	settled, ok, err := s.store.Settle(ctx, st)
	if err != nil {
		return Order{}, nil, fmt.Errorf("settle order %s attempt %s: %w", o.ID, a.ID, err)
	}
	if ok {
		Transition{OrderID: o.ID, AttemptID: a.ID, From: StateRequiresAction, To: st.To, Event: st.Event, Actor: st.Actor}.Log(ctx, s.log)
		a.Outcome, a.DeclineCode, a.GatewayChargeID = st.Result.Outcome, st.Result.DeclineCode, st.Result.ChargeID
		return settled, &a, nil
	}
	// The expiry (or the reconciler) settled it first; report what won.
	if settled, a, err = s.store.OrderAttempt(ctx, o.MerchantID, o.ID, a.ID); err != nil {
		return Order{}, nil, err
	}
	return settled, &a, nil
}

// GetByReference returns merchantID's order by merchant reference.
func (s *Service) GetByReference(ctx context.Context, merchantID, ref string) (Order, error) {
	if err := CheckReference("merchant_reference", ref); err != nil {
		return Order{}, err
	}
	return s.store.OrderByReference(ctx, merchantID, ref)
}

// Charge charges an order at most once per request id, and at most one
// attempt at a time. It returns the order as it then stands, and the
// attempt that in.RequestID names, if any. An unknown outcome is not an
// error: the order is returned in CHARGING, to be settled by the reconciler.
func (s *Service) Charge(ctx context.Context, merchantID string, in ChargeInput) (Order, *Attempt, error) {
	if err := in.Validate(); err != nil {
		return Order{}, nil, err
	}
	// The gateway call's deadline is fixed before the claim, so that the
	// request cannot reach the gateway later than GatewayTimeout after the
	// attempt began, however long this process stalls in between. The
	// reconciler's no-show horizon rests on that bound.
	deadline := time.Now().Add(s.cfg.GatewayTimeout)
	c, err := s.store.Claim(ctx, Claim{
		MerchantID:    merchantID,
		OrderID:       in.OrderID,
		RequestID:     in.RequestID,
		PaymentMethod: in.PaymentMethod,
		Customer:      in.Customer,
		AttemptID:     AttemptID(merchantID, in.OrderID, in.RequestID),
		From:          StatePending,
		To:            MustNext(StatePending, EventCharge),
		Event:         EventCharge,
		Lease:         s.cfg.GatewayTimeout + s.cfg.Grace,
		Actor:         ActorAPI,
	})
	if err != nil {
		return Order{}, nil, fmt.Errorf("claim order %s: %w", in.OrderID, err)
	}
	if !c.Claimed {
		if a := c.Attempt; a != nil {
			// A replay of an earlier request: charge nothing.
			if a.OrderID != in.OrderID {
				return Order{}, nil, &ConflictError{Msg: MsgRequestIDOtherOrder}
			}
			if in.PaymentMethod != "" && in.PaymentMethod != a.PaymentMethod {
				return Order{}, nil, &ConflictError{Msg: "request_id was already used with another payment_method"}
			}
			if in.Customer != "" && in.Customer != a.Customer {
				return Order{}, nil, &ConflictError{Msg: "request_id was already used with another customer"}
			}
		}
		if a := c.Attempt; a != nil && a.Outcome == OutcomeRefused {
			// A retry of a charge the gateway refused gets the same answer,
			// not an order that looks as if nothing had happened.
			return Order{}, nil, fmt.Errorf("charge order %s attempt %s: %w", in.OrderID, a.ID, ErrGatewayRefused)
		}
		if a := c.Attempt; a != nil && c.Order.State == StateRequiresAction && c.Order.CurrentAttempt == a.ID {
			// The customer is back from the gateway's challenge: ask the
			// gateway now rather than wait for the reconciler.
			return s.resume(ctx, c.Order, *a)
		}
		// Otherwise the order is CHARGING, PAID, CANCELED or in review:
		// nothing to do but say how it stands.
		return c.Order, c.Attempt, nil
	}
	return s.charge(ctx, merchantID, c.Order, *c.Attempt, in, deadline)
}

// CreateAndCharge creates an order and charges it. in is the charge as
// Charge takes it (request id, customer present, return URL, customer),
// validated alike, but for the order n creates: its OrderID and
// PaymentMethod must be empty, because they are the new order's. A new
// order and its first attempt are written in one commit; a retry (the
// reference already taken) goes the way of Create and Charge, with their
// idempotency and their conflicts. A new reference with a request id
// already used is a conflict, and creates nothing: a failed call leaves no
// order behind.
func (s *Service) CreateAndCharge(ctx context.Context, merchantID string, n NewOrder, in ChargeInput) (Order, *Attempt, error) {
	fresh, err := s.newOrder(merchantID, n)
	if err != nil {
		return Order{}, nil, err
	}
	if err := in.validateCharge(); err != nil {
		return Order{}, nil, err
	}
	// A caller's mistakes: the order does not exist yet, and its payment
	// method is n's.
	if in.OrderID != "" {
		return Order{}, nil, &ValidationError{Field: "order_id", Reason: "must be empty: the order is created by the call"}
	}
	if in.PaymentMethod != "" {
		return Order{}, nil, &ValidationError{Field: "payment_method", Reason: "must be empty: the new order's is charged"}
	}
	deadline := time.Now().Add(s.cfg.GatewayTimeout)
	o, a, created, err := s.store.CreateClaimed(ctx, fresh, Claim{
		RequestID: in.RequestID, Customer: in.Customer, AttemptID: AttemptID(merchantID, fresh.ID, in.RequestID),
		From: StatePending, To: MustNext(StatePending, EventCharge),
		Event: EventCharge, Lease: s.cfg.GatewayTimeout + s.cfg.Grace, Actor: ActorAPI,
	})
	if err != nil {
		return Order{}, nil, fmt.Errorf("create and claim order: %w", err)
	}
	if !created {
		return s.createThenCharge(ctx, merchantID, n, in)
	}
	in.OrderID = o.ID
	return s.charge(ctx, merchantID, o, a, in, deadline)
}

// createThenCharge is CreateAndCharge as Create and then Charge, for a
// retry, whose order exists.
func (s *Service) createThenCharge(ctx context.Context, merchantID string, n NewOrder, in ChargeInput) (Order, *Attempt, error) {
	o, err := s.Create(ctx, merchantID, n)
	if err != nil {
		return Order{}, nil, err
	}
	in.OrderID = o.ID
	return s.Charge(ctx, merchantID, in)
}

// charge calls the gateway for a claimed attempt and settles what it says.
func (s *Service) charge(ctx context.Context, merchantID string, o Order, a Attempt, in ChargeInput, deadline time.Time) (Order, *Attempt, error) {
	requestID := in.RequestID
	s.cfg.Failpoint(failpoint.AfterClaim)
	Transition{OrderID: o.ID, AttemptID: a.ID, RequestID: requestID, From: StatePending, To: o.State, Event: EventCharge, Actor: ActorAPI}.Log(ctx, s.log)
	req := ChargeRequest{
		AttemptID:         a.ID,
		OrderID:           o.ID,
		MerchantReference: o.MerchantReference,
		Amount:            a.Amount,
		PaymentMethod:     a.PaymentMethod,
		Customer:          a.Customer,
		CreatedAt:         a.CreatedAt,
		CustomerPresent:   in.CustomerPresent,
		ReturnURL:         in.ReturnURL,
	}
	// The call and the settle outlive the client's context: once claimed, a
	// definite answer recorded now saves the reconciler a lookup.
	ctx = context.WithoutCancel(ctx)
	res, gerr := s.call(ctx, o.Gateway, req, deadline, requestID)
	s.cfg.Failpoint(failpoint.AfterGateway)
	st := settlementFor(o.MerchantID, o.ID, a.ID, res, s.cfg.FirstRecheck)
	st.Actor = ActorAPI
	if gerr != nil {
		st.LastError = gerr.Error()
	}
	settled, ok, err := s.store.Settle(ctx, st)
	if err != nil {
		return Order{}, nil, fmt.Errorf("settle order %s attempt %s: %w", o.ID, a.ID, err)
	}
	if ok {
		if st.Event != "" {
			Transition{OrderID: o.ID, AttemptID: a.ID, RequestID: requestID, From: StateCharging, To: st.To, Event: st.Event, Actor: st.Actor}.Log(ctx, s.log)
		}
		a.Outcome, a.DeclineCode, a.GatewayChargeID = st.Result.Outcome, st.Result.DeclineCode, st.Result.ChargeID
		a.NextAction = st.Result.NextAction
		if a.Outcome == OutcomeRefused {
			// The order is PENDING again and nothing was charged, but the
			// checkout must not read this as the customer's card failing.
			return Order{}, nil, fmt.Errorf("charge order %s attempt %s: %w", o.ID, a.ID, ErrGatewayRefused)
		}
		return settled, &a, nil
	}
	// The reconciler (or a person) settled it first; report what won.
	if settled, a, err = s.store.OrderAttempt(ctx, merchantID, o.ID, a.ID); err != nil {
		return Order{}, nil, err
	}
	return settled, &a, nil
}

// call asks the order's gateway to charge, within the gateway timeout.
func (s *Service) call(ctx context.Context, gateway string, req ChargeRequest, deadline time.Time, requestID string) (Result, error) {
	gw, ok := s.gateways[gateway]
	if !ok {
		// Configuration changed since the order was created; nothing was sent.
		return Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_not_configured"},
			fmt.Errorf("gateway %q is not configured", gateway)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := s.cfg.Budgets[gateway].WaitCharge(ctx); err != nil {
		// Nothing was sent: the order is PENDING again, and a retry is safe.
		return Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_busy"}, err
	}
	start := time.Now()
	res, err := gw.Charge(ctx, req)
	GatewayCall{Op: "charge", Gateway: gateway, OrderID: req.OrderID, AttemptID: req.AttemptID, RequestID: requestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, s.log)
	return res, err
}

// settlementFor turns a charge's result into the settlement of its attempt.
func settlementFor(merchantID, orderID, attemptID string, res Result, recheck time.Duration) Settlement {
	st := Settlement{MerchantID: merchantID, OrderID: orderID, AttemptID: attemptID, Result: res, RecheckIn: recheck}
	switch res.Outcome {
	case OutcomeSucceeded:
		st.Event = EventSucceed
	case OutcomeRequiresAction:
		// The customer must act; the reconciler checks after recheck, and
		// cancels the attempt when it expires.
		st.Event = EventRequireAction
	case OutcomeDeclined, OutcomeNotSent, OutcomeNotFound, OutcomeRefused:
		st.Event = EventFail
		st.Reason = string(res.Outcome)
		if res.DeclineCode != "" {
			st.Reason += ": " + res.DeclineCode
		}
	default:
		// Unknown, or an adapter that broke its contract: find out later.
		st.Result.Outcome = OutcomeUnknown
		return st
	}
	st.To = MustNext(StateCharging, st.Event)
	return st
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
