package bench

import (
	"context"
	"fmt"
	"sync"

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
}

// NewInstant returns an in-process gateway.
func NewInstant() *Instant { return NewObservedInstant(gateway.Unobserved) }

// NewObservedInstant returns an in-process gateway that reports its calls
// to obs, as the product's adapters do, so that the benchmark's server
// measures and traces them as it would a real gateway's.
func NewObservedInstant(obs gateway.Observer) *Instant {
	return &Instant{obs: obs, charges: map[string]string{}, refunds: map[string]string{}}
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

// Charge implements order.Gateway: it always succeeds.
func (g *Instant) Charge(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	id := fmt.Sprintf("ch_inst_%d", len(g.charges)+1)
	g.charges[req.AttemptID] = id
	return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id}, nil
}

// Lookup implements order.Gateway.
func (g *Instant) Lookup(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	_, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.charges[req.AttemptID]; ok {
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id}, nil
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// Charged reports how many charges were made.
func (g *Instant) Charged() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.charges)
}
