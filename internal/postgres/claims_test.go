package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// testClaimManyFailsOnlyItsRow: in one grouped claim, a row whose order is
// not PENDING, whose request id already names another order's attempt,
// whose request id another row of the group takes first, or whose order
// does not exist is refused alone; the other rows are claimed, each with
// its own attempt and event.
func testClaimManyFailsOnlyItsRow(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	create := func(ref string) order.Order {
		o, err := s.CreateOrder(ctx, newOrder(ref))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	fresh, charging, reused, first, second, other := create("fresh"), create("charging"), create("reused"),
		create("first"), create("second"), create("other")
	if c, err := s.Claim(ctx, claimOf(charging, "req-before")); err != nil || !c.Claimed {
		t.Fatalf("claim before: %+v %v", c, err)
	}
	if c, err := s.Claim(ctx, claimOf(other, "req-taken")); err != nil || !c.Claimed {
		t.Fatalf("claim before: %+v %v", c, err)
	}
	missing := newOrder("missing")

	cs := []order.Claim{
		claimOf(fresh, "req-fresh"),
		claimOf(charging, "req-charging"), // not PENDING
		claimOf(reused, "req-taken"),      // names other's attempt
		claimOf(first, "req-shared"),
		claimOf(second, "req-shared"), // the row before takes it
		claimOf(missing, "req-missing"),
	}
	res, errs, err := s.ClaimMany(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	claimed := make([]bool, len(res))
	for i, r := range res {
		claimed[i] = r.Claimed
	}
	if want := []bool{true, false, false, true, false, false}; fmt.Sprint(claimed) != fmt.Sprint(want) {
		t.Fatalf("claimed %v, want %v (errors %v)", claimed, want, errs)
	}
	for i, err := range errs {
		if want := i == 5; want != errors.Is(err, order.ErrNotFound) || (!want && err != nil) {
			t.Errorf("claim %d: error %v", i, err)
		}
	}
	for _, i := range []int{0, 3} {
		r := res[i]
		if r.Order.State != order.StateCharging || r.Attempt == nil || r.Attempt.ID != cs[i].AttemptID ||
			r.Order.CurrentAttempt != cs[i].AttemptID || r.Attempt.OrderID != cs[i].OrderID {
			t.Errorf("claim %d: %+v %+v", i, r.Order, r.Attempt)
		}
		evs, atts, err := s.History(ctx, order.DefaultMerchant, cs[i].OrderID)
		if err != nil || len(evs) != 2 || evs[1].Name != string(order.EventCharge) || evs[1].AttemptID != cs[i].AttemptID || len(atts) != 1 {
			t.Errorf("claim %d: history %+v %+v %v", i, evs, atts, err)
		}
	}
	if r := res[1]; r.Order.State != order.StateCharging || r.Order.CurrentAttempt == cs[1].AttemptID || r.Attempt != nil {
		t.Errorf("claim of a CHARGING order: %+v %+v", r.Order, r.Attempt)
	}
	if r := res[2]; r.Order.State != order.StatePending || r.Attempt == nil || r.Attempt.OrderID != other.ID {
		t.Errorf("claim with another order's request id: %+v %+v", r.Order, r.Attempt)
	}
	if r := res[4]; r.Order.State != order.StatePending || r.Attempt == nil || r.Attempt.OrderID != first.ID {
		t.Errorf("claim with a request id taken in the group: %+v %+v", r.Order, r.Attempt)
	}
	for _, o := range []order.Order{reused, second} {
		if _, atts, err := s.History(ctx, order.DefaultMerchant, o.ID); err != nil || len(atts) != 0 {
			t.Errorf("order %s has attempts %+v (%v)", o.MerchantReference, atts, err)
		}
	}
	// A replay of the group claims nothing more and names the same attempts.
	again, _, err := s.ClaimMany(ctx, cs[:5])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if r.Claimed || (res[i].Attempt != nil) != (r.Attempt != nil) || (r.Attempt != nil && r.Attempt.ID != res[i].Attempt.ID) {
			t.Errorf("replay of claim %d: %+v %+v", i, r.Order, r.Attempt)
		}
	}
}

// testCreateOrdersGrouped: a grouped create makes the new orders and finds
// the ones whose reference was taken, each with its own result.
func testCreateOrdersGrouped(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	before, err := s.CreateOrder(ctx, newOrder("taken"))
	if err != nil {
		t.Fatal(err)
	}
	news := []order.Order{newOrder("a"), newOrder("taken"), newOrder("b")}
	got, isNew, err := s.CreateOrders(ctx, news)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(isNew) != "[true false true]" || got[0].ID != news[0].ID || got[1].ID != before.ID || got[2].ID != news[2].ID {
		t.Fatalf("created %v: %+v", isNew, got)
	}
	for _, o := range []order.Order{got[0], got[2]} {
		if evs, _, err := s.History(ctx, order.DefaultMerchant, o.ID); err != nil || len(evs) != 1 || evs[0].Name != string(order.EventCreate) {
			t.Errorf("order %s: history %+v %v", o.MerchantReference, evs, err)
		}
	}
	if _, _, err := s.CreateOrders(ctx, []order.Order{newOrder("c"), newOrder("c")}); err == nil {
		t.Error("a group with one reference twice was accepted")
	}
}

// testConcurrentClaimsGrouped: many concurrent claims and creates through
// the store's batchers (grouped while one statement is in flight) each get
// their own answer: every order is created once and claimed once, by one of
// the two requests that race for it.
func testConcurrentClaimsGrouped(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	const n = 40
	orders := make([]order.Order, n)
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			o, err := s.CreateOrder(ctx, newOrder(fmt.Sprintf("ref-%d", i)))
			if err != nil {
				t.Error(err)
			}
			orders[i] = o
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var (
		mu   sync.Mutex
		wins = map[string]int{}
	)
	for i := range 2 * n {
		wg.Go(func() {
			o := orders[i%n]
			c, err := s.Claim(ctx, claimOf(o, fmt.Sprintf("req-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			if c.Claimed {
				mu.Lock()
				wins[o.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, o := range orders {
		if wins[o.ID] != 1 {
			t.Errorf("order %s claimed %d times", o.MerchantReference, wins[o.ID])
		}
	}
}

// testCreateClaimedFailsOnlyItsOrder: of concurrent CreateClaimed calls
// (grouped while a statement is in flight), the one whose request id
// another order's attempt holds fails alone with a conflict and creates
// nothing; one whose reference is taken creates nothing; the others are
// created and claimed.
func testCreateClaimedFailsOnlyItsOrder(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	taken, err := s.CreateOrder(ctx, newOrder("taken-ref"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, claimOf(taken, "req-taken")); err != nil || !c.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	const n = 24
	type result struct {
		o       order.Order
		a       order.Attempt
		created bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for round := range 3 { // several rounds, so that some calls meet in a group
		for i := range n {
			wg.Go(func() {
				ref, req := fmt.Sprintf("ref-%d-%d", round, i), fmt.Sprintf("req-%d-%d", round, i)
				switch i {
				case 0:
					req = "req-taken"
				case 1:
					ref = "taken-ref"
				}
				o := newOrder(ref)
				c := claimOf(o, req)
				c.AttemptID = order.AttemptID(o.MerchantID, o.ID, req)
				var r result
				r.o, r.a, r.created, r.err = s.CreateClaimed(ctx, o, c)
				results[i] = r
			})
		}
		wg.Wait()
		for i, r := range results {
			var conflict *order.ConflictError
			switch {
			case i == 0:
				if !errors.As(r.err, &conflict) || r.created {
					t.Errorf("round %d: a taken request id: %+v", round, r)
				}
			case i == 1:
				if r.err != nil || r.created {
					t.Errorf("round %d: a taken reference: %+v", round, r)
				}
			case r.err != nil || !r.created || r.o.State != order.StateCharging || r.a.OrderID != r.o.ID ||
				r.o.CurrentAttempt != r.a.ID:
				t.Errorf("round %d, order %d: %+v", round, i, r)
			}
		}
	}
	if _, err := s.OrderByReference(ctx, order.DefaultMerchant, "ref-0-0"); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("the conflicting call left an order: %v", err)
	}
}
