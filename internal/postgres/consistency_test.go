package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// The replay races: a client that retries quickly sends the same request
// many times while the first is claimed and settled. Each reply names an
// order and the attempt (or refund) its request id made, and must show
// both as they stood at one moment. The statements once read the order
// after waiting for the settle's lock but the attempt or refund from their
// own snapshot, which predated the settle: a refund REFUNDING beside an
// order with nothing refunding, or an attempt in flight beside a PAID
// order. The tests run the race itself, many times over, and check every
// reply.

const (
	replayRounds  = 40
	replayClients = 6
)

// replayRace runs round rounds of: replayClients clients each send their
// request in a loop (send), the one whose request claims settles it
// (settle), and every client stops after its first reply that follows the
// settle. check judges each reply and returns what is wrong with it, or
// "". It returns the replies checked and the first few faults.
func replayRace(t *testing.T, send func(round int) (claimed bool, reply any, err error), settle func(round int, reply any) error,
	check func(reply any) string) (int, []string) {
	t.Helper()
	var (
		mu      sync.Mutex
		replies int
		faults  []string
	)
	for round := range replayRounds {
		var (
			settled = make(chan struct{})
			once    sync.Once
			wg      sync.WaitGroup
		)
		for range replayClients {
			wg.Go(func() {
				for range 10000 {
					// Read before the send: a reply that follows the settle
					// ends this client.
					after := isClosed(settled)
					claimed, reply, err := send(round)
					if err != nil {
						t.Error(err)
						once.Do(func() { close(settled) })
						return
					}
					if claimed {
						if err := settle(round, reply); err != nil {
							t.Error(err)
						}
						once.Do(func() { close(settled) })
						continue
					}
					mu.Lock()
					replies++
					if f := check(reply); f != "" && len(faults) < 5 {
						faults = append(faults, fmt.Sprintf("round %d: %s", round, f))
					}
					mu.Unlock()
					if after {
						return
					}
					select {
					case <-settled:
					case <-time.After(200 * time.Microsecond):
					}
				}
				t.Error("no reply followed the settle")
			})
		}
		wg.Wait()
		if t.Failed() {
			break
		}
	}
	return replies, faults
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// testRefundReplayRepliesAreConsistent: the same refund request sent
// again and again while the first claims and settles it; every reply
// shows the refund and the order at one moment.
func testRefundReplayRepliesAreConsistent(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	orders := make([]order.Order, replayRounds)
	for i := range orders {
		o, err := s.CreateOrder(ctx, newOrder(fmt.Sprintf("refund-replay-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		orders[i] = o
	}
	if _, err := pool.Exec(ctx, `UPDATE orders SET state = 'PAID'`); err != nil {
		t.Fatal(err)
	}
	const amount = 300
	n, faults := replayRace(t,
		func(round int) (bool, any, error) {
			o := orders[round]
			c := refundClaimOf(o, fmt.Sprintf("refund-replay-%d", round), amount)
			c.RefundID = order.RefundID(o.MerchantID, o.ID, c.RequestID)
			r, err := s.ClaimRefund(ctx, c)
			return r.Claimed, r, err
		},
		func(_ int, reply any) error {
			r := reply.(order.RefundClaimResult)
			st := order.RefundSettlementFor(r.Order.MerchantID, r.Refund.OrderID, r.Refund.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_1"}, time.Minute)
			st.Actor = order.ActorAPI
			_, _, ok, err := s.SettleRefund(ctx, st)
			if err == nil && !ok {
				err = fmt.Errorf("the settle of refund %s did not hold its guard", r.Refund.ID)
			}
			return err
		},
		func(reply any) string {
			r := reply.(order.RefundClaimResult)
			o, rf := r.Order, r.Refund
			switch {
			case rf == nil:
				return fmt.Sprintf("no refund beside the order %s (refunding %d)", o.State, o.Refunding)
			case rf.State == order.RefundRefunding && o.Refunding < amount:
				return fmt.Sprintf("refund REFUNDING beside the order %s with %d refunding, %d refunded", o.State, o.Refunding, o.Refunded)
			case rf.State == order.RefundSucceeded && (o.Refunded != amount || o.Refunding != 0 || o.State != order.StatePartiallyRefunded):
				return fmt.Sprintf("refund SUCCEEDED beside the order %s with %d refunding, %d refunded", o.State, o.Refunding, o.Refunded)
			case rf.State != order.RefundRefunding && rf.State != order.RefundSucceeded:
				return fmt.Sprintf("refund %s", rf.State)
			}
			return ""
		})
	if len(faults) > 0 {
		t.Fatalf("%d replies, contradictions (first %d):\n%s", n, len(faults), strings.Join(faults, "\n"))
	}
	t.Logf("%d replies, each one moment's truth", n)
}

// testChargeReplayRepliesAreConsistent: the same charge request sent
// again and again while the first claims and settles it (PAID); every
// reply shows the attempt and the order at one moment.
func testChargeReplayRepliesAreConsistent(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	orders := make([]order.Order, replayRounds)
	for i := range orders {
		o, err := s.CreateOrder(ctx, newOrder(fmt.Sprintf("charge-replay-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		orders[i] = o
	}
	n, faults := replayRace(t,
		func(round int) (bool, any, error) {
			o := orders[round]
			c := claimOf(o, fmt.Sprintf("charge-replay-%d", round))
			c.AttemptID = order.AttemptID(o.MerchantID, o.ID, c.RequestID)
			r, err := s.Claim(ctx, c)
			return r.Claimed, r, err
		},
		func(_ int, reply any) error {
			r := reply.(order.ClaimResult)
			st := order.Settlement{MerchantID: r.Order.MerchantID, OrderID: r.Order.ID, AttemptID: r.Attempt.ID,
				Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, Event: order.EventSucceed,
				To: order.StatePaid, Actor: order.ActorAPI}
			_, ok, err := s.Settle(ctx, st)
			if err == nil && !ok {
				err = fmt.Errorf("the settle of attempt %s did not hold its guard", r.Attempt.ID)
			}
			return err
		},
		func(reply any) string {
			r := reply.(order.ClaimResult)
			o, a := r.Order, r.Attempt
			switch {
			case a == nil:
				return fmt.Sprintf("no attempt beside the order %s", o.State)
			case a.Outcome == "" && (o.State != order.StateCharging || o.CurrentAttempt != a.ID):
				return fmt.Sprintf("attempt in flight beside the order %s (current attempt %s)", o.State, o.CurrentAttempt)
			case a.Outcome == order.OutcomeSucceeded && (o.State != order.StatePaid || a.GatewayChargeID != "ch_1"):
				return fmt.Sprintf("attempt succeeded (charge %q) beside the order %s", a.GatewayChargeID, o.State)
			case o.State == order.StatePaid && a.Outcome != order.OutcomeSucceeded:
				return fmt.Sprintf("order PAID beside the attempt's outcome %q", a.Outcome)
			case a.Outcome != "" && a.Outcome != order.OutcomeSucceeded:
				return fmt.Sprintf("attempt %s", a.Outcome)
			}
			return ""
		})
	if len(faults) > 0 {
		t.Fatalf("%d replies, contradictions (first %d):\n%s", n, len(faults), strings.Join(faults, "\n"))
	}
	t.Logf("%d replies, each one moment's truth", n)
}
