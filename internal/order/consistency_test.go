package order_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/failpoint"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// betweenReads is the store with a hook run once after the next read of
// an order or of a refund: whatever another server or an operator does
// while a reply is being put together.
type betweenReads struct {
	*postgres.Store
	mu   sync.Mutex
	hook func()
}

func (s *betweenReads) arm(hook func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = hook
}

func (s *betweenReads) fire() {
	s.mu.Lock()
	hook := s.hook
	s.hook = nil
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (s *betweenReads) Order(ctx context.Context, scope order.Scope, id string) (order.Order, error) {
	o, err := s.Store.Order(ctx, scope, id)
	s.fire()
	return o, err
}

func (s *betweenReads) Refund(ctx context.Context, merchantID, id string) (order.Refund, error) {
	r, err := s.Store.Refund(ctx, merchantID, id)
	s.fire()
	return r, err
}

// TestLostSettleRepliesAreConsistent: a charge or a refund whose settle
// loses to the reconciler (here: its check gave up, to NEEDS_REVIEW)
// answers with what won, read at one moment, even when an operator
// resolves it while the reply is read. It read the order and the attempt
// (or the refund and the order) one after the other, and answered NEEDS_REVIEW
// beside an attempt that had succeeded, or a refund in review beside an
// order that it had already refunded.
func TestLostSettleRepliesAreConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &betweenReads{Store: postgres.NewStore(postgrestest.Pool(t))}
	hs := httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(hs.Close)
	gw, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu          sync.Mutex
		afterCharge func()
		logs        logtest.Buffer
	)
	svc, err := order.NewService(store, map[string]order.Gateway{"sim": gw}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: gatewayTimeout, Grace: time.Second, FirstRecheck: time.Minute,
		Failpoint: func(name string) {
			mu.Lock()
			f := afterCharge
			mu.Unlock()
			if name == failpoint.AfterGateway && f != nil {
				f()
			}
		},
	}, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	setFailpoint := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		afterCharge = f
	}
	operator := order.Operator("a-ops")

	t.Run("charge", func(t *testing.T) {
		o, err := svc.Create(ctx, merchant, newOrder("lost-charge-settle", "tok_ok"))
		if err != nil {
			t.Fatal(err)
		}
		setFailpoint(func() {
			setFailpoint(nil)
			// The reconciler gives up on the attempt first.
			if _, err := store.Transition(ctx, order.AnyMerchant, o.ID, func(order.Order) (order.Move, error) {
				return order.Move{Event: order.EventEscalate, To: order.StateNeedsReview, Actor: order.ActorReconciler}, nil
			}); err != nil {
				t.Error(err)
			}
			// And an operator resolves it while the reply is read.
			store.arm(func() {
				if _, err := svc.Resolve(ctx, order.AnyMerchant, o.ID, order.EventResolvePaid, "ch_found", "found in the dashboard", operator); err != nil {
					t.Error(err)
				}
			})
		})
		got, a, err := svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "lost-charge-settle-1"})
		store.arm(nil)
		if err != nil || a == nil {
			t.Fatalf("Charge = %+v, %+v, %v", got, a, err)
		}
		if got.State != order.StateNeedsReview && got.State != order.StatePaid {
			t.Fatalf("reply: order %s; want what the reconciler or the operator made it", got.State)
		}
		if (a.Outcome == order.OutcomeSucceeded) != (got.State == order.StatePaid) {
			t.Fatalf("reply: order %s beside its attempt's outcome %q", got.State, a.Outcome)
		}
	})

	t.Run("refund", func(t *testing.T) {
		o, err := svc.Create(ctx, merchant, newOrder("lost-refund-settle", "tok_ok"))
		if err != nil {
			t.Fatal(err)
		}
		if o, _, err = svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "lost-refund-settle-pay"}); err != nil || o.State != order.StatePaid {
			t.Fatalf("Charge = %s, %v; want PAID", o.State, err)
		}
		refundID := order.RefundID(o.MerchantID, o.ID, "lost-refund-settle-1")
		setFailpoint(func() {
			setFailpoint(nil)
			st := order.RefundSettlement{MerchantID: o.MerchantID, OrderID: o.ID, RefundID: refundID, Event: order.EventEscalate,
				To: order.RefundNeedsReview, OrderPartial: order.EventRefundPartial, OrderFull: order.EventRefundFull,
				Actor: order.ActorReconciler}
			if _, _, ok, err := store.SettleRefund(ctx, st); err != nil || !ok {
				t.Errorf("escalate the refund: %v %v", ok, err)
			}
			store.arm(func() {
				if _, _, err := svc.ResolveRefund(ctx, order.AnyMerchant, o.ID, refundID, order.EventResolveSucceeded, "re_found",
					"found in the dashboard", operator); err != nil {
					t.Error(err)
				}
			})
		})
		got, r, err := svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
			order.RefundInput{OrderID: o.ID, RequestID: "lost-refund-settle-1", AmountMinor: 250})
		store.arm(nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != order.RefundNeedsReview && r.State != order.RefundSucceeded {
			t.Fatalf("reply: refund %s; want what the reconciler or the operator made it", r.State)
		}
		inReview := r.State == order.RefundNeedsReview || r.State == order.RefundRefunding
		if inReview != (got.Refunding == r.Amount.AmountMinor) || (r.State == order.RefundSucceeded) != (got.Refunded == r.Amount.AmountMinor) {
			t.Fatalf("reply: refund %s of %d beside the order %s with %d refunding, %d refunded",
				r.State, r.Amount.AmountMinor, got.State, got.Refunding, got.Refunded)
		}
	})
}
