package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Instant is an in-process order.Gateway that charges every request at
// once, with no network and no faults: the benchmark uses it to measure
// Settle without a gateway's latency. It marks every charge paid, so it
// belongs to the lab: settle serve refuses it, and only the hidden
// `settle bench-server` runs the API with it.
type Instant struct {
	obs     gateway.Observer
	mu      sync.Mutex
	charges map[string]string // reference → charge id
	refunds map[string]string // refund reference → refund id
	// holds are the authorizations (charges of capture-manual orders) by
	// their attempt's reference; captures and voids by their own.
	holds    map[string]*order.Hold
	captures map[string]string // capture reference → capture id
	voids    map[string]bool   // void reference
}

// instantHoldLifetime is how long an Instant authorization would be held.
const instantHoldLifetime = 7 * 24 * time.Hour

// NewInstant returns an in-process gateway.
func NewInstant() *Instant { return NewObservedInstant(gateway.Unobserved) }

// NewObservedInstant returns an in-process gateway that reports its calls
// to obs, as the product's adapters do, so that the benchmark's server
// measures and traces them as it would a real gateway's.
func NewObservedInstant(obs gateway.Observer) *Instant {
	return &Instant{obs: obs, charges: map[string]string{}, refunds: map[string]string{},
		holds: map[string]*order.Hold{}, captures: map[string]string{}, voids: map[string]bool{}}
}

// Refund implements order.Refunder: it always succeeds.
func (g *Instant) Refund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("re_inst_%d", len(g.refunds)+1)
	g.refunds[req.RefundID] = id
	return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id}, nil
}

// LookupRefund implements order.Refunder.
func (g *Instant) LookupRefund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.refunds[req.RefundID]; ok {
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id}, nil
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// Charge implements order.Gateway: it always succeeds. A charge with
// capture manual authorizes the amount.
func (g *Instant) Charge(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("ch_inst_%d", len(g.charges)+1)
	g.charges[req.AttemptID] = id
	if req.Capture == order.CaptureManual {
		g.holds[req.AttemptID] = &order.Hold{State: order.HoldOpen, AuthorizedMinor: req.Amount.AmountMinor,
			CaptureBefore: time.Now().Add(instantHoldLifetime)}
	}
	return g.succeeded(req.AttemptID, id), nil
}

// succeeded is the result of a succeeded charge or capture, id its
// gateway id, with the hold of the charge attemptID as it stands if it
// authorized; g.mu is held.
func (g *Instant) succeeded(attemptID, id string) order.Result {
	res := order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id}
	if h, ok := g.holds[attemptID]; ok {
		held := *h
		res.Hold = &held
	}
	return res
}

// Lookup implements order.Gateway.
func (g *Instant) Lookup(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.charges[req.AttemptID]; ok {
		return g.succeeded(req.AttemptID, id), nil
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// Capture implements order.Capturer: it captures at once whatever fits in
// the hold, and declines what does not.
func (g *Instant) Capture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.captures[req.CaptureID]; ok {
		return g.succeeded(req.ChargeAttemptID, id), nil
	}
	h, ok := g.holds[req.ChargeAttemptID]
	if !ok || h.State != order.HoldOpen || h.CapturedMinor+req.Amount.AmountMinor > h.AuthorizedMinor {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "not_capturable"}, nil
	}
	h.CapturedMinor += req.Amount.AmountMinor
	if req.Final {
		h.State = order.HoldCaptured
	}
	id := fmt.Sprintf("cp_inst_%d", len(g.captures)+1)
	g.captures[req.CaptureID] = id
	return g.succeeded(req.ChargeAttemptID, id), nil
}

// LookupCapture implements order.Capturer.
func (g *Instant) LookupCapture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.captures[req.CaptureID]; ok {
		return g.succeeded(req.ChargeAttemptID, id), nil
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// Void implements order.Capturer: it releases a hold of which nothing was
// captured, and declines otherwise.
func (g *Instant) Void(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.voids[req.VoidID] {
		return order.Result{Outcome: order.OutcomeSucceeded}, nil
	}
	h, ok := g.holds[req.ChargeAttemptID]
	if !ok || h.State != order.HoldOpen || h.CapturedMinor > 0 {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "not_voidable"}, nil
	}
	h.State = order.HoldVoided
	g.voids[req.VoidID] = true
	return order.Result{Outcome: order.OutcomeSucceeded}, nil
}

// LookupVoid implements order.Capturer.
func (g *Instant) LookupVoid(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.voids[req.VoidID] {
		return order.Result{Outcome: order.OutcomeSucceeded}, nil
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// Charged reports how many charges were made.
func (g *Instant) Charged() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.charges)
}
