package grpcapi_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// TestFindOrdersWithinScope: an ops key finds its merchant's order by id
// (in any case) and by merchant reference, finds nothing of another
// merchant's, and the platform's key finds another merchant's reference
// when it names the merchant.
func TestFindOrdersWithinScope(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	a := s.chargeWith(t, keyA, "find-a", "tok_ok")
	b := s.chargeWith(t, keyB, "find-b", "tok_ok")
	find := func(key, q, merchant string) []*settlev1.Order {
		t.Helper()
		resp, err := s.ops.FindOrders(with(key), &settlev1.FindOrdersRequest{Query: q, MerchantId: merchant})
		if err != nil {
			t.Fatalf("FindOrders(%q, %q): %v", q, merchant, err)
		}
		return resp.GetOrders()
	}
	one := func(got []*settlev1.Order, want *settlev1.Order) bool {
		return len(got) == 1 && got[0].GetId() == want.GetId()
	}
	for _, q := range []string{a.GetId(), "find-a"} {
		if got := find(keyAop, q, ""); !one(got, a) {
			t.Errorf("merchant-a's ops key finds %q: %v", q, got)
		}
	}
	for _, c := range []struct{ q, merchant string }{{b.GetId(), ""}, {"find-b", ""}, {"find-b", "merchant-b"}, {"nothing", ""}} {
		if got := find(keyAop, c.q, c.merchant); len(got) != 0 {
			t.Errorf("merchant-a's ops key finds %q of %q: %v", c.q, c.merchant, got)
		}
	}
	if got := find(keyPlatform, b.GetId(), ""); !one(got, b) {
		t.Errorf("the platform's key finds b by id: %v", got)
	}
	if got := find(keyPlatform, "find-b", "merchant-b"); !one(got, b) {
		t.Errorf("the platform's key finds b's reference: %v", got)
	}
	_, err := s.ops.FindOrders(with(keyAop), &settlev1.FindOrdersRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = s.ops.FindOrders(with(keyAop), &settlev1.FindOrdersRequest{Query: "4111 1111 1111 1111"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = s.ops.FindOrders(with(keyA), &settlev1.FindOrdersRequest{Query: "find-a"})
	wantCode(t, err, codes.PermissionDenied)
}

// TestFindOrdersByAnyReference: an order is found by every reference an
// operator may hold of it (its attempt's id, which is our reference at the
// gateway, the gateway's charge id, the charge's request key, a refund's
// id, request key and gateway id) in any case Settle prints, and by none
// of another merchant's.
func TestFindOrdersByAnyReference(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	a := s.chargeWith(t, keyA, "any-ref-a", "tok_ok")
	other := s.chargeWith(t, keyA, "any-ref-other", "tok_ok")
	b := s.chargeWith(t, keyB, "any-ref-b", "tok_ok")
	hist, err := s.ops.GetOrderHistory(with(keyAop), &settlev1.GetOrderHistoryRequest{OrderId: a.GetId()})
	if err != nil || len(hist.GetAttempts()) != 1 || hist.GetAttempts()[0].GetGatewayChargeId() == "" {
		t.Fatalf("history: %v, %v", hist, err)
	}
	refund, err := s.orders.RefundOrder(with(keyA), &settlev1.RefundOrderRequest{OrderId: a.GetId(), RequestId: "any-ref-a-refund", AmountMinor: 100})
	if err != nil || refund.GetRefund().GetGatewayRefundId() == "" {
		t.Fatalf("refund: %v, %v", refund, err)
	}
	attempt := hist.GetAttempts()[0]
	for _, q := range []string{attempt.GetId(), strings.ToUpper(attempt.GetId()), attempt.GetGatewayChargeId(), "any-ref-a-charge",
		refund.GetRefund().GetId(), "any-ref-a-refund", refund.GetRefund().GetGatewayRefundId()} {
		resp, err := s.ops.FindOrders(with(keyAop), &settlev1.FindOrdersRequest{Query: q})
		if err != nil {
			t.Fatalf("FindOrders(%q): %v", q, err)
		}
		if got := resp.GetOrders(); len(got) != 1 || got[0].GetId() != a.GetId() {
			t.Errorf("FindOrders(%q) = %v, want only %s (not %s)", q, got, a.GetId(), other.GetId())
		}
	}
	// merchant-b's charge request key and attempt are not merchant-a's to find.
	for _, q := range []string{"any-ref-b-charge", b.GetCurrentAttemptId()} {
		resp, err := s.ops.FindOrders(with(keyAop), &settlev1.FindOrdersRequest{Query: q})
		if err != nil || len(resp.GetOrders()) != 0 {
			t.Errorf("merchant-a's ops key finds %q of merchant-b: %v, %v", q, resp.GetOrders(), err)
		}
	}
}
