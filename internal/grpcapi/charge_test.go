package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// The charge path's behaviour (at most one charge, replays, conflicts,
// unknown outcomes, cancels) is tested on order.Service in package order.
// The tests here check what the API adds: each outcome and error as the
// client sees it, through a real client over a real socket.

const (
	pending  = settlev1.OrderState_ORDER_STATE_PENDING
	charging = settlev1.OrderState_ORDER_STATE_CHARGING
	paid     = settlev1.OrderState_ORDER_STATE_PAID
	canceled = settlev1.OrderState_ORDER_STATE_CANCELED
)

// TestChargeOutcomes: each outcome of a charge, and a replay, in the
// response's order and attempt.
func TestChargeOutcomes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()

	o := s.create(t, "order-paid", "tok_ok")
	first := s.charge(t, o.GetId(), "checkout-paid-1")
	a := first.GetAttempt()
	if first.GetOrder().GetState() != paid || a.GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED ||
		a.GetId() == "" || a.GetOrderId() != o.GetId() || a.GetRequestId() != "checkout-paid-1" || a.GetGatewayChargeId() == "" ||
		a.GetCreateTime() == nil || first.GetOrder().GetCurrentAttemptId() != a.GetId() || first.GetOrder().GetNextCheckTime() != nil {
		t.Fatalf("paid charge: %v", first)
	}
	if again := s.charge(t, o.GetId(), "checkout-paid-1"); again.GetAttempt().GetId() != a.GetId() ||
		again.GetAttempt().GetGatewayChargeId() != a.GetGatewayChargeId() {
		t.Fatalf("replay returned %v, want the first attempt %v", again, first)
	}
	// A new request on a PAID order names no attempt.
	if newClick := s.charge(t, o.GetId(), "checkout-paid-2"); newClick.GetOrder().GetState() != paid || newClick.GetAttempt() != nil {
		t.Fatalf("new request on PAID order: %v", newClick)
	}

	d := s.create(t, "order-declined", "tok_decline")
	declined := s.charge(t, d.GetId(), "checkout-declined-1")
	if declined.GetOrder().GetState() != pending || declined.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_DECLINED ||
		declined.GetAttempt().GetDeclineCode() == "" {
		t.Fatalf("declined charge: %v", declined)
	}

	u := s.create(t, "order-unknown", "tok_timeout")
	unknown := s.charge(t, u.GetId(), "checkout-unknown-1")
	if unknown.GetOrder().GetState() != charging || unknown.GetOrder().GetNextCheckTime() == nil ||
		unknown.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_UNKNOWN {
		t.Fatalf("unknown outcome: %v, want CHARGING with a next check and outcome UNKNOWN", unknown)
	}
	// An operator's check now finds the charge.
	checked, err := s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: u.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if checked.GetOrder().GetState() != paid || checked.GetOrder().GetNextCheckTime() != nil {
		t.Fatalf("after reconcile: %v, want PAID", checked.GetOrder())
	}
}

// TestChargeErrorCodes: a conflict is AlreadyExists, bad input
// InvalidArgument, an unknown order NotFound.
func TestChargeErrorCodes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-codes", "tok_decline")
	s.charge(t, o.GetId(), "checkout-codes-1")
	// The request id again with another card; and on another order.
	_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "checkout-codes-1", PaymentMethod: "tok_ok"})
	wantCode(t, err, codes.AlreadyExists)
	other := s.create(t, "order-codes-other", "tok_ok")
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: other.GetId(), RequestId: "checkout-codes-1"})
	wantCode(t, err, codes.AlreadyExists)
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
	_, err = s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: "0190d9a0-0000-7000-8000-000000000000", RequestId: "checkout-bad-2"})
	wantCode(t, err, codes.NotFound)
}

// TestHistory: GetOrderHistory lists the attempts, and the events with
// their states.
func TestHistory(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-history", "tok_decline")
	s.charge(t, o.GetId(), "checkout-history-1")
	if _, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "checkout-history-2", PaymentMethod: "tok_ok"}); err != nil {
		t.Fatal(err)
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
		path = append(path, e.GetEvent()+"→"+e.GetToState().String()+" by "+e.GetActor())
	}
	want := "[create→ORDER_STATE_PENDING by api charge→ORDER_STATE_CHARGING by api fail→ORDER_STATE_PENDING by api " +
		"charge→ORDER_STATE_CHARGING by api succeed→ORDER_STATE_PAID by api]"
	if fmt.Sprint(path) != want {
		t.Fatalf("history %v, want %s", path, want)
	}
}

