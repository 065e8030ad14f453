package grpcapi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// watchHub wakes WatchOrder streams when their order changes. The server
// feeds it from the database's notifications (see Server.Notify).
type watchHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func (h *watchHub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[chan struct{}]struct{}{}
	}
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// wake wakes the watchers of one order, or of every order when id is "".
func (h *watchHub) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sid, chans := range h.subs {
		if id != "" && sid != id {
			continue
		}
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default: // already woken
			}
		}
	}
}

// Watcher registers interest in a merchant's order's changes, so that the
// database reports them, until the returned function is called. An order
// the merchant may not see is order.ErrNotFound and registers nothing.
type Watcher interface {
	Watch(ctx context.Context, merchantID, orderID string) (func(), error)
}

// DefaultWatchLifetime is how long a WatchOrder stream runs at most when
// Options.WatchLifetime is not set.
const DefaultWatchLifetime = 10 * time.Minute

// watchRecheck is how often a stream looks again without a notification, in
// case one was lost while the listener reconnected.
const watchRecheck = 30 * time.Second

func (s *orderServer) WatchOrder(req *settlev1.WatchOrderRequest, stream settlev1.OrderService_WatchOrderServer) error {
	ctx := stream.Context()
	id := canonicalID(req.GetOrderId())
	if err := order.CheckID("order_id", id); err != nil {
		return toStatus(ctx, s.log, err)
	}
	woken, cancel := s.hub.subscribe(id)
	defer cancel()
	unwatch, err := s.watcher.Watch(ctx, merchant(ctx), id)
	if err != nil {
		return toStatus(ctx, s.log, fieldName(err, "order_id"))
	}
	defer unwatch()
	// A stream ends, with status OK, after its lifetime even if its order is
	// not terminal: a client that has not seen a terminal state watches
	// again. Long-lived streams would otherwise pin their connection and
	// the key's watch slots for as long as an order stays open.
	lifetime := time.NewTimer(s.watchLifetime)
	defer lifetime.Stop()
	var last *settlev1.Order
	for {
		o, err := s.svc.Get(ctx, order.ForMerchant(merchant(ctx)), id)
		if err != nil {
			return toStatus(ctx, s.log, fieldName(err, "order_id"))
		}
		if p := orderToProto(o); !proto.Equal(p, last) {
			if err := stream.Send(&settlev1.WatchOrderResponse{Order: p}); err != nil {
				return err
			}
			last = p
		}
		if o.State.ChargeSettled() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-lifetime.C:
			return nil
		case <-woken:
		case <-time.After(watchRecheck):
		}
	}
}
