package order

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Routes: an order may be charged on several gateways, each with the
// payment method token that gateway issued (Settle stores no card). A
// charge goes to the first eligible route; after an attempt whose proven
// outcome the cascade table (cascade.go) answers with CascadeNext, the
// same call tries the next eligible route, at most MaxHops times and only
// while a hop can still finish within the call's deadline. Every hop is
// a new attempt through the one lifecycle (operation.go), claimed from
// PENDING: an attempt whose outcome is unknown leaves the order CHARGING,
// so no attempt can be claimed anywhere until the reconciler has proven
// it; after that, the next charge may cascade.

// Route is one gateway an order may be charged on, and the payment method
// token it issued.
type Route struct {
	Gateway       string
	PaymentMethod string
	// Rule and RouteVersion name the merchant's route rule that placed
	// the route, and the version of the rules it was (rules.go); empty
	// and 0 when no rule did.
	Rule         string
	RouteVersion int64
}

// MaxRoutes bounds an order's routes.
const MaxRoutes = 5

// MaxHops bounds the cascade of one charge call: after the first attempt,
// at most this many more, each on another gateway.
const MaxHops = 2

// Routing is what the charge path reads of an order to choose the gateway
// of its next attempt.
type Routing struct {
	// Routes are the order's; nil for an order with one route.
	Routes  []Route
	Amount  Money
	Capture CaptureMode
	// Last is the order's current attempt (the last made), with its
	// Gateway, Outcome and DeclineCode; nil before the first.
	Last *Attempt
}

// CurrencyChecker is implemented by a gateway that charges only some
// currencies: a route to it is skipped for an order in another.
type CurrencyChecker interface {
	SupportsCurrency(currency string) bool
}

// validateRoutes checks routes given instead of a payment method and
// gateway.
func (n NewOrder) validateRoutes() error {
	if len(n.Routes) > MaxRoutes {
		return &ValidationError{Field: "routes", Reason: fmt.Sprintf("must have at most %d routes", MaxRoutes)}
	}
	for i, r := range n.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		if r.Gateway != "" {
			if err := checkText(f+".gateway", r.Gateway, 1, MaxGatewayLen); err != nil {
				return err
			}
		}
		if err := checkText(f+".payment_method", r.PaymentMethod, 1, MaxTokenLen); err != nil {
			return err
		}
	}
	if n.PaymentMethod != "" || n.Gateway != "" {
		return &ValidationError{Field: "routes", Reason: "must not be set with payment_method or gateway: each route names its own"}
	}
	return nil
}

// newRoutes resolves n's routes on this server: each gateway named (the
// default for none) and configured, none twice. A list of one is the
// order's payment method and gateway, as if given alone.
func (s *Service) newRoutes(ctx context.Context, merchantID, id string, n *NewOrder) error {
	routes := slices.Clone(n.Routes)
	for i := range routes {
		if routes[i].Gateway == "" {
			routes[i].Gateway = s.cfg.DefaultGateway
		}
		if _, ok := s.gateways[routes[i].Gateway]; !ok {
			return s.unknownGateway(fmt.Sprintf("routes[%d].gateway", i), routes[i].Gateway)
		}
		if slices.ContainsFunc(routes[:i], func(r Route) bool { return r.Gateway == routes[i].Gateway }) {
			return &ValidationError{Field: fmt.Sprintf("routes[%d].gateway", i), Reason: "names a gateway of an earlier route; each gateway may appear once"}
		}
	}
	if len(routes) > 1 {
		c, err := s.routeConfig(ctx, merchantID)
		if err != nil {
			return err
		}
		routes = applyRules(c, id, n.Amount, n.Capture, routes)
	}
	first, skipped, ok := s.pick(routes, 0, n.Capture, n.Amount)
	if !ok {
		return &ValidationError{Field: "routes", Reason: "no route can charge this order: " + skipped}
	}
	n.Gateway, n.PaymentMethod, n.Routes = first.route.Gateway, first.route.PaymentMethod, routes
	if len(routes) == 1 {
		n.Routes = nil
	}
	return nil
}

