package grpcapi_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

const (
	pending  = settlev1.OrderState_ORDER_STATE_PENDING
	charging = settlev1.OrderState_ORDER_STATE_CHARGING
	paid     = settlev1.OrderState_ORDER_STATE_PAID
	canceled = settlev1.OrderState_ORDER_STATE_CANCELED
)

func TestChargeReplaySameRequestChargesOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	o := s.create(t, "order-replay", "tok_ok")
	first := s.charge(t, o.GetId(), "checkout-replay-1")
	if first.GetOrder().GetState() != paid || first.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED {
		t.Fatalf("first charge: %v", first)
	}
	again := s.charge(t, o.GetId(), "checkout-replay-1")
	if again.GetAttempt().GetId() != first.GetAttempt().GetId() || again.GetOrder().GetState() != paid ||
		again.GetAttempt().GetGatewayChargeId() != first.GetAttempt().GetGatewayChargeId() {
		t.Fatalf("replay returned %v, want the first attempt's result %v", again, first)
	}
	// A new click on a PAID order charges nothing either.
	newClick := s.charge(t, o.GetId(), "checkout-replay-2")
	if newClick.GetOrder().GetState() != paid || newClick.GetAttempt() != nil {
		t.Fatalf("new request on PAID order: %v", newClick)
	}
	if n := s.charges(t, o.GetId()); n != 1 {
		t.Fatalf("gateway charged %d times, want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM charge_attempts`); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

func TestChargeConcurrentCallsChargeOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same_request_id=%v", same), func(t *testing.T) {
			o := s.create(t, fmt.Sprintf("order-50-%v", same), "tok_slow_50")
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req := fmt.Sprintf("req-%v-%d", same, i)
					if same {
						req = fmt.Sprintf("req-%v-shared", same)
					}
					_, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: req})
					if err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if n := s.charges(t, o.GetId()); n != 1 {
				t.Fatalf("gateway charged %d times, want 1", n)
			}
			if got := s.charge(t, o.GetId(), "req-after"); got.GetOrder().GetState() != paid {
				t.Fatalf("order ended %s, want PAID", got.GetOrder().GetState())
			}
		})
	}
}

