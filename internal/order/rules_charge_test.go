package order_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/settlepay/settle/internal/order"
)

// TestSeededSplitRoutesEachOrderOnce: route rules seeded at start make a
// version once (a second start with the same rules makes none); a weighted
// split then sends new orders to both gateways, each order's attempts
// staying on the gateway its id drew: a retry after an issuer's decline
// lands where the first try did.
func TestSeededSplitRoutesEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	ctx := context.Background()
	rules := []order.RouteRule{{Name: "half", Split: []order.WeightedGateway{{Gateway: "a", Weight: 1}, {Gateway: "b", Weight: 1}}}}
	for i, want := range []bool{true, false} {
		made, err := f.svc.SeedRoutes(ctx, merchant, rules, "routes-file", "split a and b")
		if err != nil || made != want {
			t.Fatalf("seed %d: made %v, %v; want %v", i+1, made, err, want)
		}
	}
	if c, err := f.svc.Routes(ctx, merchant); err != nil || c.Version != 1 || c.Actor != "routes-file" {
		t.Fatalf("rules after two seeds: %+v %v", c, err)
	}
	first := map[string]int{}
	for i := range 40 {
		// Declined by the issuer wherever it goes: no cascade, and the
		// next charge retries on the same gateway.
		o, a, err := f.svc.CreateAndCharge(ctx, merchant, routed(fmt.Sprintf("split-%d", i), "a", "tok_decline", "b", "tok_decline"),
			order.ChargeInput{RequestID: fmt.Sprintf("split-%d-1", i)})
		if err != nil || a == nil || o.State != order.StatePending {
			t.Fatalf("order %d: %+v %+v %v", i, o, a, err)
		}
		first[a.Gateway]++
		_, again, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: fmt.Sprintf("split-%d-2", i)})
		if err != nil || again == nil || again.Gateway != a.Gateway {
			t.Fatalf("order %d: retry on %+v (%v), want it on %s as the first try", i, again, err, a.Gateway)
		}
	}
	if first["a"] == 0 || first["b"] == 0 || first["a"]+first["b"] != 40 {
		t.Fatalf("first attempts by gateway %v: want both gateways of the split used", first)
	}
}