// TestCancel: a cancel's answer, and a cancel the order's state refuses,
// which is FailedPrecondition naming the state.
func TestCancel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-cancel", "tok_ok")
	c, err := s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o.GetId(), Reason: "customer left"})
	if err != nil || c.GetOrder().GetState() != canceled {
		t.Fatalf("cancel: %v %v", c, err)
	}
	if got := s.charge(t, o.GetId(), "checkout-cancel-1"); got.GetOrder().GetState() != canceled || got.GetAttempt() != nil ||
		got.GetNoAttemptReason() != settlev1.NoAttemptReason_NO_ATTEMPT_REASON_CANCELED {
		t.Fatalf("charge after cancel: %v; want no attempt, and the reason CANCELED", got)
	}
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o.GetId()})
	wantCode(t, err, codes.FailedPrecondition)
	if msg := status.Convert(err).Message(); msg != "cannot cancel an order in state CANCELED" {
		t.Fatalf("message %q does not name the state", msg)
	}
	p := s.create(t, "order-cancel-paid", "tok_ok")
	if got := s.charge(t, p.GetId(), "checkout-cancel-2"); got.GetAttempt() == nil || got.GetNoAttemptReason() != settlev1.NoAttemptReason_NO_ATTEMPT_REASON_UNSPECIFIED {
		t.Fatalf("first charge: %v; want an attempt and no reason", got)
	}
	if got := s.charge(t, p.GetId(), "checkout-cancel-3"); got.GetAttempt() != nil ||
		got.GetNoAttemptReason() != settlev1.NoAttemptReason_NO_ATTEMPT_REASON_ALREADY_PAID {
		t.Fatalf("charge of a paid order: %v; want no attempt, and the reason ALREADY_PAID", got)
	}
	_, err = s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: p.GetId()})
	wantCode(t, err, codes.FailedPrecondition)
}

// TestCreateAndChargeInOneCall: the one call's answers and codes.
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
	if first.GetOrder().GetState() != paid || first.GetOrder().GetAmount().GetAmountMinor() != 990 ||
		first.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED {
		t.Fatalf("one call: %v", first)
	}
	again, err := s.orders.CreateAndChargeOrder(ctx, req)
	if err != nil || again.GetOrder().GetId() != first.GetOrder().GetId() || again.GetAttempt().GetId() != first.GetAttempt().GetId() {
		t.Fatalf("retry: %v %v", again, err)
	}
	if n := s.charges(t, first.GetOrder().GetId()); n != 1 {
		t.Fatalf("gateway charged %d times, want 1", n)
	}
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok", RequestId: "one-call-req-3"})
	wantCode(t, err, codes.AlreadyExists)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-2",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok", RequestId: "one-call-req-1"})
	wantCode(t, err, codes.AlreadyExists)
	_, err = s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-4"})
	wantCode(t, err, codes.InvalidArgument)
	timeout, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "one-call-3",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 5}, PaymentMethod: "tok_timeout", RequestId: "one-call-req-4"})
	if err != nil || timeout.GetOrder().GetState() != charging || timeout.GetOrder().GetNextCheckTime() == nil ||
		timeout.GetAttempt().GetOutcome() != settlev1.AttemptOutcome_ATTEMPT_OUTCOME_UNKNOWN {
		t.Fatalf("timeout: %v %v", timeout, err)
	}
}

