package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
)

// panicking is a gateway adapter with a bug.
type panicking struct{ order.Gateway }

func (panicking) Charge(context.Context, order.ChargeRequest) (order.Result, error) {
	panic("adapter bug")
}

func TestPanicInHandlerIsInternal(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"buggy": panicking{}})
	ctx := context.Background()
	resp, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "panic-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok", Gateway: "buggy"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: resp.GetOrder().GetId(), RequestId: "panic-req-1"})
	if status.Code(err) != codes.Internal || strings.Contains(status.Convert(err).Message(), "adapter bug") {
		t.Fatalf("panic: %v, want Internal without the panic's text", err)
	}
	if !strings.Contains(s.logs.String(), "adapter bug") {
		t.Fatal("the panic was not logged")
	}
	// The server is still up, and the claimed order waits for the reconciler.
	got, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: resp.GetOrder().GetId()}})
	if err != nil || got.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_CHARGING || got.GetOrder().GetNextCheckTime() == nil {
		t.Fatalf("after the panic: %v %v, want CHARGING with a next check", got, err)
	}
}
