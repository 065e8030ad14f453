package order_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// service returns another Service on f's database and simulator, with
// cfg's lookup settings and budgets, and its gateway timeout if it has one.
func (f *fixture) service(t *testing.T, cfg order.Config) *order.Service {
	t.Helper()
	cfg.GatewayTimeout = cmp.Or(cfg.GatewayTimeout, gatewayTimeout)
	gw, err := refpsp.New(refpsp.Config{BaseURL: f.simURL, APIKey: "sk_sim_test", Timeout: cfg.GatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultGateway, cfg.Grace, cfg.FirstRecheck = "sim", time.Second, time.Minute
	svc, err := order.NewService(f.store, map[string]order.Gateway{"sim": gw}, cfg, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// challenge creates an order and charges it with the customer present, so
// that it waits for them (REQUIRES_ACTION).
func (f *fixture) challenge(t *testing.T, ref string) (order.Order, *order.Attempt) {
	t.Helper()
	o := f.create(t, ref, "tok_3ds")
	got, a := f.present(t, o.ID, ref+"-req")
	if got.State != order.StateRequiresAction {
		t.Fatalf("Charge(%s) = %s; want REQUIRES_ACTION", ref, got.State)
	}
	return got, a
}

// TestPollsOfAChallengeShareLookups: 400 GetOrders and ChargeOrder replays
// at once of an order waiting for the customer make a handful of lookups
// at the gateway, not one each (they made 400); once the order's row
// changes (a gateway's event made it due), the next call asks the gateway
// again and sees the customer's answer.
func TestPollsOfAChallengeShareLookups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	svc := f.service(t, order.Config{LookupReuse: time.Minute})
	o, a := f.challenge(t, "poll-storm")

	before := f.sim.Lookups()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Go(func() {
			var (
				got order.Order
				err error
			)
			if i%2 == 0 {
				got, err = svc.Get(ctx, order.ForMerchant(merchant), o.ID)
			} else {
				var ra *order.Attempt
				got, ra, err = svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "poll-storm-req",
					CustomerPresent: true, ReturnURL: "https://checkout.example/return"})
				if err == nil && ra.NextAction.RedirectURL != a.NextAction.RedirectURL {
					err = errors.New("a replay lost the attempt's next action")
				}
			}
			if err == nil && got.State != order.StateRequiresAction {
				err = errors.New("the order is " + string(got.State))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One lookup in flight at a time, its answer reused while the row
	// stands: a loaded machine may let a few go before the first answer.
	n := f.sim.Lookups() - before
	if n < 1 || n > 5 {
		t.Errorf("400 calls made %d lookups at the gateway; want 1 to 5", n)
	}
	t.Logf("400 calls made %d lookups at the gateway", n)

	// The customer authenticates, and the gateway's event makes the order
	// due: the stored row changed, so no answer from before is reused.
	open(t, a.NextAction.RedirectURL)
	if _, err := f.store.RecordGatewayEvent(ctx, order.GatewayEvent{Gateway: "sim", ID: "evt_poll_storm",
		Type: "charge.succeeded", AttemptID: a.ID, Succeeded: true}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.Get(ctx, order.ForMerchant(merchant), o.ID); err != nil || got.State != order.StatePaid {
		t.Fatalf("GetOrder after the customer's answer and its event = %s, %v; want PAID", got.State, err)
	}
}

// TestLookupBudget: a storm of polls of orders waiting for their
// customers never makes the gateway see more requests than the budget
// allows (they used to go through, one lookup each), every poll still
// answers the order as stored, and charges made during the storm go
// through: lookups use their share of the budget only.
func TestLookupBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const rate, share = 20.0, 0.5
	budget, err := order.NewBudget(order.BudgetConfig{Rate: rate, LookupShare: share, LookupWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// No reuse: every poll would be a lookup but for the budget. A long
	// gateway timeout, so that a charge's deadline is not spent on a
	// loaded machine's database before the budget is asked.
	svc := f.service(t, order.Config{Budgets: map[string]*order.Budget{"sim": budget}, GatewayTimeout: 10 * time.Second})
	var waiting []order.Order
	for i := range 20 {
		o, _ := f.challenge(t, "budget-"+string(rune('a'+i)))
		waiting = append(waiting, o)
	}
	var paid []order.Order
	for i := range 5 {
		paid = append(paid, f.create(t, "budget-charge-"+string(rune('a'+i)), "tok_ok"))
	}

	before := f.sim.Requests()
	start := time.Now()
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		polls int
		bad   []string
	)
	for w := range 16 {
		wg.Go(func() {
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := svc.Get(ctx, order.ForMerchant(merchant), waiting[i%len(waiting)].ID)
				mu.Lock()
				polls++
				if err != nil || got.State != order.StateRequiresAction {
					bad = append(bad, string(got.State)+" "+errString(err))
				}
				mu.Unlock()
			}
		})
	}
	// Charges during the storm: each one sent and settled.
	for _, o := range paid {
		time.Sleep(200 * time.Millisecond)
		got, a, err := svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: o.MerchantReference + "-req"})
		if err != nil || got.State != order.StatePaid {
			t.Errorf("Charge during the storm = %s, %+v, %v; want PAID", got.State, a, err)
		}
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	sent := f.sim.Requests() - before

	if len(bad) > 0 {
		t.Fatalf("%d polls answered otherwise than the stored REQUIRES_ACTION, first %q", len(bad), bad[0])
	}
	// The bucket's burst (a tenth of a second's worth, at least one) and
	// its rate over the storm; charges and lookups together.
	allowed := 1 + int(rate*elapsed.Seconds()) + 1 // the burst (one token at this rate), the rate, and one spare
	if sent > allowed {
		t.Errorf("the gateway saw %d requests in %s (%d polls); the budget allows %d", sent, elapsed, polls, allowed)
	}
	if polls <= sent {
		t.Errorf("%d polls made %d requests: the storm did not go past the budget", polls, sent)
	}
	t.Logf("%d polls and %d charges in %s: %d requests at the gateway, %d allowed", polls, len(paid), elapsed, sent, allowed)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestLookupPastTheBudget: a lookup the budget refuses calls nothing; a
// GetOrder then answers the order as stored, and a ChargeOrder replay,
// whose reply needs the gateway's next action, ErrBudgetExhausted (which
// the API answers UNAVAILABLE with a retry hint).
func TestLookupPastTheBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Half a lookup per second, and no wait: the first lookup takes the
	// only token for the next two seconds.
	budget, err := order.NewBudget(order.BudgetConfig{Rate: 1, LookupShare: 0.5, LookupWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc := f.service(t, order.Config{Budgets: map[string]*order.Budget{"sim": budget}})
	o, _ := f.challenge(t, "past-budget")
	before := f.sim.Lookups()
	if got, err := svc.Get(ctx, order.ForMerchant(merchant), o.ID); err != nil || got.State != order.StateRequiresAction {
		t.Fatalf("first GetOrder = %s, %v; want REQUIRES_ACTION", got.State, err)
	}
	if got, err := svc.Get(ctx, order.ForMerchant(merchant), o.ID); err != nil || got.State != order.StateRequiresAction {
		t.Fatalf("GetOrder past the budget = %s, %v; want REQUIRES_ACTION as stored", got.State, err)
	}
	_, _, err = svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "past-budget-req",
		CustomerPresent: true, ReturnURL: "https://checkout.example/return"})
	if !errors.Is(err, order.ErrBudgetExhausted) {
		t.Fatalf("ChargeOrder replay past the budget: %v; want ErrBudgetExhausted", err)
	}
	if n := f.sim.Lookups() - before; n != 1 {
		t.Errorf("%d lookups at the gateway; want 1, the one the budget allowed", n)
	}
}

// TestRefundsDrawFromTheBudget: a burst of refunds never makes the gateway
// see more than its request budget; a refund the budget cannot send before
// its deadline fails as not sent (gateway_busy), and its amount is left to
// refund again. No money is lost either way.
func TestRefundsDrawFromTheBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const rate = 4.0
	budget, err := order.NewBudget(order.BudgetConfig{Rate: rate, LookupShare: 0.5, LookupWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o := f.paid(t, "budget-refunds", "tok_ok")
	// A deadline of ten seconds: a refund waits for the budget at most
	// five, so about 5 × rate refunds get through, each with seconds left
	// for its call however long its claim waited, and the rest are not
	// sent.
	svc := f.service(t, order.Config{Budgets: map[string]*order.Budget{"sim": budget}, GatewayTimeout: 10 * time.Second})
	before := f.sim.Requests()
	start := time.Now()
	const n = 40
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		succeeded, busy int
		unexpected      []string
	)
	for i := range n {
		wg.Go(func() {
			_, r, err := svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
				order.RefundInput{OrderID: o.ID, RequestID: fmt.Sprintf("budget-refund-%02d", i), AmountMinor: 10})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && r.State == order.RefundSucceeded:
				succeeded++
			case err == nil && r.State == order.RefundFailed && r.DeclineCode == "gateway_busy":
				busy++
			default:
				unexpected = append(unexpected, fmt.Sprintf("%s %s %v", r.State, r.DeclineCode, err))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	sent := f.sim.Requests() - before
	if len(unexpected) > 0 {
		t.Fatalf("%d refunds answered otherwise, first %q", len(unexpected), unexpected[0])
	}
	allowed := 1 + int(rate*elapsed.Seconds()) + 1 // the burst (one token at this rate), the rate, and one spare
	if sent > allowed {
		t.Errorf("the gateway saw %d requests in %s for %d refunds; the budget allows %d", sent, elapsed, n, allowed)
	}
	if busy == 0 || succeeded == 0 {
		t.Errorf("%d refunds succeeded and %d were not sent; want some of each (the burst goes past the budget)", succeeded, busy)
	}
	_, attempts := f.history(t, o.ID)
	got, err := f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || got.Refunded != int64(10*succeeded) || got.Refunding != 0 || f.sim.Refunded(attempts[0].ID) != got.Refunded {
		t.Fatalf("order refunded %d, refunding %d, gateway refunded %d, %v; want %d, 0, the same",
			got.Refunded, got.Refunding, f.sim.Refunded(attempts[0].ID), err, 10*succeeded)
	}
	t.Logf("%d refunds in %s: %d sent, %d not sent (gateway_busy), %d requests at the gateway, %d allowed", n, elapsed, succeeded, busy, sent, allowed)
}

// A charge waits for the budget at most half of the time it has left, so
// that its gateway call keeps at least half of the gateway timeout: a
// charge that spent its whole deadline in the queue would time out at the
// gateway, and "not sent" would become "unknown".
func TestChargeWaitLeavesTheCallItsTime(t *testing.T) {
	t.Parallel()
	budget, err := order.NewBudget(order.BudgetConfig{Rate: 0.25, LookupShare: 0.5, LookupWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := budget.WaitCharge(ctx); err != nil {
		t.Fatalf("the first charge: %v; want it sent at once", err)
	}
	// The next token comes in four seconds: a charge with 6 s left would
	// keep only 2 s for its call, so it is not sent, and at once.
	short, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	start := time.Now()
	if err := budget.WaitCharge(short); !errors.Is(err, order.ErrBudgetExhausted) {
		t.Fatalf("a charge with 6 s left: %v; want ErrBudgetExhausted", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("the refused charge waited %s; want it refused without waiting", waited)
	}
	// With 12 s left it may wait the four and keep eight for its call.
	long, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	if err := budget.WaitCharge(long); err != nil {
		t.Fatalf("a charge with 12 s left: %v; want it sent after about four seconds", err)
	}
	if deadline, _ := long.Deadline(); time.Until(deadline) < 4*time.Second {
		t.Errorf("the charge left %s for its call; want at least half its time", time.Until(deadline))
	}
}
