package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
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

// TestClientTextNeverLogged calls every RPC of OrderService and OpsService
// on each of its paths (success, invalid argument, not found, failed
// precondition, and the conflicts: a reference reused with another amount,
// a request_id reused on another order or with another payment method),
// with a marker in every string field a client chooses, and checks that no
// log line and no error message carries a marker. Settle logs the ids it
// made and hashes of the client's keys, never the keys.
func TestClientTextNeverLogged(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	const marker = "leakmark"
	n := 0
	m := func(field string) string { n++; return fmt.Sprintf("%s-%s-%d", marker, field, n) }
	var errs []string
	check := func(call string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %s", call, err, want)
		}
		if err != nil {
			errs = append(errs, status.Convert(err).Message())
		}
	}
	money := func(minor int64) *settlev1.Money { return &settlev1.Money{Currency: "GBP", AmountMinor: minor} }
	ctx, ops := with(keyA), with(keyAop)
	missing := order.NewID()

	// CreateOrder.
	ref1, pm1 := m("ref"), m("pm")
	created, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: ref1, Amount: money(100), PaymentMethod: pm1})
	check("CreateOrder", err, codes.OK)
	o1 := created.GetOrder().GetId()
	_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: ref1, Amount: money(101), PaymentMethod: pm1})
	check("CreateOrder, the reference with another amount", err, codes.AlreadyExists)
	_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: m("ref"), Amount: money(100), PaymentMethod: m("pm"), Gateway: m("gw")})
	check("CreateOrder, unknown gateway", err, codes.InvalidArgument)
	_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: m("ref"), Amount: &settlev1.Money{Currency: m("cur"), AmountMinor: 1}, PaymentMethod: m("pm")})
	check("CreateOrder, bad currency", err, codes.InvalidArgument)
	_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: m("ref") + "\n", Amount: money(100), PaymentMethod: m("pm")})
	check("CreateOrder, bad reference", err, codes.InvalidArgument)

	// GetOrder.
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: ref1}})
	check("GetOrder by reference", err, codes.OK)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: m("ref")}})
	check("GetOrder, unknown reference", err, codes.NotFound)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: m("id")}})
	check("GetOrder, bad id", err, codes.InvalidArgument)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: missing}})
	check("GetOrder, unknown id", err, codes.NotFound)

	// ChargeOrder.
	req1 := m("req")
	// A token the simulator knows, which pays: it declines any other.
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o1, RequestId: req1, PaymentMethod: "tok_ok"})
	check("ChargeOrder", err, codes.OK)
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o1, RequestId: req1, PaymentMethod: m("pm")})
	check("ChargeOrder, the request_id with another payment method", err, codes.AlreadyExists)
	created, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: m("ref"), Amount: money(100), PaymentMethod: m("pm")})
	check("CreateOrder", err, codes.OK)
	o2 := created.GetOrder().GetId()
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o2, RequestId: req1})
	check("ChargeOrder, the request_id on another order", err, codes.AlreadyExists)
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: m("id"), RequestId: m("req"), PaymentMethod: m("pm")})
	check("ChargeOrder, bad id", err, codes.InvalidArgument)
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: missing, RequestId: m("req"), PaymentMethod: m("pm")})
	check("ChargeOrder, unknown order", err, codes.NotFound)
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o2, RequestId: m("req") + "\x00"})
	check("ChargeOrder, bad request_id", err, codes.InvalidArgument)

	// CreateAndChargeOrder.
	ref3, req3 := m("ref"), m("req")
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref3, Amount: money(100), PaymentMethod: m("pm"), RequestId: req3})
	check("CreateAndChargeOrder", err, codes.OK)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref3, Amount: money(200), PaymentMethod: m("pm"), RequestId: m("req")})
	check("CreateAndChargeOrder, the reference with another amount", err, codes.AlreadyExists)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: m("ref"), Amount: money(100), PaymentMethod: m("pm"), RequestId: req3})
	check("CreateAndChargeOrder, the request_id on another order", err, codes.AlreadyExists)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: m("ref"), Amount: money(100), PaymentMethod: m("pm"), Gateway: m("gw"), RequestId: m("req")})
	check("CreateAndChargeOrder, unknown gateway", err, codes.InvalidArgument)

	// CancelOrder.
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o2, Reason: m("reason")})
	check("CancelOrder", err, codes.OK)
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o1, Reason: m("reason")})
	check("CancelOrder, a paid order", err, codes.FailedPrecondition)
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: m("id"), Reason: m("reason")})
	check("CancelOrder, bad id", err, codes.InvalidArgument)
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: missing, Reason: m("reason")})
	check("CancelOrder, unknown order", err, codes.NotFound)

	// WatchOrder.
	watch := func(id string) error {
		stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: id})
		for err == nil {
			_, err = stream.Recv()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	check("WatchOrder", watch(o1), codes.OK)
	check("WatchOrder, bad id", watch(m("id")), codes.InvalidArgument)
	check("WatchOrder, unknown order", watch(missing), codes.NotFound)

	// OpsService.
	_, err = s.ops.ListOrders(ops, &settlev1.ListOrdersRequest{})
	check("ListOrders", err, codes.OK)
	_, err = s.ops.ListOrders(ops, &settlev1.ListOrdersRequest{PageToken: m("token")})
	check("ListOrders, bad token", err, codes.InvalidArgument)
	_, err = s.ops.GetOrderHistory(ops, &settlev1.GetOrderHistoryRequest{OrderId: o1})
	check("GetOrderHistory", err, codes.OK)
	_, err = s.ops.GetOrderHistory(ops, &settlev1.GetOrderHistoryRequest{OrderId: m("id")})
	check("GetOrderHistory, bad id", err, codes.InvalidArgument)
	_, err = s.ops.GetOrderHistory(ops, &settlev1.GetOrderHistoryRequest{OrderId: missing})
	check("GetOrderHistory, unknown order", err, codes.NotFound)
	// Two orders left CHARGING by a gateway timeout: one to reconcile, one
	// to resolve from review.
	charging := func() string {
		resp, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: m("ref"),
			Amount: money(100), PaymentMethod: "tok_timeout", RequestId: m("req")})
		check("CreateAndChargeOrder, a timeout", err, codes.OK)
		return resp.GetOrder().GetId()
	}
	o5, o6 := charging(), charging()
	_, err = s.ops.ReconcileOrder(ops, &settlev1.ReconcileOrderRequest{OrderId: o5})
	check("ReconcileOrder", err, codes.OK)
	_, err = s.ops.ReconcileOrder(ops, &settlev1.ReconcileOrderRequest{OrderId: m("id")})
	check("ReconcileOrder, bad id", err, codes.InvalidArgument)
	_, err = s.ops.ReconcileOrder(ops, &settlev1.ReconcileOrderRequest{OrderId: missing})
	check("ReconcileOrder, unknown order", err, codes.NotFound)
	if _, err := s.pool.Exec(context.Background(), `UPDATE orders SET state = 'NEEDS_REVIEW' WHERE id = $1`, o6); err != nil {
		t.Fatal(err)
	}
	_, err = s.ops.ResolveOrder(ops, &settlev1.ResolveOrderRequest{OrderId: o6, Resolution: settlev1.Resolution_RESOLUTION_PAID,
		GatewayChargeId: m("charge"), Reason: m("reason")})
	check("ResolveOrder", err, codes.OK)
	_, err = s.ops.ResolveOrder(ops, &settlev1.ResolveOrderRequest{OrderId: o1, Resolution: settlev1.Resolution_RESOLUTION_PAID,
		GatewayChargeId: m("charge"), Reason: m("reason")})
	check("ResolveOrder, not in review", err, codes.FailedPrecondition)
	_, err = s.ops.ResolveOrder(ops, &settlev1.ResolveOrderRequest{OrderId: missing, Resolution: settlev1.Resolution_RESOLUTION_CANCELED,
		Reason: m("reason")})
	check("ResolveOrder, unknown order", err, codes.NotFound)
	_, err = s.ops.ResolveOrder(ops, &settlev1.ResolveOrderRequest{OrderId: m("id"), Resolution: settlev1.Resolution_RESOLUTION_PAID,
		GatewayChargeId: m("charge"), Reason: m("reason")})
	check("ResolveOrder, bad id", err, codes.InvalidArgument)
	_, err = s.ops.Stats(ops, &settlev1.StatsRequest{})
	check("Stats", err, codes.OK)

	// Keys: a wrong one, and one of the wrong role.
	_, err = s.orders.GetOrder(with("sk_"+m("key")), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: m("ref")}})
	check("GetOrder, wrong key", err, codes.Unauthenticated)
	_, err = s.ops.Stats(ctx, &settlev1.StatsRequest{})
	check("Stats, checkout key", err, codes.PermissionDenied)

	logs := s.logs.String()
	for _, want := range []string{"finished call", "gateway charge", "order transition"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the logs have no %q: the calls did not run as planned:\n%.2000s", want, logs)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("a log line carries client text: %s", line)
		}
	}
	for _, e := range errs {
		if strings.Contains(e, marker) {
			t.Errorf("an error message carries client text: %s", e)
		}
	}
}
