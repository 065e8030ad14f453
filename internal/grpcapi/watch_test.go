package grpcapi_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

func TestWatchOrderFollowsToTerminal(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	o := s.create(t, "order-watch", "tok_timeout")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: o.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() settlev1.OrderState {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		return resp.GetOrder().GetState()
	}
	if st := recv(); st != pending {
		t.Fatalf("first message %s, want PENDING", st)
	}
	s.charge(t, o.GetId(), "checkout-watch-1") // times out: CHARGING
	if st := recv(); st != charging {
		t.Fatalf("after charge %s, want CHARGING", st)
	}
	if _, err := s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: o.GetId()}); err != nil {
		t.Fatal(err)
	}
	if st := recv(); st != paid {
		t.Fatalf("after reconcile %s, want PAID", st)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream after a terminal state: %v, want EOF", err)
	}
}

// TestUpperCaseIDs checks that ids are normalized at the edge: an order id
// in upper case names the same order everywhere, a charge retried with it
// is a replay, and a watch with it is woken by the order's notifications
// (which name it in lower case) rather than by its next periodic recheck,
// 30 s later.
func TestUpperCaseIDs(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	o := s.create(t, "order-upper", "tok_timeout")
	upper := strings.ToUpper(o.GetId())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: upper})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.GetOrder().GetId() != o.GetId() || resp.GetOrder().GetState() != pending {
		t.Fatalf("first message %v %v, want the order PENDING", resp, err)
	}
	first, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: upper, RequestId: "upper-req-1"})
	if err != nil || first.GetOrder().GetState() != charging {
		t.Fatalf("charge: %v %v, want CHARGING", first, err)
	}
	again, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: upper, RequestId: "upper-req-1"})
	if err != nil || again.GetAttempt().GetId() != first.GetAttempt().GetId() {
		t.Fatalf("the same charge again: %v %v, want a replay of attempt %s", again, err, first.GetAttempt().GetId())
	}
	if resp, err := stream.Recv(); err != nil || resp.GetOrder().GetState() != charging {
		t.Fatalf("after the charge: %v %v, want CHARGING (was the watch woken?)", resp, err)
	}
	for _, get := range []func() (*settlev1.Order, error){
		func() (*settlev1.Order, error) {
			r, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: upper}})
			return r.GetOrder(), err
		},
		func() (*settlev1.Order, error) {
			r, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: upper})
			return r.GetOrder(), err
		},
		func() (*settlev1.Order, error) {
			r, err := s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: upper})
			return r.GetOrder(), err
		},
	} {
		if got, err := get(); err != nil || got.GetId() != o.GetId() {
			t.Fatalf("by the upper-case id: %v %v", got, err)
		}
	}
}
