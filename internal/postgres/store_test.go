package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

func newOrder(ref string) order.Order {
	return order.Order{ID: order.NewID(), MerchantID: order.DefaultMerchant, MerchantReference: ref,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Gateway: "sim",
		State: order.StatePending}
}

func claimOf(o order.Order, requestID string) order.Claim {
	return order.Claim{MerchantID: o.MerchantID, OrderID: o.ID, RequestID: requestID, AttemptID: order.NewID(),
		From: order.StatePending, To: order.StateCharging, Event: order.EventCharge, Lease: 15 * time.Second, Actor: "test"}
}

func testCreateOrderIdempotent(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)

	first, err := s.CreateOrder(ctx, newOrder("ref-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.CreateOrder(ctx, newOrder("ref-1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID {
		t.Fatalf("same request made a second order: %s and %s", first.ID, again.ID)
	}
	other := newOrder("ref-1")
	other.Amount.AmountMinor = 999
	var conflict *order.ConflictError
	if _, err := s.CreateOrder(ctx, other); !errors.As(err, &conflict) {
		t.Fatalf("other amount, same reference: got %v, want ConflictError", err)
	}
	var n, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM order_events)`).Scan(&n, &events); err != nil {
		t.Fatal(err)
	}
	if n != 1 || events != 1 {
		t.Fatalf("orders = %d, events = %d; want 1 and 1", n, events)
	}
}

func testClaimConcurrentOneWinner(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("ref-race"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed int
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := "req-same-0"
			if i%2 == 1 {
				req = "req-other-" + string(rune('a'+i))
			}
			res, err := s.Claim(ctx, claimOf(o, req))
			if err != nil {
				t.Error(err)
				return
			}
			if res.Order.State != order.StateCharging {
				t.Errorf("order state after claim = %s", res.Order.State)
			}
			if res.Claimed {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
			if req == "req-same-0" && res.Attempt == nil && !res.Claimed {
				// Whoever lost with the same request id must see the winner's attempt,
				// unless a different request id won.
				var winner string
				if err := pool.QueryRow(ctx, `SELECT request_id FROM charge_attempts`).Scan(&winner); err != nil {
					t.Error(err)
				}
				if winner == req {
					t.Errorf("replay of the winning request id returned no attempt")
				}
			}
		}()
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("claimed %d times, want 1", claimed)
	}
	var attempts, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM charge_attempts), (SELECT count(*) FROM order_events WHERE event = 'charge')`).Scan(&attempts, &events); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || events != 1 {
		t.Fatalf("attempts = %d, charge events = %d; want 1 and 1", attempts, events)
	}
}

func testSettleGuard(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o, _ := s.CreateOrder(ctx, newOrder("ref-settle"))
	c, err := s.Claim(ctx, claimOf(o, "req-settle-1"))
	if err != nil || !c.Claimed {
		t.Fatalf("claim: %v %+v", err, c)
	}
	if c.Order.ReconcileAt.IsZero() {
		t.Fatal("claimed order has no reconcile_at")
	}
	st := order.Settlement{MerchantID: order.DefaultMerchant, OrderID: o.ID, AttemptID: c.Attempt.ID, Event: order.EventSucceed, To: order.StatePaid,
		Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, Actor: "test"}
	got, ok, err := s.Settle(ctx, st)
	if err != nil || !ok || got.State != order.StatePaid {
		t.Fatalf("settle: %v %v %s", err, ok, got.State)
	}
	if _, ok, err := s.Settle(ctx, st); err != nil || ok {
		t.Fatalf("second settle: ok=%v err=%v, want guard to refuse", ok, err)
	}
	a, err := s.Attempt(ctx, order.DefaultMerchant, c.Attempt.ID)
	if err != nil || a.Outcome != order.OutcomeSucceeded || a.GatewayChargeID != "ch_1" {
		t.Fatalf("attempt = %+v, %v", a, err)
	}
	// A new request on a PAID order claims nothing.
	c2, err := s.Claim(ctx, claimOf(o, "req-settle-2"))
	if err != nil || c2.Claimed || c2.Attempt != nil || c2.Order.State != order.StatePaid {
		t.Fatalf("claim on PAID: %v %+v", err, c2)
	}
}

