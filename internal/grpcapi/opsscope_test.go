package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
)

const keyPlatform = "sk_test_platform_ops_0123456789"

// TestOpsKeysAreScopedToTheirMerchant: an ops key naming merchant-a
// reaches merchant-a's orders alone. Every OpsService call naming
// merchant-b's order or event is NOT_FOUND, with the very status of an
// order that does not exist; its lists and counts hold merchant-a's
// alone. A key naming * reaches both, and every order shown carries its
// merchant.
func TestOpsKeysAreScopedToTheirMerchant(t *testing.T) {
	t.Parallel()
	keys, err := grpcapi.ParseKeys(fmt.Sprintf("%s merchant-a checkout a-checkout; %s merchant-a ops a-ops; %s merchant-b checkout b-checkout; %s * ops platform-ops",
		grpcapi.HashKey(keyA), grpcapi.HashKey(keyAop), grpcapi.HashKey(keyB), grpcapi.HashKey(keyPlatform)))
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, grpcapi.Options{Keys: keys}, insecure.NewCredentials())
	paid := func(key, ref string) *settlev1.Order {
		t.Helper()
		resp, err := s.orders.CreateAndChargeOrder(with(key), &settlev1.CreateAndChargeOrderRequest{
			MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1000}, PaymentMethod: "tok_ok",
			RequestId: ref + "-charge"})
		if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
			t.Fatalf("charge %s: %v, %v", ref, resp, err)
		}
		return resp.GetOrder()
	}
	a, b := paid(keyA, "scope-a"), paid(keyB, "scope-b")
	if a.GetMerchantId() != "merchant-a" || b.GetMerchantId() != "merchant-b" {
		t.Fatalf("orders carry merchants %q and %q", a.GetMerchantId(), b.GetMerchantId())
	}
	aop, platform := with(keyAop), with(keyPlatform)

	// Lists and counts.
	list := func(ctx context.Context) map[string]string {
		t.Helper()
		resp, err := s.ops.ListOrders(ctx, &settlev1.ListOrdersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, o := range resp.GetOrders() {
			m[o.GetId()] = o.GetMerchantId()
		}
		return m
	}
	if got := list(aop); len(got) != 1 || got[a.GetId()] != "merchant-a" {
		t.Errorf("ListOrders with merchant-a's ops key: %v, want merchant-a's order alone, with its merchant", got)
	}
	if got := list(platform); len(got) != 2 || got[a.GetId()] != "merchant-a" || got[b.GetId()] != "merchant-b" {
		t.Errorf("ListOrders with the platform's ops key: %v, want both orders with their merchants", got)
	}
	paidCount := func(ctx context.Context) int64 {
		t.Helper()
		st, err := s.ops.Stats(ctx, &settlev1.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.GetStates() {
			if c.GetState() == settlev1.OrderState_ORDER_STATE_PAID {
				return c.GetCount()
			}
		}
		return 0
	}
	if n := paidCount(aop); n != 1 {
		t.Errorf("Stats with merchant-a's ops key: %d PAID, want 1", n)
	}
	if n := paidCount(platform); n != 2 {
		t.Errorf("Stats with the platform's ops key: %d PAID, want 2", n)
	}

	// The platform's key refunds merchant-b's order, so that there is a
	// refund and events of merchant-b's to reach for.
	refunded, err := s.ops.RefundOrder(platform, &settlev1.OpsServiceRefundOrderRequest{OrderId: b.GetId(),
		RequestId: "scope-b-refund", AmountMinor: 100, Reason: "goodwill"})
	if err != nil {
		t.Fatal(err)
	}
	if refunded.GetOrder().GetMerchantId() != "merchant-b" {
		t.Errorf("refunded order carries merchant %q", refunded.GetOrder().GetMerchantId())
	}
	var bEvent string
	for deadline := time.Now().Add(30 * time.Second); bEvent == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := s.orders.ListEvents(with(keyB), &settlev1.ListEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if evs := resp.GetEvents(); len(evs) > 0 {
			bEvent = evs[0].GetId()
		}
	}
	if bEvent == "" {
		t.Fatal("merchant-b has no event")
	}

	// Every call for merchant-b's order or event, as merchant-a's ops key
	// makes it, and as it would be for an order that does not exist.
	const missing = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	calls := map[string]func(ctx context.Context, orderID string) error{
		"GetOrderHistory": func(ctx context.Context, id string) error {
			_, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: id})
			return err
		},
		"ReconcileOrder": func(ctx context.Context, id string) error {
			_, err := s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: id})
			return err
		},
		"ResolveOrder(PENDING)": func(ctx context.Context, id string) error {
			_, err := s.ops.ResolveOrder(ctx, &settlev1.ResolveOrderRequest{OrderId: id,
				Resolution: settlev1.Resolution_RESOLUTION_PENDING, Reason: "test"})
			return err
		},
		"ResolveOrder(PAID)": func(ctx context.Context, id string) error {
			_, err := s.ops.ResolveOrder(ctx, &settlev1.ResolveOrderRequest{OrderId: id,
				Resolution: settlev1.Resolution_RESOLUTION_PAID, GatewayChargeId: "ch_1", Reason: "test"})
			return err
		},
		"RefundOrder": func(ctx context.Context, id string) error {
			_, err := s.ops.RefundOrder(ctx, &settlev1.OpsServiceRefundOrderRequest{OrderId: id,
				RequestId: "scope-a-refund-" + id, AmountMinor: 100, Reason: "test"})
			return err
		},
		"ResolveRefund": func(ctx context.Context, id string) error {
			_, err := s.ops.ResolveRefund(ctx, &settlev1.ResolveRefundRequest{OrderId: id, RefundId: refunded.GetRefund().GetId(),
				Resolution: settlev1.RefundResolution_REFUND_RESOLUTION_FAILED, Reason: "test"})
			return err
		},
	}
	for name, call := range calls {
		err := call(aop, b.GetId())
		none := call(aop, missing)
		if status.Code(err) != codes.NotFound || status.Convert(err).Message() != status.Convert(none).Message() {
			t.Errorf("%s of merchant-b's order with merchant-a's ops key: %v; want NOT_FOUND as for no order (%v)", name, err, none)
		}
		// The platform's key, and merchant-a's for its own order, get past
		// the scope: the answer is the order's own (OK, a wrong state, or
		// for merchant-a's order no such refund), never that no order is.
		if err := call(platform, b.GetId()); status.Code(err) == codes.NotFound {
			t.Errorf("%s of merchant-b's order with the platform's ops key: %v", name, err)
		}
		if err := call(aop, a.GetId()); status.Code(err) == codes.NotFound && status.Convert(err).Message() == status.Convert(none).Message() {
			t.Errorf("%s of merchant-a's order with merchant-a's ops key: %v", name, err)
		}
	}

	resend := func(ctx context.Context, merchant, id string) error {
		_, err := s.ops.ResendEvent(ctx, &settlev1.ResendEventRequest{MerchantId: merchant, EventId: id})
		return err
	}
	err = resend(aop, "merchant-b", bEvent)
	none := resend(aop, "merchant-b", "evt_999999999")
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != status.Convert(none).Message() {
		t.Errorf("ResendEvent of merchant-b's event with merchant-a's ops key: %v; want NOT_FOUND as for no event (%v)", err, none)
	}
	if err := resend(platform, "merchant-b", bEvent); err != nil {
		t.Errorf("ResendEvent of merchant-b's event with the platform's ops key: %v", err)
	}
}

// TestParseKeysAllMerchants: * is an ops key's merchant, never a checkout
// key's.
func TestParseKeysAllMerchants(t *testing.T) {
	t.Parallel()
	h := grpcapi.HashKey("sk_test_star")
	keys, err := grpcapi.ParseKeys(h + " * ops platform")
	if err != nil || len(keys) != 1 || keys[0].Merchant != grpcapi.AllMerchants {
		t.Fatalf("ops key for *: %v, %v", keys, err)
	}
	if _, err := grpcapi.ParseKeys(h + " * checkout everyone"); err == nil || !strings.Contains(err.Error(), "ops keys only") {
		t.Fatalf("checkout key for *: %v, want refused", err)
	}
}
