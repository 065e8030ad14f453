package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
)

// TestSecretsNeverLeak sprays card numbers, API-key-like strings, tokens
// and bearer keys through every RPC, in valid and invalid calls, and checks
// that none appears in what the server logged or in any error returned.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	secrets := []string{
		"4242424242424242", "4000 0566 5566 5556", "5555-5555-5555-4444",
		"sk_test_51LeakLeakLeak", "rk_live_LeakLeakLeak", "tok_secret_leak_0001", "sk_live_bearer_leak_0001",
		keyA, keyAop, keyB,
	}
	var errs []string
	record := func(err error) {
		if err != nil {
			errs = append(errs, status.Convert(err).Message())
		}
	}
	keys := []string{keyA, keyAop, "sk_live_bearer_leak_0001", ""}
	o := s.createWith(t, keyA, "leak-order", "tok_secret_leak_0001")
	id := o.GetId()
	for _, key := range keys {
		ctx := with(key)
		for _, secret := range secrets {
			_, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: secret,
				Amount: &settlev1.Money{Currency: secret, AmountMinor: 1}, PaymentMethod: secret, Gateway: secret})
			record(err)
			_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "leak-" + secret[:4],
				Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: secret})
			record(err)
			_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: secret}})
			record(err)
			_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: secret}})
			record(err)
			_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: id, RequestId: "leak-request-1", PaymentMethod: secret})
			record(err)
			_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: secret, RequestId: secret, PaymentMethod: secret})
			record(err)
			_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: id, Reason: secret})
			record(err)
			stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: secret})
			if err == nil {
				_, err = stream.Recv()
			}
			record(err)
			_, err = s.ops.ListOrders(ctx, &settlev1.ListOrdersRequest{PageToken: secret})
			record(err)
			_, err = s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: secret})
			record(err)
			_, err = s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: secret})
			record(err)
			_, err = s.ops.ResolveOrder(ctx, &settlev1.ResolveOrderRequest{OrderId: id, Resolution: settlev1.Resolution_RESOLUTION_PAID,
				GatewayChargeId: secret, Reason: secret})
			record(err)
			_, err = s.ops.Stats(context.WithoutCancel(ctx), &settlev1.StatsRequest{})
			record(err)
		}
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "finished call") || len(errs) < 100 {
		t.Fatalf("the spray did not run: %d errors, logs:\n%.500s", len(errs), logs)
	}
	for _, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q", secret)
		}
		for _, e := range errs {
			if strings.Contains(e, secret) {
				t.Errorf("error %q contains %q", e, secret)
			}
		}
	}
}
