package grpcapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// adyenStack is the stack with an "adyen" gateway over HTTP against the
// fake Adyen. No notification is delivered: the only way an order waiting
// for the shopper learns of the challenge is the action result.
type adyenStack struct {
	*stack
	fake *adyenfake.Server
}

// storeEvents is the recorded notifications of the stack's store, which
// the stack makes after the gateway that reads them.
type storeEvents struct{ order.EventLog }

func newAdyenStack(t *testing.T) *adyenStack {
	t.Helper()
	const apiKey, account = "AQE_settle_test", "SettleTestECOM"
	fake, err := adyenfake.New(adyenfake.Config{APIKey: apiKey, MerchantAccount: account, ClientTimeout: 4 * gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake)
	events := &storeEvents{}
	gw, err := adyen.New(adyen.Config{BaseURL: srv.URL + "/v71", APIKey: apiKey, MerchantAccount: account,
		Timeout: gatewayTimeout, Events: events, NoShowHorizon: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"adyen": gw})
	events.EventLog = postgres.NewStore(s.pool)
	t.Cleanup(func() {
		srv.Close()
		fake.Close()
		if errs := fake.ContractErrors(); len(errs) > 0 {
			t.Errorf("the fake broke Adyen's contract: %v", errs)
		}
	})
	return &adyenStack{stack: s, fake: fake}
}

// challenged creates an order of 12.50 EUR at gw with token and charges it
// with the customer present, under request id ref+"-req".
func (s *adyenStack) challenged(t *testing.T, gw, ref, token string, capture settlev1.CaptureMode) *settlev1.ChargeOrderResponse {
	t.Helper()
	created, err := s.orders.CreateOrder(context.Background(), &settlev1.CreateOrderRequest{MerchantReference: ref,
		Amount: &settlev1.Money{Currency: "EUR", AmountMinor: 1250}, PaymentMethod: token, Gateway: gw, Capture: capture})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: created.GetOrder().GetId(),
		RequestId: ref + "-req", CustomerPresent: true, ReturnUrl: "https://shop.example/return"})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// complete replays ref's charge with an action result.
func (s *adyenStack) complete(orderID, ref, result string) (*settlev1.ChargeOrderResponse, error) {
	return s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: orderID, RequestId: ref + "-req",
		CustomerPresent: true, ReturnUrl: "https://shop.example/return", ActionResult: result})
}

// payment is the fake's ledger entry of the attempt.
func (s *adyenStack) payment(t *testing.T, attemptID string) adyenfake.Payment {
	t.Helper()
	for _, p := range s.fake.Ledger() {
		if p.Reference == attemptID {
			return p
		}
	}
	t.Fatalf("no payment %s at the fake", attemptID)
	return adyenfake.Payment{}
}

