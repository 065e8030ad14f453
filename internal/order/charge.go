package order

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// The charge's kinds of operation (see operation.go): a charge of an
// existing order (chargeOp), of an order created by the same call
// (newChargeOp, which claims differently), and the resume of an attempt
// waiting for the customer (resumeOp, which settles differently).

// Charge charges an order at most once per request id, and at most one
// attempt at a time. It returns the order as it then stands, and the
// attempt that in.RequestID names, if any. An unknown outcome is not an
// error: the order is returned in CHARGING, to be settled by the reconciler.
func (s *Service) Charge(ctx context.Context, merchantID string, in ChargeInput) (Order, *Attempt, error) {
	if err := in.Validate(); err != nil {
		return Order{}, nil, err
	}
	if in.ActionResult != "" {
		return s.completeAction(ctx, merchantID, in)
	}
	op := &chargeOp{s: s, merchantID: merchantID, in: in}
	if err := op.route(ctx); err != nil {
		return Order{}, nil, err
	}
	return op.answer(s.cascade(ctx, op, op))
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
	fresh, err := s.newOrder(ctx, merchantID, n)
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
	if in.ActionResult != "" {
		return Order{}, nil, &ValidationError{Field: "action_result", Reason: "must be empty: a new order waits for no action; send it with ChargeOrder"}
	}
	op := &newChargeOp{chargeOp: chargeOp{s: s, merchantID: merchantID, in: in}, n: n, fresh: fresh}
	if len(fresh.Routes) > 1 {
		if in.Customer != "" {
			return Order{}, nil, &ValidationError{Field: "customer", Reason: "must be empty for an order with routes: a gateway's customer belongs to one gateway"}
		}
		// The new order's gateway and payment method are its first
		// eligible route's (newRoutes).
		op.routes = fresh.Routes
		op.hop, _, _ = s.pick(fresh.Routes, 0, fresh.Capture, fresh.Amount)
		op.hop = s.avoidOpen(op.hop, fresh.Routes, fresh.Capture, fresh.Amount)
		// The order is created on its first attempt's route, which a
		// breaker may have moved from newRoutes' choice.
		op.fresh.Gateway, op.fresh.PaymentMethod = op.hop.route.Gateway, op.hop.route.PaymentMethod
	}
	return op.answer(s.cascade(ctx, &op.chargeOp, op))
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

// resume asks the gateway about an attempt waiting for the customer
// (REQUIRES_ACTION) and settles what it learns, under the same guard as
// the reconciler: of a returning customer and the expiry, exactly one
// settles. It never cancels: only the expiry does. A gateway that cannot
// say leaves the order as it stands, for the reconciler. The lookup is
// coalesced with others of the same attempt (lookupWaiting); when the
// gateway's request budget refused it, resume returns ErrBudgetExhausted.
// Its claim was the charge's: only the end of the lifecycle is left.
func (s *Service) resume(ctx context.Context, o Order, a Attempt) (Order, *Attempt, error) {
	gw, ok := s.gateways[o.AttemptGateway(a)]
	if !ok {
		return o, &a, nil
	}
	res, gerr := s.lookupWaiting(ctx, gw, o, a)
	if errors.Is(gerr, ErrBudgetExhausted) {
		return Order{}, nil, fmt.Errorf("look up order %s attempt %s: %w", o.ID, a.ID, gerr)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GatewayTimeout)
	defer cancel()
	op := &resumeOp{chargeOp{s: s, merchantID: o.MerchantID, o: o, a: a}}
	op.att = &op.a
	return op.answer(&op.chargeOp, finish(ctx, op, res, gerr))
}

// chargeOp is the charge of an existing order by one request: the claim
// of a new attempt (or the answer to a replay), the gateway's charge, and
// the settle of the attempt.
type chargeOp struct {
	s          *Service
	merchantID string
	in         ChargeInput
	// o and a are the order and the attempt as the operation last read or
	// settled them; att is the attempt the answer names, if any (a, or a
	// replay's).
	o   Order
	a   Attempt
	att *Attempt
	// For an order with routes: its routes, and the hop the claim takes
	// (route.go). root is the client's request id of a cascade's hop.
	routes []Route
	hop    hop
	root   string
	// claimedNow says this operation's claim made its attempt.
	claimedNow bool
}

// answer is the operation's reply, once the lifecycle (and the cascade
// that followed it, which last is) returned err.
func (op *chargeOp) answer(last *chargeOp, err error) (Order, *Attempt, error) {
	if err != nil {
		return Order{}, nil, err
	}
	return last.o, last.att, nil
}

// chargeClaim is the claim of op's request for order orderID: PENDING to
// CHARGING with the attempt the request names, on the gateway of op's hop
// for an order with routes.
func (op *chargeOp) chargeClaim(orderID string) Claim {
	c := op.s.chargeClaim(op.merchantID, orderID, op.in)
	if len(op.routes) > 1 {
		c.Gateway, c.PaymentMethod = op.hop.route.Gateway, op.hop.route.PaymentMethod
		c.Skipped, c.CascadeAfter = op.hop.skipped, op.hop.cascadeAfter
		c.Follows = &op.hop.follows
		if c.CascadeAfter != "" {
			c.Reason = "cascade after " + c.CascadeAfter
		}
	}
	return c
}

// chargeClaim is the claim of merchantID's request in for order orderID:
// PENDING to CHARGING with the attempt the request names.
func (s *Service) chargeClaim(merchantID, orderID string, in ChargeInput) Claim {
	return Claim{
		MerchantID:    merchantID,
		OrderID:       orderID,
		RequestID:     in.RequestID,
		PaymentMethod: in.PaymentMethod,
		Customer:      in.Customer,
		AttemptID:     AttemptID(merchantID, orderID, in.RequestID),
		From:          StatePending,
		To:            MustNext(StatePending, EventCharge),
		Event:         EventCharge,
		Lease:         s.cfg.GatewayTimeout + s.cfg.Grace,
		Actor:         ActorAPI,
	}
}

func (op *chargeOp) claim(ctx context.Context) (bool, error) {
	cl := op.chargeClaim(op.in.OrderID)
	c, err := op.s.store.Claim(ctx, cl)
	for tries := 0; err == nil && op.rerouted(c) && tries < 3; tries++ {
		// Another request's attempt was settled since the route was
		// chosen: it is chosen again, after that attempt.
		if err = op.route(ctx); err == nil {
			cl = op.chargeClaim(op.in.OrderID)
			c, err = op.s.store.Claim(ctx, cl)
		}
	}
	if err != nil {
		return false, fmt.Errorf("claim order %s: %w", op.in.OrderID, err)
	}
	if !c.Claimed {
		return false, op.replay(ctx, c)
	}
	op.o, op.a = c.Order, *c.Attempt
	// The claim's statement answers without the attempt's cascade and
	// skipped routes: they are the claim's.
	op.a.CascadeAfter, op.a.Skipped = cl.CascadeAfter, cl.Skipped
	op.att = &op.a
	op.claimedNow = true
	return true, nil
}

// replay answers a request that claimed nothing: a replay of an earlier
// request charges nothing, and an order that is not PENDING is said as it
// stands.
func (op *chargeOp) replay(ctx context.Context, c ClaimResult) error {
	in := op.in
	if a := c.Attempt; a != nil {
		if err := in.sameAttempt(*a); err != nil {
			return err
		}
		if hop, err := op.cascadedFrom(ctx, c.Order, *a); err != nil {
			return err
		} else if hop != nil {
			// The request cascaded: its answer is its last hop's.
			a, c.Attempt = hop, hop
		}
		if a.Outcome == OutcomeRefused {
			// A retry of a charge the gateway refused gets the same answer,
			// not an order that looks as if nothing had happened.
			return fmt.Errorf("charge order %s attempt %s: %w", in.OrderID, a.ID, ErrGatewayRefused)
		}
		if c.Order.State == StateRequiresAction && c.Order.CurrentAttempt == a.ID {
			// The customer is back from the gateway's challenge: ask the
			// gateway now rather than wait for the reconciler.
			var err error
			op.o, op.att, err = op.s.resume(ctx, c.Order, *a)
			return err
		}
	}
	// Otherwise the order is CHARGING, PAID, CANCELED or in review:
	// nothing to do but say how it stands.
	op.o, op.att = c.Order, c.Attempt
	return nil
}

// sameAttempt refuses a replay of a request that names attempt a with
// other parameters than a's.
func (in ChargeInput) sameAttempt(a Attempt) error {
	switch {
	case a.OrderID != in.OrderID:
		return &ConflictError{Msg: MsgRequestIDOtherOrder}
	case in.PaymentMethod != "" && in.PaymentMethod != a.PaymentMethod:
		return &ConflictError{Msg: "request_id was already used with another payment_method"}
	case in.Customer != "" && in.Customer != a.Customer:
		return &ConflictError{Msg: "request_id was already used with another customer"}
	}
	return nil
}

func (op *chargeOp) claimed(ctx context.Context) {
	Transition{OrderID: op.o.ID, AttemptID: op.a.ID, RequestID: op.in.RequestID, From: StatePending, To: op.o.State,
		Event: EventCharge, Actor: ActorAPI}.Log(ctx, op.s.log)
}

// call asks the order's gateway to charge the attempt.
func (op *chargeOp) call(ctx context.Context) (Result, error) {
	o, a := &op.o, &op.a
	name := o.AttemptGateway(*a)
	gw, ok := op.s.gateways[name]
	if !ok {
		// Configuration changed since the order was created; nothing was sent.
		return Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_not_configured"},
			fmt.Errorf("gateway %q is not configured", name)
	}
	if err := op.s.cfg.Budgets[name].WaitCharge(ctx); err != nil {
		// Nothing was sent: the order is PENDING again, and a retry is safe.
		return Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_busy"}, err
	}
	start := time.Now()
	res, err := gw.Charge(ctx, ChargeRequest{
		AttemptID:         a.ID,
		OrderID:           o.ID,
		MerchantReference: o.MerchantReference,
		Amount:            a.Amount,
		PaymentMethod:     a.PaymentMethod,
		Customer:          a.Customer,
		CreatedAt:         a.CreatedAt,
		CustomerPresent:   op.in.CustomerPresent,
		ReturnURL:         op.in.ReturnURL,
		Capture:           o.Capture,
	})
	GatewayCall{Op: "charge", Gateway: name, OrderID: o.ID, AttemptID: a.ID, RequestID: op.in.RequestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, op.s.log)
	op.s.breakers.record(name, res.Outcome, time.Since(start))
	return res, err
}

func (op *chargeOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	st := settlementFor(op.o, op.a.ID, res, op.s.cfg.FirstRecheck)
	st.Actor = ActorAPI
	if gerr != nil {
		st.LastError = gerr.Error()
	}
	if won, err := op.settleAttempt(ctx, st); !won || err != nil {
		return won, err
	}
	op.a.NextAction = st.Result.NextAction
	if op.a.Outcome == OutcomeRefused {
		// The order is PENDING again and nothing was charged, but the
		// checkout must not read this as the customer's card failing.
		return true, fmt.Errorf("charge order %s attempt %s: %w", op.o.ID, op.a.ID, ErrGatewayRefused)
	}
	return true, nil
}

// settleAttempt settles the attempt with st under the store's guard and,
// when it holds, logs the move and keeps what the gateway said in the
// attempt.
func (op *chargeOp) settleAttempt(ctx context.Context, st Settlement) (bool, error) {
	settled, ok, err := op.s.store.Settle(ctx, st)
	if err != nil {
		return false, fmt.Errorf("settle order %s attempt %s: %w", op.o.ID, op.a.ID, err)
	}
	if !ok {
		return false, nil
	}
	if st.Event != "" {
		Transition{OrderID: op.o.ID, AttemptID: op.a.ID, RequestID: op.in.RequestID, From: cmp.Or(st.From, StateCharging), To: st.To,
			Event: st.Event, Actor: st.Actor}.Log(ctx, op.s.log)
	}
	op.o = settled
	op.a.Outcome, op.a.DeclineCode, op.a.GatewayChargeID = st.Result.Outcome, st.Result.DeclineCode, st.Result.ChargeID
	return true, nil
}

func (op *chargeOp) reread(ctx context.Context) error {
	o, a, err := op.s.store.OrderAttempt(ctx, op.merchantID, op.o.ID, op.a.ID)
	if err != nil {
		return err
	}
	op.o, op.a = o, a
	op.att = &op.a
	return nil
}

// newChargeOp is the charge of an order created by the same call: its
// claim inserts the order already claimed, in one commit.
type newChargeOp struct {
	chargeOp
	n     NewOrder
	fresh Order
}

func (op *newChargeOp) claim(ctx context.Context) (bool, error) {
	cl := op.chargeClaim(op.fresh.ID)
	o, a, created, err := op.s.store.CreateClaimed(ctx, op.fresh, cl)
	if err != nil {
		return false, fmt.Errorf("create and claim order: %w", err)
	}
	if !created {
		// The reference is taken: a retry, whose order exists.
		op.o, op.att, err = op.s.createThenCharge(ctx, op.merchantID, op.n, op.in)
		return false, err
	}
	op.o, op.a = o, a
	op.a.Skipped = cl.Skipped // as in chargeOp.claim
	op.att = &op.a
	op.claimedNow = true
	return true, nil
}

// resumeOp settles an attempt waiting for the customer by what a lookup
// of it learned: from REQUIRES_ACTION, and only on a definite answer.
type resumeOp struct{ chargeOp }

func (op *resumeOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	st := Settlement{MerchantID: op.o.MerchantID, OrderID: op.o.ID, AttemptID: op.a.ID, From: StateRequiresAction,
		Result: res, Actor: ActorAPI}
	st.Result.ChargeID = cmp.Or(res.ChargeID, op.a.GatewayChargeID)
	switch {
	case gerr == nil && res.Outcome == OutcomeSucceeded:
		st.Event, st.Reason = op.o.SucceedEvent(), "the customer completed the gateway's challenge"
	case gerr == nil && res.Outcome == OutcomeDeclined:
		st.Event, st.Reason = EventFail, "declined: "+res.DeclineCode
	case gerr == nil && res.Outcome == OutcomeRequiresAction:
		// Still waiting for the customer.
		op.a.NextAction = res.NextAction
		return true, nil
	default:
		// The gateway could not say: the order stands as it is, for the
		// reconciler.
		return true, nil
	}
	st.To = MustNext(StateRequiresAction, st.Event)
	// The expiry (or the reconciler) may settle it first: then the
	// attempt is read again, and what won is reported.
	return op.settleAttempt(ctx, st)
}

// SucceedEvent is the event of o's charge succeeding: EventAuthorize for
// an order made with CaptureManual (the money is held, not taken),
// EventSucceed otherwise.
func (o Order) SucceedEvent() EventName {
	if o.Capture == CaptureManual {
		return EventAuthorize
	}
	return EventSucceed
}

// settlementFor turns a charge's result into the settlement of o's
// attempt attemptID.
func settlementFor(o Order, attemptID string, res Result, recheck time.Duration) Settlement {
	st := Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: attemptID, Result: res, RecheckIn: recheck}
	switch res.Outcome {
	case OutcomeSucceeded:
		st.Event = o.SucceedEvent()
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
