package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// TestRefundOrderReplies checks what the API adds to refunds: the
// conversion of orders and refunds, and each reply's code.
func TestRefundOrderReplies(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "api-refund", "tok_ok")
	s.charge(t, o.GetId(), "api-refund-charge")

	refund := func(requestID string, amount int64, reason string) (*settlev1.RefundOrderResponse, error) {
		return s.orders.RefundOrder(ctx, &settlev1.RefundOrderRequest{OrderId: o.GetId(), RequestId: requestID,
			AmountMinor: amount, Reason: reason})
	}
	resp, err := refund("api-refund-1", 500, "damaged")
	if err != nil {
		t.Fatal(err)
	}
	r, got := resp.GetRefund(), resp.GetOrder()
	if r.GetState() != settlev1.RefundState_REFUND_STATE_SUCCEEDED || r.GetAmount().GetAmountMinor() != 500 ||
		r.GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED || r.GetGatewayRefundId() == "" ||
		r.GetActor() != "api" || r.GetReason() != "damaged" {
		t.Fatalf("refund %v", r)
	}
	if got.GetState() != settlev1.OrderState_ORDER_STATE_PARTIALLY_REFUNDED || got.GetRefunded().GetAmountMinor() != 500 ||
		got.GetRefunding() != nil {
		t.Fatalf("order %v", got)
	}

	again, err := refund("api-refund-1", 500, "damaged")
	if err != nil || again.GetRefund().GetId() != r.GetId() {
		t.Fatalf("replay: %v, %v; want refund %s", again.GetRefund(), err, r.GetId())
	}
	if _, err := refund("api-refund-1", 400, "damaged"); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("request_id with another amount: %v, want AlreadyExists", err)
	}
	_, err = refund("api-refund-2", 751, "")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "7.50 GBP (750 minor units)") {
		t.Fatalf("over-refund: %v, want FailedPrecondition naming 7.50 GBP (750 minor units)", err)
	}

	unpaid := s.create(t, "api-refund-unpaid", "tok_ok")
	_, err = s.orders.RefundOrder(ctx, &settlev1.RefundOrderRequest{OrderId: unpaid.GetId(), RequestId: "api-refund-3"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "PENDING") {
		t.Fatalf("refund of an unpaid order: %v, want FailedPrecondition naming PENDING", err)
	}
	if _, err := refund("api-refund-4", -1, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative amount: %v, want InvalidArgument", err)
	}

	// An operator refunds the rest, and is the refund's actor.
	if _, err := s.ops.RefundOrder(ctx, &settlev1.OpsServiceRefundOrderRequest{OrderId: o.GetId(), RequestId: "ops-refund-1"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("operator's refund without a reason: %v, want InvalidArgument", err)
	}
	ops, err := s.ops.RefundOrder(ctx, &settlev1.OpsServiceRefundOrderRequest{OrderId: o.GetId(), RequestId: "ops-refund-1",
		Reason: "goodwill"})
	if err != nil {
		t.Fatal(err)
	}
	if ops.GetRefund().GetAmount().GetAmountMinor() != 750 || !strings.HasPrefix(ops.GetRefund().GetActor(), "ops:") ||
		ops.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_REFUNDED {
		t.Fatalf("operator's refund %v, order %v", ops.GetRefund(), ops.GetOrder())
	}

	h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetRefunds()) != 2 || len(h.GetRefundEvents()) != 6 {
		t.Fatalf("history: %d refunds, %d refund events; want 2 and 6", len(h.GetRefunds()), len(h.GetRefundEvents()))
	}
	last := h.GetEvents()[len(h.GetEvents())-1]
	if last.GetToState() != settlev1.OrderState_ORDER_STATE_REFUNDED || last.GetRefundId() != ops.GetRefund().GetId() {
		t.Fatalf("last order event %v", last)
	}

	list, err := s.ops.ListOrders(ctx, &settlev1.ListOrdersRequest{State: settlev1.OrderState_ORDER_STATE_REFUNDED})
	if err != nil || len(list.GetOrders()) != 1 || list.GetOrders()[0].GetRefunded().GetAmountMinor() != 1250 {
		t.Fatalf("ListOrders(REFUNDED): %v, %v", list.GetOrders(), err)
	}
	stats, err := s.ops.Stats(ctx, &settlev1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[settlev1.RefundState]int64{}
	for _, c := range stats.GetRefundStates() {
		counts[c.GetState()] = c.GetCount()
	}
	if counts[settlev1.RefundState_REFUND_STATE_SUCCEEDED] != 2 || len(stats.GetRefundStates()) != 5 {
		t.Fatalf("refund stats %v", stats.GetRefundStates())
	}
	for _, c := range stats.GetStates() {
		if c.GetState() == settlev1.OrderState_ORDER_STATE_UNSPECIFIED {
			t.Fatalf("Stats names a state the API does not know: %v", stats.GetStates())
		}
	}
}
