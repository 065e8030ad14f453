package order_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// paid creates an order of 1250 GBP with token and charges it to PAID.
func (f *fixture) paid(t *testing.T, ref, token string) order.Order {
	t.Helper()
	o := f.create(t, ref, token)
	if o, _ = f.charge(t, o.ID, "charge-"+ref); o.State != order.StatePaid {
		t.Fatalf("charge: order %s, want PAID", o.State)
	}
	return o
}

func (f *fixture) refund(t *testing.T, orderID, requestID string, amount int64) (order.Order, order.Refund) {
	t.Helper()
	o, r, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: orderID, RequestID: requestID, AmountMinor: amount})
	if err != nil {
		t.Fatalf("Refund(%s, %s, %d): %v", orderID, requestID, amount, err)
	}
	return o, r
}

// makeRefundsDue makes every REFUNDING refund due for the reconciler now.
func (f *fixture) makeRefundsDue(t *testing.T) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `UPDATE refunds SET reconcile_at = now() WHERE state = 'REFUNDING'`); err != nil {
		t.Fatal(err)
	}
}

func wantLimit(t *testing.T, err error, left int64) {
	t.Helper()
	var l *order.RefundLimitError
	if !errors.As(err, &l) || l.Left != left {
		t.Fatalf("got %v, want a *RefundLimitError with %d left", err, left)
	}
}

func TestRefundPartialThenRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-partial", "tok_ok")

	o, r := f.refund(t, o.ID, "refund-1", 500)
	if r.State != order.RefundSucceeded || r.Amount.AmountMinor != 500 || o.State != order.StatePartiallyRefunded ||
		o.Refunded != 500 || o.Refunding != 0 {
		t.Fatalf("first refund: refund %s %d, order %s refunded %d refunding %d", r.State, r.Amount.AmountMinor,
			o.State, o.Refunded, o.Refunding)
	}
	// No amount: the rest.
	o, r = f.refund(t, o.ID, "refund-2", 0)
	if r.State != order.RefundSucceeded || r.Amount.AmountMinor != 750 || o.State != order.StateRefunded || o.Refunded != 1250 {
		t.Fatalf("rest: refund %s %d, order %s refunded %d", r.State, r.Amount.AmountMinor, o.State, o.Refunded)
	}
	_, _, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "refund-3", AmountMinor: 1})
	var se *order.StateError
	if !errors.As(err, &se) || se.Current != order.StateRefunded {
		t.Fatalf("refund of a REFUNDED order: %v, want a *StateError", err)
	}
	_, attempts := f.history(t, o.ID)
	if got := f.sim.Refunded(attempts[0].ID); got != 1250 {
		t.Fatalf("gateway refunded %d, want 1250", got)
	}
	events, _ := f.history(t, o.ID)
	last := events[len(events)-2:]
	if last[0].To != order.StatePartiallyRefunded || last[1].To != order.StateRefunded || last[1].RefundID != r.ID {
		t.Fatalf("order history ends %+v", last)
	}
	refunds, revents, err := f.store.Refunds(context.Background(), merchant, o.ID)
	if err != nil || len(refunds) != 2 || len(revents) != 6 {
		t.Fatalf("refunds %d, refund events %d, %v; want 2 and 6 (create, refund, succeed each)", len(refunds), len(revents), err)
	}
}

func TestRefundReplayAndConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-replay", "tok_ok")
	_, first := f.refund(t, o.ID, "refund-a", 300)
	o2, again := f.refund(t, o.ID, "refund-a", 300)
	if again.ID != first.ID || again.State != order.RefundSucceeded || o2.Refunded != 300 {
		t.Fatalf("replay: refund %s %s, order refunded %d; want %s SUCCEEDED, 300", again.ID, again.State, o2.Refunded, first.ID)
	}
	if n := len(f.sim.Refunds()); n != 1 {
		t.Fatalf("gateway saw %d refunds, want 1", n)
	}
	for _, in := range []order.RefundInput{
		{OrderID: o.ID, RequestID: "refund-a", AmountMinor: 301},
		{OrderID: o.ID, RequestID: "refund-a", AmountMinor: 0},
		{OrderID: o.ID, RequestID: "refund-a", AmountMinor: 300, Reason: "other"},
		{OrderID: f.paid(t, "refund-replay-2", "tok_ok").ID, RequestID: "refund-a", AmountMinor: 300},
	} {
		_, _, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI, in)
		_ = wantConflict(t, err)
	}
}

func TestRefundOfUnpaidOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.create(t, "refund-unpaid", "tok_ok")
	_, _, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "refund-unpaid", AmountMinor: 100})
	var se *order.StateError
	if !errors.As(err, &se) || se.Current != order.StatePending {
		t.Fatalf("got %v, want a *StateError naming PENDING", err)
	}
	if n := f.count(t, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds stored, want 0", n)
	}
	// Another merchant's order is not found.
	_, _, err = f.svc.Refund(context.Background(), order.ForMerchant("other"), order.ActorAPI,
		order.RefundInput{OrderID: f.paid(t, "refund-theirs", "tok_ok").ID, RequestID: "refund-theirs"})
	if !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another merchant's order: %v, want ErrNotFound", err)
	}
}

// TestRefundConcurrentOverRefund: twelve refunds of 300 race for an order
// of 1250; exactly the four that fit succeed, and the others are told
// what is left.
func TestRefundConcurrentOverRefund(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-race", "tok_ok")
	// Twelve claims of one order row: a deadline far past their waits, as
	// this test waits for no timeout.
	svc := f.service(t, order.Config{GatewayTimeout: 15 * time.Second})
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		ok, refused    int
		unexpectedErrs []error
	)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, r, err := svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
				order.RefundInput{OrderID: o.ID, RequestID: fmt.Sprintf("race-request-%02d", i), AmountMinor: 300})
			mu.Lock()
			defer mu.Unlock()
			var l *order.RefundLimitError
			switch {
			case err == nil && r.State == order.RefundSucceeded:
				ok++
			case errors.As(err, &l) && (l.Left == 50 || l.Left >= 0 && l.Left < 300):
				refused++
			default:
				unexpectedErrs = append(unexpectedErrs, fmt.Errorf("refund %d: %s %w", i, r.State, err))
			}
		}()
	}
	wg.Wait()
	if ok != 4 || refused != 8 || len(unexpectedErrs) > 0 {
		t.Fatalf("%d succeeded, %d refused, %v; want 4 and 8", ok, refused, unexpectedErrs)
	}
	got, err := f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
	if err != nil || got.Refunded != 1200 || got.Refunding != 0 || got.State != order.StatePartiallyRefunded {
		t.Fatalf("order refunded %d refunding %d %s, %v; want 1200, 0, PARTIALLY_REFUNDED", got.Refunded, got.Refunding, got.State, err)
	}
	_, attempts := f.history(t, o.ID)
	if n := f.sim.Refunded(attempts[0].ID); n != 1200 {
		t.Fatalf("gateway refunded %d, want 1200", n)
	}
	_, _, err = f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "race-late", AmountMinor: 51})
	wantLimit(t, err, 50)
}

// TestRefundTimeoutReconciledDone: the gateway refunds but the answer
// never comes; the refund stays REFUNDING (never failed on a timeout), its
// amount reserved, and the reconciler finds it done.
func TestRefundTimeoutReconciledDone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-timeout", "tok_refund_timeout")
	o, r := f.refund(t, o.ID, "refund-timeout", 1000)
	if r.State != order.RefundRefunding || o.Refunding != 1000 || o.State != order.StatePaid {
		t.Fatalf("after timeout: refund %s, order %s refunding %d", r.State, o.State, o.Refunding)
	}
	// What is in flight counts: 250 is left, not 1250.
	_, _, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "refund-more", AmountMinor: 251})
	wantLimit(t, err, 250)

	f.makeRefundsDue(t)
	if _, err := f.rec.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Refund(context.Background(), merchant, r.ID)
	if err != nil || got.State != order.RefundSucceeded || got.Actor != order.ActorAPI {
		t.Fatalf("refund after reconcile: %s, %v; want SUCCEEDED", got.State, err)
	}
	o, _ = f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
	if o.State != order.StatePartiallyRefunded || o.Refunded != 1000 || o.Refunding != 0 {
		t.Fatalf("order after reconcile: %s refunded %d refunding %d", o.State, o.Refunded, o.Refunding)
	}
	if n := len(f.sim.Refunds()); n != 1 {
		t.Fatalf("gateway saw %d refunds, want 1: a lookup never refunds", n)
	}
}