// TestHistoryPages: GetOrderHistory is paged (AIP-158): following
// next_page_token yields every event and attempt once, in order; a token
// is refused for another order; page sizes are bounded.
func TestHistoryPages(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-pages", "tok_decline")
	const declines = 7
	for i := range declines {
		s.charge(t, o.GetId(), fmt.Sprintf("checkout-pages-%d", i))
	}
	store := postgres.NewStore(s.pool)
	stored, err := store.Order(ctx, order.AnyMerchant, o.GetId())
	if err != nil {
		t.Fatal(err)
	}
	full, fullAttempts, err := store.History(ctx, stored.MerchantID, o.GetId())
	if err != nil || len(full) != 1+2*declines || len(fullAttempts) != declines {
		t.Fatalf("the stored history: %d events, %d attempts, %v", len(full), len(fullAttempts), err)
	}
	var (
		events   []string
		attempts []string
		pages    int
		tok      string
	)
	for {
		h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId(), PageSize: 4, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(h.GetEvents()) > 4 || len(h.GetAttempts()) > 4 || h.GetOrder().GetId() != o.GetId() {
			t.Fatalf("page %d: %d events, %d attempts, order %v", pages, len(h.GetEvents()), len(h.GetAttempts()), h.GetOrder())
		}
		for _, e := range h.GetEvents() {
			events = append(events, e.GetEvent()+"@"+e.GetCreateTime().AsTime().String())
		}
		for _, a := range h.GetAttempts() {
			attempts = append(attempts, a.GetId())
		}
		if tok = h.GetNextPageToken(); tok == "" {
			break
		}
		if pages > 10 {
			t.Fatal("the pages never end")
		}
	}
	var want, wantAttempts []string
	for _, e := range full {
		want = append(want, e.Name+"@"+e.CreatedAt.UTC().String())
	}
	for _, a := range fullAttempts {
		wantAttempts = append(wantAttempts, a.ID)
	}
	if fmt.Sprint(events) != fmt.Sprint(want) || fmt.Sprint(attempts) != fmt.Sprint(wantAttempts) || pages != 4 {
		t.Fatalf("paged history in %d pages:\n%v\n%v\nwant in 4 pages:\n%v\n%v", pages, events, attempts, want, wantAttempts)
	}
	// The default page holds it all; a size beyond the maximum is the maximum.
	for _, size := range []int32{0, 1 << 30} {
		h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId(), PageSize: size})
		if err != nil || len(h.GetEvents()) != len(full) || h.GetNextPageToken() != "" {
			t.Fatalf("page size %d: %d events, token %q, %v", size, len(h.GetEvents()), h.GetNextPageToken(), err)
		}
	}
	first, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId(), PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page of one: %v %v", first, err)
	}
	other := s.create(t, "order-pages-other", "tok_ok")
	for _, req := range []*settlev1.GetOrderHistoryRequest{
		{OrderId: other.GetId(), PageToken: first.GetNextPageToken()},
		{OrderId: o.GetId(), PageToken: "not-a-token"},
		{OrderId: o.GetId(), PageSize: -1},
	} {
		_, err := s.ops.GetOrderHistory(ctx, req)
		wantCode(t, err, codes.InvalidArgument)
	}
}

// TestCardNumbersAndRequestIDsRefused: card numbers as a person writes
// them (beside an expiry date, grouped, in a sentence, fullwidth), in every field of the charge path, are INVALID_ARGUMENT
// and nothing is stored; a request_id's length counts characters, and a
// blank one is refused.
func TestCardNumbersAndRequestIDsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "order-cards", "tok_ok")
	money := &settlev1.Money{Currency: "GBP", AmountMinor: 100}
	for _, pan := range []string{"4242424242424242 1228 123", "card: 4242-4242-4242-4242 12/28", "order 1001 paid with 4242.4242.4242.4242",
		"\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12"} {
		for name, call := range map[string]func() error{
			"CreateOrder reference": func() error {
				_, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: pan, Amount: money, PaymentMethod: "tok_ok"})
				return err
			},
			"CreateOrder payment method": func() error {
				_, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "order-card-pm", Amount: money, PaymentMethod: pan})
				return err
			},
			"ChargeOrder request_id": func() error {
				_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: pan})
				return err
			},
			"ChargeOrder payment method": func() error {
				_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "card-req-1", PaymentMethod: pan})
				return err
			},
			"CreateAndChargeOrder request_id": func() error {
				_, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "order-card-cc",
					Amount: money, PaymentMethod: "tok_ok", RequestId: pan})
				return err
			},
			"CancelOrder reason": func() error {
				_, err := s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: o.GetId(), Reason: pan})
				return err
			},
		} {
			err := call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "looks like a card number") ||
				strings.Contains(status.Convert(err).Message(), "4242") {
				t.Errorf("%s %q: %v, want InvalidArgument saying it looks like a card number", name, pan, err)
			}
		}
	}
	for _, id := range []string{"ééééééé", "        ", "\u3000\u3000\u3000\u3000\u3000\u3000\u3000\u3000"} {
		_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: id})
		wantCode(t, err, codes.InvalidArgument)
	}
	if n := s.count(t, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM charge_attempts) + (SELECT count(*) FROM order_events)`); n != 2 {
		t.Fatalf("%d rows, want 2 (the order and its creation)", n)
	}
	// Eight characters are enough, however many bytes they take.
	if _, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "éééééééé"}); err != nil {
		t.Fatalf("an 8-character request_id: %v", err)
	}
}
