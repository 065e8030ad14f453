package grpcapi_test

import (
	"context"
	"errors"
	"io"
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
