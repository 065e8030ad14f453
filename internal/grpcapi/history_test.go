package grpcapi_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// TestOrderHistoryIsOneMoment: an operator's GetOrderHistory, asked again
// and again while refunds of the order are claimed and settled, shows the
// order, its events and its refunds as they stood at one moment. Read one
// after the other, they showed refunds that the order's totals did not
// count yet, or an order whose last event was not its state.
func TestOrderHistoryIsOneMoment(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "history-moment", "tok_ok")
	s.charge(t, o.GetId(), "history-moment-charge")

	const refunds = 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range refunds {
			if _, err := s.orders.RefundOrder(ctx, &settlev1.RefundOrderRequest{OrderId: o.GetId(),
				RequestId: fmt.Sprintf("history-moment-%d", i), AmountMinor: 10}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var faults []string
	replies := 0
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: o.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		replies++
		var inFlight, succeeded int64
		for _, r := range h.GetRefunds() {
			switch r.GetState() {
			case settlev1.RefundState_REFUND_STATE_SUCCEEDED:
				succeeded += r.GetAmount().GetAmountMinor()
			case settlev1.RefundState_REFUND_STATE_FAILED:
			default:
				inFlight += r.GetAmount().GetAmountMinor()
			}
		}
		got := h.GetOrder()
		events := h.GetEvents()
		last := events[len(events)-1].GetToState()
		if inFlight != got.GetRefunding().GetAmountMinor() || succeeded != got.GetRefunded().GetAmountMinor() || last != got.GetState() {
			if len(faults) < 5 {
				faults = append(faults, fmt.Sprintf("order %s refunding %d refunded %d, last event to %s; refunds in flight %d, succeeded %d",
					got.GetState(), got.GetRefunding().GetAmountMinor(), got.GetRefunded().GetAmountMinor(), last, inFlight, succeeded))
			}
		}
	}
	wg.Wait()
	if len(faults) > 0 {
		t.Fatalf("%d replies, contradictions (first %d): %q", replies, len(faults), faults)
	}
	t.Logf("%d replies, each one moment's truth", replies)
}
