package grpcapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
)

// newStripeStack is the stack with a "stripe" gateway on the Stripe fake,
// which accepts only sk_test_settle; key is Settle's.
func newStripeStack(t *testing.T, key string) (*stack, *stripetest.Server) {
	t.Helper()
	fake := stripetest.New(stripetest.Options{SecretKey: "sk_test_settle"})
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	gw, err := stripe.New(stripe.Config{SecretKey: key, BaseURL: hs.URL, Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"stripe": gw}), fake
}

func (s *stack) createOn(t *testing.T, gateway, ref, token string) *settlev1.Order {
	t.Helper()
	resp, err := s.orders.CreateOrder(context.Background(), &settlev1.CreateOrderRequest{
		MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token, Gateway: gateway,
	})
	if err != nil {
		t.Fatalf("CreateOrder(%s): %v", ref, err)
	}
	return resp.GetOrder()
}

// TestGatewayRefusedIsAConfigurationError: Stripe refuses Settle's key.
// The checkout gets INTERNAL with a message that says so, not a decline;
// the order is PENDING and its attempt refused.
func TestGatewayRefusedIsAConfigurationError(t *testing.T) {
	t.Parallel()
	s, _ := newStripeStack(t, "sk_test_revoked")
	o := s.createOn(t, "stripe", "refused-1", stripetest.TokenVisa)
	_, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "refused-req-1"})
	st := status.Convert(err)
	if st.Code() != codes.Internal || !strings.Contains(st.Message(), "refused Settle's credentials") {
		t.Fatalf("ChargeOrder = %v; want INTERNAL saying the gateway refused Settle's credentials", err)
	}
	got, err := s.orders.GetOrder(context.Background(), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}})
	if err != nil || got.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PENDING {
		t.Fatalf("GetOrder = %v, %v; want PENDING", got, err)
	}
	if !strings.Contains(s.logs.String(), "level=ERROR") {
		t.Errorf("nothing logged at ERROR:\n%s", s.logs.String())
	}
}

// TestThreeDSecureThroughTheAPI: a customer-present charge that Stripe
// challenges answers REQUIRES_ACTION with the next action; once the
// customer has opened the redirect, ChargeOrder with the same request_id
// answers PAID.
func TestThreeDSecureThroughTheAPI(t *testing.T) {
	t.Parallel()
	s, _ := newStripeStack(t, "sk_test_settle")
	ctx := context.Background()
	o := s.createOn(t, "stripe", "tds-1", stripetest.TokenRequiresAction)
	req := &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "tds-req-1", CustomerPresent: true,
		ReturnUrl: "https://checkout.example/return?order=tds-1"}
	resp, err := s.orders.ChargeOrder(ctx, req)
	if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION ||
		resp.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_REQUIRES_ACTION ||
		resp.GetNextAction().GetRedirectUrl() == "" || resp.GetNextAction().GetClientSecret() == "" {
		t.Fatalf("ChargeOrder = %v, %v; want REQUIRES_ACTION with a redirect and a client secret", resp, err)
	}
	if strings.Contains(s.logs.String(), resp.GetNextAction().GetClientSecret()) {
		t.Error("the client secret was logged")
	}
	page, err := http.Get(resp.GetNextAction().GetRedirectUrl())
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	resp, err = s.orders.ChargeOrder(ctx, req)
	if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID || resp.GetNextAction() != nil {
		t.Fatalf("ChargeOrder after the challenge = %v, %v; want PAID", resp, err)
	}

	for _, u := range []string{"javascript:alert(1)", "https://", "https://shop.example:99999/return", "https://shop.example/re turn",
		"http://shop.example/return"} {
		bad := &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "tds-req-2", ReturnUrl: u}
		if _, err := s.orders.ChargeOrder(ctx, bad); status.Code(err) != codes.InvalidArgument ||
			!strings.HasPrefix(status.Convert(err).Message(), "return_url: ") {
			t.Errorf("ChargeOrder with return_url %q = %v; want INVALID_ARGUMENT naming return_url", u, err)
		}
	}
}