// TestRefundFailsLaterReconciledNotDone: the gateway answers "pending" and
// fails the refund later; the reconciler keeps checking while it is
// pending, then settles it FAILED and releases its amount.
func TestRefundFailsLaterReconciledNotDone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-later", "tok_refund_fail_later")
	o, r := f.refund(t, o.ID, "refund-later", 0)
	if r.State != order.RefundRefunding || o.Refunding != 1250 {
		t.Fatalf("pending: refund %s, order refunding %d", r.State, o.Refunding)
	}
	f.makeRefundsDue(t)
	if _, err := f.rec.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.store.Refund(context.Background(), merchant, r.ID); got.State != order.RefundRefunding || got.ReconcileCount != 1 {
		t.Fatalf("while pending: refund %s after %d checks, want REFUNDING after 1", got.State, got.ReconcileCount)
	}
	time.Sleep(sim0Delay)
	f.makeRefundsDue(t)
	if _, err := f.rec.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := f.store.Refund(context.Background(), merchant, r.ID)
	o, _ = f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
	if got.State != order.RefundFailed || o.State != order.StatePaid || o.Refunded != 0 || o.Refunding != 0 {
		t.Fatalf("after failure: refund %s, order %s refunded %d refunding %d", got.State, o.State, o.Refunded, o.Refunding)
	}
	// The amount is free again.
	if _, r := f.refund(t, o.ID, "refund-again", 1250); r.State != order.RefundRefunding {
		t.Fatalf("second refund %s, want REFUNDING (pending again)", r.State)
	}
}

// sim0Delay outlasts the simulator's default delay before a refund that
// fails later fails.
const sim0Delay = 1100 * time.Millisecond

func TestRefundBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.paid(t, "refund-bad", "tok_ok")
	for field, in := range map[string]order.RefundInput{
		"order_id":     {OrderID: "nope", RequestID: "refund-bad"},
		"request_id":   {OrderID: o.ID},
		"amount_minor": {OrderID: o.ID, RequestID: "refund-bad", AmountMinor: -1},
		"reason":       {OrderID: o.ID, RequestID: "refund-bad", Reason: "card 4242 4242 4242 4242"},
	} {
		_, _, err := f.svc.Refund(context.Background(), order.ForMerchant(merchant), order.ActorAPI, in)
		wantValidation(t, err, field)
	}
}

// TestRefundReviewThenResolved: a refund whose outcome the gateway cannot
// tell through the reconciler's whole schedule goes to NEEDS_REVIEW with
// its amount still reserved; an operator's decision settles it.
func TestRefundReviewThenResolved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	ops := order.Operator("alice")
	for _, tc := range []struct {
		name          string
		ev            order.EventName
		id            string
		wantRefund    order.RefundState
		wantOrder     order.State
		wantRefunded  int64
		wantRefunding int64
	}{
		{"failed", order.EventResolveFailed, "", order.RefundFailed, order.StatePaid, 0, 0},
		{"succeeded", order.EventResolveSucceeded, "re_dashboard", order.RefundSucceeded, order.StatePartiallyRefunded, 600, 0},
	} {
		o := f.paid(t, "refund-review-"+tc.name, "tok_refund_fail_later")
		o, r := f.refund(t, o.ID, "refund-review-"+tc.name, 600)
		for range 2 { // the fixture's schedule has two steps
			f.makeRefundsDue(t)
			if _, err := f.rec.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := f.store.Refund(ctx, merchant, r.ID); got.State != order.RefundNeedsReview {
			t.Fatalf("%s: refund %s after the schedule, want NEEDS_REVIEW", tc.name, got.State)
		}
		if o, _ = f.svc.Get(ctx, order.ForMerchant(merchant), o.ID); o.Refunding != 600 {
			t.Fatalf("%s: refunding %d in review, want 600 (reserved)", tc.name, o.Refunding)
		}
		if _, _, err := f.svc.ResolveRefund(ctx, order.AnyMerchant, o.ID, r.ID, tc.ev, tc.id, "", ops); err == nil {
			t.Fatalf("%s: resolved without a reason", tc.name)
		}
		o, got, err := f.svc.ResolveRefund(ctx, order.AnyMerchant, o.ID, r.ID, tc.ev, tc.id, "checked the dashboard", ops)
		if err != nil || got.State != tc.wantRefund || o.State != tc.wantOrder || o.Refunded != tc.wantRefunded ||
			o.Refunding != tc.wantRefunding {
			t.Fatalf("%s: refund %s, order %s refunded %d refunding %d, %v", tc.name, got.State, o.State, o.Refunded, o.Refunding, err)
		}
		var se *order.RefundStateError
		if _, _, err := f.svc.ResolveRefund(ctx, order.AnyMerchant, o.ID, r.ID, tc.ev, tc.id, "again", ops); !errors.As(err, &se) {
			t.Fatalf("%s: resolving twice: %v, want a *RefundStateError", tc.name, err)
		}
		_, events, _ := f.store.Refunds(ctx, merchant, o.ID)
		if last := events[len(events)-1]; last.Actor != ops || last.Name != string(tc.ev) || last.Reason != "checked the dashboard" {
			t.Fatalf("%s: last refund event %+v", tc.name, last)
		}
	}
}