// testClaimWaitingForSettle: a claim that waits for the previous attempt's
// settle (CHARGING → PENDING) claims the order it then finds PENDING. A
// guard re-checked against the statement's snapshot once left the new
// attempt inserted but the order unclaimed.
func testClaimWaitingForSettle(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, _ := s.CreateOrder(ctx, newOrder("ref-wait"))
	first, err := s.Claim(ctx, claimOf(o, "req-wait-1"))
	if err != nil || !first.Claimed {
		t.Fatalf("first claim: %v %+v", err, first)
	}
	// Hold the row in a settle that has not committed yet.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET state = 'PENDING', reconcile_at = NULL WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan order.ClaimResult, 1)
	go func() {
		c, err := s.Claim(ctx, claimOf(o, "req-wait-2"))
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	waitForLockWaiters(t, pool, 1) // the claim is waiting for the row
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-done
	if !c.Claimed || c.Order.State != order.StateCharging || c.Order.CurrentAttempt != c.Attempt.ID {
		t.Fatalf("claim after the settle: claimed=%v state=%s current=%s attempt=%+v", c.Claimed, c.Order.State, c.Order.CurrentAttempt, c.Attempt)
	}
}

func testCreateClaimed(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o := newOrder("ref-one-call")
	c := claimOf(o, "req-one-call")
	c.Customer = "cus_OneCall42"
	got, a, ok, err := s.CreateClaimed(ctx, o, c)
	if err != nil || !ok || got.State != order.StateCharging || got.CurrentAttempt != a.ID || a.RequestID != "req-one-call" ||
		a.Customer != c.Customer {
		t.Fatalf("create claimed: %v %v %+v %+v", err, ok, got, a)
	}
	if stored, err := s.Attempt(ctx, o.MerchantID, a.ID); err != nil || stored.Customer != c.Customer {
		t.Fatalf("stored attempt %+v, %v; want customer %s", stored, err, c.Customer)
	}
	// The reference taken, or the request id taken: nothing written.
	if _, _, ok, err := s.CreateClaimed(ctx, newOrder("ref-one-call"), claimOf(o, "req-other")); ok || err != nil {
		t.Fatalf("taken reference: ok=%v err=%v", ok, err)
	}
	var conflict *order.ConflictError
	if _, _, ok, err := s.CreateClaimed(ctx, newOrder("ref-other"), claimOf(o, "req-one-call")); ok || !errors.As(err, &conflict) {
		t.Fatalf("taken request id: ok=%v err=%v, want a conflict", ok, err)
	}
	var orders, attempts, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM charge_attempts), (SELECT count(*) FROM order_events)`).Scan(&orders, &attempts, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || attempts != 1 || events != 2 {
		t.Fatalf("orders=%d attempts=%d events=%d, want 1, 1, 2", orders, attempts, events)
	}
}

// testScope: a merchant's scope reaches its own orders only, the operators'
// scope reaches every merchant's, and the zero scope reaches none, for
// reads and for transitions alike.
func testScope(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o, err := s.CreateOrder(ctx, newOrder("ref-scope"))
	if err != nil {
		t.Fatal(err)
	}
	cancel := func(order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: order.ActorAPI}, nil
	}
	for _, tc := range []struct {
		name  string
		scope order.Scope
		found bool
	}{
		{"zero", order.Scope{}, false},
		{"empty merchant", order.ForMerchant(""), false},
		{"other merchant", order.ForMerchant("someone-else"), false},
		{"its merchant", order.ForMerchant(o.MerchantID), true},
		{"any merchant", order.AnyMerchant, true},
	} {
		got, err := s.Order(ctx, tc.scope, o.ID)
		if tc.found && (err != nil || got.ID != o.ID) {
			t.Errorf("%s: Order = %s, %v; want the order", tc.name, got.ID, err)
		}
		if !tc.found {
			if !errors.Is(err, order.ErrNotFound) {
				t.Errorf("%s: Order = %s, %v; want ErrNotFound", tc.name, got.ID, err)
			}
			if _, err := s.Transition(ctx, tc.scope, o.ID, cancel); !errors.Is(err, order.ErrNotFound) {
				t.Errorf("%s: Transition: %v; want ErrNotFound", tc.name, err)
			}
		}
	}
	if got, err := s.Transition(ctx, order.AnyMerchant, o.ID, cancel); err != nil || got.State != order.StateCanceled {
		t.Errorf("Transition with AnyMerchant: %s, %v; want CANCELED", got.State, err)
	}
}

// testClaimOrder: an operator's lease of one order takes a CHARGING order
// with its current attempt, and reports false for any other state or id.
func testClaimOrder(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	charging, att := chargingOrder(t, s, "ref-claim-order")
	pending, err := s.CreateOrder(ctx, newOrder("ref-claim-order-pending"))
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := s.ClaimOrder(ctx, charging.ID, time.Minute)
	if err != nil || !ok || d.Order.ID != charging.ID || d.Attempt.ID != att || d.AttemptAge < 0 ||
		time.Until(d.Order.ReconcileAt) < 50*time.Second {
		t.Errorf("ClaimOrder(CHARGING) = %+v, %v, %v; want it leased for a minute with its attempt", d, ok, err)
	}
	for _, id := range []string{pending.ID, order.NewID()} {
		if d, ok, err := s.ClaimOrder(ctx, id, time.Minute); err != nil || ok || d.Order.ID != "" {
			t.Errorf("ClaimOrder(%s) = %+v, %v, %v; want nothing", id, d, ok, err)
		}
	}
}