// TestChargeCustomerThroughTheAPI: ChargeOrder's customer reaches Stripe's
// create; a customer that is not a Stripe Customer id is INVALID_ARGUMENT
// naming the field, and another customer under the same request_id is
// ALREADY_EXISTS.
func TestChargeCustomerThroughTheAPI(t *testing.T) {
	t.Parallel()
	s, fake := newStripeStack(t, "sk_test_settle")
	ctx := context.Background()
	o := s.createOn(t, "stripe", "saved-1", stripetest.TokenVisa)
	bad := &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "saved-req-0", Customer: "customer 42"}
	if _, err := s.orders.ChargeOrder(ctx, bad); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "customer") {
		t.Errorf("ChargeOrder with a bad customer = %v; want INVALID_ARGUMENT naming customer", err)
	}
	req := &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "saved-req-1", Customer: "cus_Api4242"}
	resp, err := s.orders.ChargeOrder(ctx, req)
	if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
		t.Fatalf("ChargeOrder = %v, %v; want PAID", resp, err)
	}
	if pis := fake.Intents(resp.GetAttempt().GetId()); len(pis) != 1 || pis[0].Customer != "cus_Api4242" {
		t.Errorf("PaymentIntents = %+v; want one, for cus_Api4242", pis)
	}
	req.Customer = "cus_Other"
	if _, err := s.orders.ChargeOrder(ctx, req); status.Code(err) != codes.AlreadyExists {
		t.Errorf("ChargeOrder with the same request_id and another customer = %v; want ALREADY_EXISTS", err)
	}
	if strings.Contains(s.logs.String(), "cus_Api4242") {
		t.Errorf("the customer was logged:\n%s", s.logs.String())
	}
}

// TestCreateAndChargeThroughTheAPI: CreateAndChargeOrder takes
// ChargeOrder's customer_present, return_url and customer. A one-call
// charge that Stripe challenges answers REQUIRES_ACTION with the next
// action, and PAID once the customer has opened the redirect; a saved
// card's customer reaches Stripe's create; a bad customer is
// INVALID_ARGUMENT naming the field.
func TestCreateAndChargeThroughTheAPI(t *testing.T) {
	t.Parallel()
	s, fake := newStripeStack(t, "sk_test_settle")
	ctx := context.Background()
	req := &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-tds-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: stripetest.TokenRequiresAction, Gateway: "stripe",
		RequestId: "one-call-tds-req-1", CustomerPresent: true, ReturnUrl: "https://checkout.example/return?order=one-call-tds-1"}
	resp, err := s.orders.CreateAndChargeOrder(ctx, req)
	if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION ||
		resp.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_REQUIRES_ACTION ||
		resp.GetNextAction().GetRedirectUrl() == "" || resp.GetNextAction().GetClientSecret() == "" {
		t.Fatalf("CreateAndChargeOrder = %v, %v; want REQUIRES_ACTION with a redirect and a client secret", resp, err)
	}
	page, err := http.Get(resp.GetNextAction().GetRedirectUrl())
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	again, err := s.orders.CreateAndChargeOrder(ctx, req)
	if err != nil || again.GetOrder().GetId() != resp.GetOrder().GetId() ||
		again.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID || again.GetNextAction() != nil {
		t.Fatalf("CreateAndChargeOrder after the challenge = %v, %v; want the same order PAID", again, err)
	}

	saved := &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-saved-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: stripetest.TokenVisa, Gateway: "stripe",
		RequestId: "one-call-saved-req-1", Customer: "cus_OneCallApi42"}
	paid, err := s.orders.CreateAndChargeOrder(ctx, saved)
	if err != nil || paid.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
		t.Fatalf("CreateAndChargeOrder = %v, %v; want PAID", paid, err)
	}
	if pis := fake.Intents(paid.GetAttempt().GetId()); len(pis) != 1 || pis[0].Customer != "cus_OneCallApi42" {
		t.Errorf("PaymentIntents = %+v; want one, for cus_OneCallApi42", pis)
	}

	bad := &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-bad-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: stripetest.TokenVisa, Gateway: "stripe",
		RequestId: "one-call-bad-req-1", Customer: "customer 42"}
	if _, err := s.orders.CreateAndChargeOrder(ctx, bad); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "customer") {
		t.Errorf("CreateAndChargeOrder with a bad customer = %v; want INVALID_ARGUMENT naming customer", err)
	}
}