// ineligible says why route r cannot charge an order of amount m with
// capture mode capture on this server, or "" when it can.
func (s *Service) ineligible(r Route, capture CaptureMode, m Money) string {
	gw, ok := s.gateways[r.Gateway]
	if !ok {
		return "not configured on this server"
	}
	if capture == CaptureManual {
		if _, ok := gw.(Capturer); !ok {
			return "cannot capture MANUAL"
		}
	}
	if c, ok := gw.(CurrencyChecker); ok && !c.SupportsCurrency(m.Currency) {
		return "does not charge " + m.Currency
	}
	if c, ok := gw.(AmountChecker); ok && c.CheckAmount(m) != nil {
		return "cannot carry the amount"
	}
	return ""
}

// hop is the route an attempt of an order with routes goes to, and what
// its claim records.
type hop struct {
	// index is the route's in the order's routes.
	index int
	route Route
	// skipped, cascadeAfter, follows: as Claim's.
	skipped, cascadeAfter, follows string
}

// pick returns the first eligible route of routes from index from on. It
// also returns why each route it passed over is ineligible ("stripe:
// cannot capture MANUAL; ..."), and false when none is eligible.
func (s *Service) pick(routes []Route, from int, capture CaptureMode, m Money) (hop, string, bool) {
	var skipped []string
	for i := from; i < len(routes); i++ {
		if why := s.ineligible(routes[i], capture, m); why != "" {
			skipped = append(skipped, routes[i].Gateway+": "+why)
			continue
		}
		return hop{index: i, route: routes[i], skipped: strings.Join(skipped, "; ")}, "", true
	}
	return hop{}, strings.Join(skipped, "; "), false
}

// provenOutcome describes attempt a's proven outcome for the attempt that
// cascades after it: its gateway, outcome and decline code.
func provenOutcome(a Attempt) string {
	s := a.Gateway + " " + string(a.Outcome)
	if a.DeclineCode != "" {
		s += ": " + a.DeclineCode
	}
	return s
}

// route chooses the gateway of the attempt op is to claim, for an order
// with routes: the route after the last attempt's when the cascade table
// allows it (a proven non-charge that says nothing of the card), else the
// last attempt's (an issuer's decline is retried where it was made; an
// authentication is stepped up there), else the first eligible. An order
// with one route is left as it is: the claim charges its gateway.
func (op *chargeOp) route(ctx context.Context) error {
	if op.s.oneRoute.holds(op.merchantID, op.in.OrderID) {
		return nil
	}
	r, err := op.s.store.Routing(ctx, op.merchantID, op.in.OrderID)
	if err != nil {
		return err
	}
	if len(r.Routes) < 2 {
		op.s.oneRoute.add(op.merchantID, op.in.OrderID)
		return nil
	}
	if op.in.PaymentMethod != "" {
		return &ValidationError{Field: "payment_method", Reason: "must be empty for an order with routes: each route has its payment method"}
	}
	if op.in.Customer != "" {
		return &ValidationError{Field: "customer", Reason: "must be empty for an order with routes: a gateway's customer belongs to one gateway"}
	}
	op.routes = r.Routes
	from, follows := 0, ""
	defer func() { op.hop.follows = follows }()
	if r.Last != nil {
		follows = r.Last.ID
		from = max(slices.IndexFunc(r.Routes, func(x Route) bool { return x.Gateway == r.Last.Gateway }), 0)
		if r.Last.Gateway == r.Routes[from].Gateway && CascadeAfter(r.Last.Outcome, r.Last.DeclineCode) == CascadeNext {
			if h, _, ok := op.s.pick(r.Routes, from+1, r.Capture, r.Amount); ok {
				h.cascadeAfter = provenOutcome(*r.Last)
				op.hop = op.s.avoidOpen(h, r.Routes, r.Capture, r.Amount)
				return nil
			}
		}
	}
	h, _, ok := op.s.pick(r.Routes, from, r.Capture, r.Amount)
	if !ok {
		if h, _, ok = op.s.pick(r.Routes, 0, r.Capture, r.Amount); !ok {
			// Nothing here can charge it now (the configuration changed):
			// the call says so, having sent nothing.
			h = hop{index: from, route: r.Routes[from]}
		}
	} else if r.Last == nil {
		h = op.s.avoidOpen(h, r.Routes, r.Capture, r.Amount)
	}
	op.hop = h
	return nil
}