func TestChargeUnknownOutcomeStaysCharging(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, token := range []string{"tok_timeout", "tok_5xx_after_charge", "tok_drop_after_charge"} {
		t.Run(token, func(t *testing.T) {
			o := s.create(t, "order-"+token, token)
			resp := s.charge(t, o.GetId(), "checkout-"+token)
			got := resp.GetOrder()
			if got.GetState() != charging || got.GetNextCheckTime() == nil {
				t.Fatalf("order %s with next check %v, want CHARGING with a next check", got.GetState(), got.GetNextCheckTime())
			}
			if resp.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_UNKNOWN {
				t.Fatalf("attempt outcome %s, want UNKNOWN", resp.GetAttempt().GetOutcome())
			}
			// A retry with the same key and a new click both leave it to the reconciler.
			for _, req := range []string{"checkout-" + token, "checkout-" + token + "-again"} {
				if again := s.charge(t, o.GetId(), req); again.GetOrder().GetState() != charging {
					t.Fatalf("charge %s: %s, want CHARGING", req, again.GetOrder().GetState())
				}
			}
			if n := s.charges(t, o.GetId()); n != 1 {
				t.Fatalf("gateway charged %d times, want 1", n)
			}
			if n := s.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND reconcile_at IS NOT NULL`, got.GetId()); n != 1 {
				t.Fatalf("no reconcile_at on the CHARGING order")
			}
			// The reconciler finds the charge.
			checked, err := s.ops.ReconcileOrder(context.Background(), &settlev1.ReconcileOrderRequest{OrderId: o.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			if checked.GetOrder().GetState() != paid {
				t.Fatalf("after reconcile: %s, want PAID", checked.GetOrder().GetState())
			}
		})
	}
}

func TestChargeDeclineThenNewAttempt(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	o := s.create(t, "order-decline", "tok_decline")
	declined := s.charge(t, o.GetId(), "checkout-decline-1")
	if declined.GetOrder().GetState() != pending || declined.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_DECLINED ||
		declined.GetAttempt().GetDeclineCode() == "" {
		t.Fatalf("declined charge: %v", declined)
	}
	// The same request again is the same declined attempt, not a new try.
	if again := s.charge(t, o.GetId(), "checkout-decline-1"); again.GetAttempt().GetId() != declined.GetAttempt().GetId() ||
		again.GetOrder().GetState() != pending {
		t.Fatalf("replay of declined request: %v", again)
	}
	ctx := context.Background()
	// Reusing the request id with another card is a conflict.
	_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "checkout-decline-1", PaymentMethod: "tok_ok"})
	wantCode(t, err, codes.AlreadyExists)
	// A new click with a good card succeeds.
	ok, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "checkout-decline-2", PaymentMethod: "tok_ok"})
	if err != nil || ok.GetOrder().GetState() != paid {
		t.Fatalf("second attempt: %v %v", ok, err)
	}
	h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetAttempts()) != 2 {
		t.Fatalf("%d attempts in history, want 2", len(h.GetAttempts()))
	}
	var path []string
	for _, e := range h.GetEvents() {
		path = append(path, e.GetEvent()+"→"+e.GetToState().String())
	}
	want := "[create→ORDER_STATE_PENDING charge→ORDER_STATE_CHARGING fail→ORDER_STATE_PENDING charge→ORDER_STATE_CHARGING succeed→ORDER_STATE_PAID]"
	if fmt.Sprint(path) != want {
		t.Fatalf("history %v, want %s", path, want)
	}
	// A request id of this order used on another order is a conflict.
	other := s.create(t, "order-decline-other", "tok_ok")
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: other.GetId(), RequestId: "checkout-decline-2"})
	wantCode(t, err, codes.AlreadyExists)
	if n := s.charges(t, other.GetId()); n != 0 {
		t.Fatalf("conflicting request charged %d times", n)
	}
}

func TestChargeBadInput(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	o := s.create(t, "order-charge-bad", "tok_ok")
	ctx := context.Background()
	for name, req := range map[string]*settlev1.ChargeOrderRequest{
		"no request id":      {OrderId: o.GetId()},
		"short request id":   {OrderId: o.GetId(), RequestId: "abc"},
		"bad order id":       {OrderId: "123", RequestId: "checkout-bad-1"},
		"card number pm":     {OrderId: o.GetId(), RequestId: "checkout-bad-1", PaymentMethod: "4000056655665556"},
		"unprintable req id": {OrderId: o.GetId(), RequestId: "checkout\tbad"},
	} {
		_, err := s.orders.ChargeOrder(ctx, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: "0190d9a0-0000-7000-8000-000000000000", RequestId: "checkout-bad-2"})
	wantCode(t, err, codes.NotFound)
	if n := s.count(t, `SELECT count(*) FROM charge_attempts`); n != 0 {
		t.Fatalf("bad input left %d attempts", n)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-cancel", "tok_ok")
	c, err := s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o.GetId(), Reason: "customer left"})
	if err != nil || c.GetOrder().GetState() != canceled {
		t.Fatalf("cancel: %v %v", c, err)
	}
	// Charging a canceled order charges nothing.
	if got := s.charge(t, o.GetId(), "checkout-cancel-1"); got.GetOrder().GetState() != canceled || got.GetAttempt() != nil {
		t.Fatalf("charge after cancel: %v", got)
	}
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o.GetId()})
	wantCode(t, err, codes.FailedPrecondition)
	if msg := status.Convert(err).Message(); msg != "cannot cancel an order in state CANCELED" {
		t.Fatalf("message %q does not name the state", msg)
	}
	p := s.create(t, "order-cancel-paid", "tok_ok")
	s.charge(t, p.GetId(), "checkout-cancel-2")
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: p.GetId()})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestCreateAndChargeInOneCall(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	req := &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 990}, PaymentMethod: "tok_ok", RequestId: "one-call-req-1"}
	first, err := s.orders.CreateAndChargeOrder(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetOrder().GetState() != paid || first.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED {
		t.Fatalf("one call: %v", first)
	}
	// A retry of the same call replays; a new request id on the same order charges nothing.
	again, err := s.orders.CreateAndChargeOrder(ctx, req)
	if err != nil || again.GetOrder().GetId() != first.GetOrder().GetId() || again.GetAttempt().GetId() != first.GetAttempt().GetId() {
		t.Fatalf("retry: %v %v", again, err)
	}
	req2 := &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-1", Amount: req.Amount, PaymentMethod: "tok_ok", RequestId: "one-call-req-2"}
	if got, err := s.orders.CreateAndChargeOrder(ctx, req2); err != nil || got.GetOrder().GetState() != paid || got.GetAttempt() != nil {
		t.Fatalf("new request id on a PAID order: %v %v", got, err)
	}
	if n := s.charges(t, first.GetOrder().GetId()); n != 1 {
		t.Fatalf("gateway charged %d times, want 1", n)
	}
	// Other parameters under the same reference, and a request id of another order, are conflicts.
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok", RequestId: "one-call-req-3"})
	wantCode(t, err, codes.AlreadyExists)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-2",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok", RequestId: "one-call-req-1"})
	wantCode(t, err, codes.AlreadyExists)
	// The failed call created nothing: no order under the new reference.
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "one-call-2"}})
	wantCode(t, err, codes.NotFound)
	if n := s.count(t, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders after the conflicts, want 1", n)
	}
	// The history is a path of the table: create, charge, succeed.
	h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: first.GetOrder().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, e := range h.GetEvents() {
		path = append(path, e.GetEvent())
	}
	if fmt.Sprint(path) != "[create charge succeed]" {
		t.Fatalf("history %v", path)
	}
	// An unknown outcome leaves it to the reconciler, as ChargeOrder does.
	timeout, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-3",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 5}, PaymentMethod: "tok_timeout", RequestId: "one-call-req-4"})
	if err != nil || timeout.GetOrder().GetState() != charging || timeout.GetOrder().GetNextCheckTime() == nil {
		t.Fatalf("timeout: %v %v", timeout, err)
	}
}
