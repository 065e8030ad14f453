package grpcapi_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
)

// TestRoutesOpsCalls: an operator reads a merchant's route rules and the
// server's gateway accounts, changes the rules on the version read (a
// change on a stale one is ABORTED, a rule naming an unknown gateway
// INVALID_ARGUMENT), and the next order with routes goes where the rule
// says, its attempt carrying the rule and the version in its history; an
// order the rule does not match keeps the checkout's order.
func TestRoutesOpsCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout})
	hs := httptest.NewServer(other)
	t.Cleanup(hs.Close)
	sim2, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"sim2": sim2})

	got, err := s.ops.GetRoutes(ctx, &settlev1.GetRoutesRequest{MerchantId: order.DefaultMerchant})
	if err != nil || got.GetRoutes().GetVersion() != 0 || len(got.GetRoutes().GetRules()) != 0 || len(got.GetAccounts()) != 2 ||
		got.GetAccounts()[1].GetName() != "sim2" || !got.GetAccounts()[1].GetRefunds() || !got.GetAccounts()[1].GetManualCapture() {
		t.Fatalf("GetRoutes before any rule: %v %v", got, err)
	}
	rule := &settlev1.RouteRule{Name: "gbp-to-sim2", Currencies: []string{"GBP"}, Gateways: []string{"sim2"}}
	set, err := s.ops.SetRoutes(ctx, &settlev1.SetRoutesRequest{MerchantId: order.DefaultMerchant, Note: "sim is slow today",
		Rules: []*settlev1.RouteRule{rule}})
	if err != nil || set.GetRoutes().GetVersion() != 1 || set.GetRoutes().GetNote() != "sim is slow today" ||
		set.GetRoutes().GetCreateTime() == nil || len(set.GetRoutes().GetRules()) != 1 {
		t.Fatalf("SetRoutes: %v %v", set, err)
	}
	_, err = s.ops.SetRoutes(ctx, &settlev1.SetRoutesRequest{MerchantId: order.DefaultMerchant, Rules: []*settlev1.RouteRule{rule}})
	wantCode(t, err, codes.Aborted)
	_, err = s.ops.SetRoutes(ctx, &settlev1.SetRoutesRequest{MerchantId: order.DefaultMerchant, ExpectedVersion: 1,
		Rules: []*settlev1.RouteRule{{Name: "x", Gateways: []string{"stripe"}}}})
	wantCode(t, err, codes.InvalidArgument)
	if got, err := s.ops.GetRoutes(ctx, &settlev1.GetRoutesRequest{MerchantId: order.DefaultMerchant}); err != nil ||
		got.GetRoutes().GetVersion() != 1 || got.GetRoutes().GetRules()[0].GetGateways()[0] != "sim2" {
		t.Fatalf("GetRoutes after the refused changes: %v %v", got, err)
	}

	charge := func(ref, currency string) *settlev1.Attempt {
		t.Helper()
		resp, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref,
			Amount: &settlev1.Money{Currency: currency, AmountMinor: 1250}, RequestId: ref + "-pay",
			Routes: []*settlev1.Route{{Gateway: "sim", PaymentMethod: "tok_ok"}, {Gateway: "sim2", PaymentMethod: "tok_ok"}}})
		if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
			t.Fatalf("charge %s: %v %v", ref, resp, err)
		}
		h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: resp.GetOrder().GetId()})
		if err != nil || len(h.GetAttempts()) != 1 {
			t.Fatalf("history of %s: %v %v", ref, h, err)
		}
		return h.GetAttempts()[0]
	}
	if a := charge("routed-gbp", "GBP"); a.GetGateway() != "sim2" || a.GetRouteRule() != "gbp-to-sim2" || a.GetRouteVersion() != 1 {
		t.Fatalf("a GBP order's attempt: %v, want it on sim2 by rule gbp-to-sim2 of version 1", a)
	}
	if a := charge("routed-eur", "EUR"); a.GetGateway() != "sim" || a.GetRouteRule() != "" || a.GetRouteVersion() != 0 {
		t.Fatalf("an EUR order's attempt: %v, want it on sim, the checkout's first, by no rule", a)
	}
	if n := len(other.Ledger()); n != 1 {
		t.Fatalf("sim2 holds %d charges, want the GBP order's one", n)
	}
}