// cascadeRequestSep joins a request id and a hop's number in the request
// id of the hop's attempt: each attempt has a request id of its own, and
// the same request's hops always the same ones.
const cascadeRequestSep = "/cascade-"

// next is the operation of the next hop after op, or nil when there is
// none: op claimed an attempt of an order with routes, the attempt is the
// order's and the order PENDING again (so its outcome is proven), the
// cascade table allows a cascade after it, hops are left, an eligible
// route follows, and a gateway call can still finish before ctx's
// deadline. err is what op's lifecycle returned; only a refusal by the
// gateway (a proven non-charge) lets a cascade follow an error.
func (op *chargeOp) next(ctx context.Context, err error, hops int) *chargeOp {
	switch {
	case !op.claimedNow || len(op.routes) < 2 || hops >= MaxHops:
		return nil
	case err != nil && !errors.Is(err, ErrGatewayRefused):
		return nil
	case op.o.State != StatePending || op.o.CurrentAttempt != op.a.ID:
		return nil
	case CascadeAfter(op.a.Outcome, op.a.DeclineCode) != CascadeNext:
		return nil
	case ctx.Err() != nil:
		return nil
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < op.s.cfg.GatewayTimeout {
		// A hop that could not finish before the caller stops waiting is
		// not started: its outcome would reach nobody but the reconciler.
		return nil
	}
	h, _, ok := op.s.pick(op.routes, op.hop.index+1, op.o.Capture, op.o.Amount)
	if !ok {
		return nil
	}
	h = op.s.avoidOpen(h, op.routes, op.o.Capture, op.o.Amount)
	h.cascadeAfter, h.follows = provenOutcome(op.a), op.a.ID
	root := cmp.Or(op.root, op.in.RequestID)
	in := op.in
	in.OrderID, in.RequestID = op.o.ID, root+cascadeRequestSep+strconv.Itoa(hops+1)
	return &chargeOp{s: op.s, merchantID: op.merchantID, in: in, routes: op.routes, hop: h, root: root}
}

// cascade runs op's lifecycle, and then the hops that follow it (next),
// each a new attempt through the same lifecycle. It returns the last
// operation run and what its lifecycle returned.
func (s *Service) cascade(ctx context.Context, op *chargeOp, run operation) (*chargeOp, error) {
	err := s.run(ctx, run)
	for hops := 0; ; hops++ {
		nx := op.next(ctx, err, hops)
		if nx == nil {
			return op, err
		}
		nerr := s.run(ctx, nx)
		if !nx.claimedNow && nerr == nil {
			// Another request claimed the order first: the cascade ends
			// with this request's last attempt.
			return op, err
		}
		op, err = nx, nerr
	}
}

// cascadedFrom returns the attempt of the last hop of a cascade that
// followed a, the attempt of op's request, or nil when the request did
// not cascade (the order's current attempt is a, or another request's).
func (op *chargeOp) cascadedFrom(ctx context.Context, o Order, a Attempt) (*Attempt, error) {
	if o.CurrentAttempt == "" || o.CurrentAttempt == a.ID {
		return nil, nil
	}
	cur, err := op.s.store.Attempt(ctx, o.MerchantID, o.CurrentAttempt)
	if err != nil {
		return nil, fmt.Errorf("read order %s attempt %s: %w", o.ID, o.CurrentAttempt, err)
	}
	if !strings.HasPrefix(cur.RequestID, a.RequestID+cascadeRequestSep) {
		return nil, nil
	}
	return &cur, nil
}

// AttemptGateway is the gateway of o's attempt a: the one it was sent to,
// or the order's for an attempt read without it.
func (o Order) AttemptGateway(a Attempt) string { return cmp.Or(a.Gateway, o.Gateway) }

// rerouted reports a claim of a client's request for an order with
// routes that did not hold only because the route was chosen after
// another attempt than the order's current one: the order is PENDING, and
// the request id names no attempt yet. A hop of a cascade is never
// chosen again: another request has taken the order over.
func (op *chargeOp) rerouted(c ClaimResult) bool {
	return !c.Claimed && c.Attempt == nil && len(op.routes) > 1 && op.root == "" &&
		c.Order.State == StatePending && c.Order.CurrentAttempt != op.hop.follows
}