// challenge is the shopper on the 3-D Secure page of redirectURL, ending
// it with result ("authorised" or "refused"): it returns the
// redirectResult the fake appended to the return URL.
func challenge(t *testing.T, redirectURL, result string) string {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(redirectURL + "?result=" + result)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || back.Host != "shop.example" || back.Query().Get("redirectResult") == "" {
		t.Fatalf("the challenge answered %d to %q; want a redirect to the return URL with a redirectResult", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back.Query().Get("redirectResult")
}

// TestAdyenActionResultCompletesTheChallenge: an Adyen order waiting for
// the shopper's 3-D Secure is settled by ChargeOrder with the
// redirectResult the shopper came back with, at once, with no
// notification: PAID and captured once (AUTOMATIC), AUTHORIZED and held
// (MANUAL), PENDING when the challenge failed. A replay of the same
// result answers the same, and moves no money. On the old code a replay's action result was
// ignored, and the order stayed REQUIRES_ACTION.
func TestAdyenActionResultCompletesTheChallenge(t *testing.T) {
	t.Parallel()
	s := newAdyenStack(t)
	for _, tt := range []struct {
		ref, result string
		capture     settlev1.CaptureMode
		want        settlev1.OrderState
		held, taken int64
	}{
		{"3ds-auto", "authorised", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC, settlev1.OrderState_ORDER_STATE_PAID, 1250, 1250},
		{"3ds-manual", "authorised", settlev1.CaptureMode_CAPTURE_MODE_MANUAL, settlev1.OrderState_ORDER_STATE_AUTHORIZED, 1250, 0},
		{"3ds-failed", "refused", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC, settlev1.OrderState_ORDER_STATE_PENDING, 0, 0},
	} {
		t.Run(tt.ref, func(t *testing.T) {
			first := s.challenged(t, "adyen", tt.ref, "tok_3ds", tt.capture)
			id := first.GetOrder().GetId()
			if first.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION || first.GetNextAction().GetRedirectUrl() == "" {
				t.Fatalf("tok_3ds: %v; want REQUIRES_ACTION with a page", first)
			}
			rr := challenge(t, first.GetNextAction().GetRedirectUrl(), tt.result)
			resp, err := s.complete(id, tt.ref, rr)
			if err != nil || resp.GetOrder().GetState() != tt.want || resp.GetAttempt().GetId() != first.GetAttempt().GetId() {
				t.Fatalf("ChargeOrder with the action result = %v, %v; want %s, the same attempt", resp, err, tt.want)
			}
			// The same result again (a lost answer, a reloaded return
			// page): the order as it stands, and nothing more is taken.
			again, err := s.complete(id, tt.ref, rr)
			if err != nil || again.GetOrder().GetState() != tt.want || again.GetAttempt().GetId() != first.GetAttempt().GetId() {
				t.Fatalf("ChargeOrder with the action result again = %v, %v; want %s, the same attempt", again, err, tt.want)
			}
			if strings.Contains(s.logs.String(), rr) {
				t.Errorf("the action result was logged:\n%s", s.logs.String())
			}
			p := s.payment(t, first.GetAttempt().GetId())
			if p.AmountAuthorised != tt.held || p.AmountCaptured != tt.taken || len(p.Captures) > 1 {
				t.Errorf("ledger %+v; want %d held, %d taken, at most one capture", p, tt.held, tt.taken)
			}
		})
	}
}

// TestAdyenActionResultReplayedConcurrently: the same action result sent
// by several calls at once (a double-clicked return page) takes the
// money once.
func TestAdyenActionResultReplayedConcurrently(t *testing.T) {
	t.Parallel()
	s := newAdyenStack(t)
	first := s.challenged(t, "adyen", "3ds-race", "tok_3ds", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
	rr := challenge(t, first.GetNextAction().GetRedirectUrl(), "authorised")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := s.complete(first.GetOrder().GetId(), "3ds-race", rr)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent ChargeOrder with the action result: %v", err)
		}
	}
	p := s.payment(t, first.GetAttempt().GetId())
	if p.AmountCaptured != 1250 || len(p.Captures) != 1 {
		t.Errorf("ledger %+v; want captured once, in full", p)
	}
}

// TestActionResultRefused: an action result that no waiting attempt can
// take is refused with the code that says why, and the order waiting for
// the shopper is left waiting.
func TestActionResultRefused(t *testing.T) {
	t.Parallel()
	s := newAdyenStack(t)
	ctx := context.Background()
	waiting := s.challenged(t, "adyen", "3ds-bad", "tok_3ds", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
	id := waiting.GetOrder().GetId()

	for _, tt := range []struct {
		name, orderID, ref, result string
		code                       codes.Code
	}{
		{"not the gateway's text", id, "3ds-bad", "Ab12 cd", codes.InvalidArgument},
		{"too long", id, "3ds-bad", strings.Repeat("A", order.MaxActionResultLen+1), codes.InvalidArgument},
		{"a card number", id, "3ds-bad", "4242424242424242", codes.InvalidArgument},
		{"one Adyen never gave", id, "3ds-bad", "X6XtfGC3!Y0notgiven", codes.InvalidArgument},
		{"another request_id", id, "3ds-other", "X6XtfGC3!Y0", codes.FailedPrecondition},
		{"no such order", order.NewID(), "3ds-bad", "X6XtfGC3!Y0", codes.NotFound},
	} {
		_, err := s.complete(tt.orderID, tt.ref, tt.result)
		if status.Code(err) != tt.code || !strings.Contains(status.Convert(err).Message(), "action_result") && tt.code != codes.NotFound {
			t.Errorf("%s: %v; want %s naming action_result", tt.name, err, tt.code)
		}
		if strings.Contains(status.Convert(err).Message(), tt.result) || strings.Contains(s.logs.String(), tt.result) {
			t.Errorf("%s: the message or the log repeats the value: %v", tt.name, err)
		}
	}
	got, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: id}})
	if err != nil || got.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION {
		t.Fatalf("after refused action results the order is %v, %v; want REQUIRES_ACTION", got, err)
	}

	// An order that waits for nothing: declined (PENDING), paid, or one
	// whose gateway learns the challenge's result itself (the simulator).
	declined := s.challenged(t, "adyen", "3ds-declined", "tok_decline", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
	paid := s.challenged(t, "adyen", "3ds-paid", "tok_ok", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
	sim := s.challenged(t, "sim", "3ds-sim", "tok_3ds", settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC)
	for _, tt := range []struct {
		resp  *settlev1.ChargeOrderResponse
		ref   string
		state settlev1.OrderState
	}{
		{declined, "3ds-declined", settlev1.OrderState_ORDER_STATE_PENDING},
		{paid, "3ds-paid", settlev1.OrderState_ORDER_STATE_PAID},
		{sim, "3ds-sim", settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION},
	} {
		if tt.resp.GetOrder().GetState() != tt.state {
			t.Fatalf("%s: %s, want %s", tt.ref, tt.resp.GetOrder().GetState(), tt.state)
		}
		_, err := s.complete(tt.resp.GetOrder().GetId(), tt.ref, "X6XtfGC3!Y0")
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "action_result") {
			t.Errorf("%s (%s): %v; want FailedPrecondition naming action_result", tt.ref, tt.state, err)
		}
	}
	if n := s.charges(t, sim.GetOrder().GetId()); n != 0 {
		t.Errorf("the simulator charged %d times", n)
	}
}
