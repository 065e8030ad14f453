package order_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/reconcile"
)

// present charges an order with the customer at the checkout.
func (f *fixture) present(t *testing.T, orderID, requestID string) (order.Order, *order.Attempt) {
	t.Helper()
	o, a, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: orderID, RequestID: requestID,
		CustomerPresent: true, ReturnURL: "https://checkout.example/return"})
	if err != nil {
		t.Fatalf("Charge(%s, %s): %v", orderID, requestID, err)
	}
	return o, a
}

func open(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
}

// TestThreeDSecureWithTheSimulator: the simulator's tok_3ds asks for
// authentication at a page it serves; opening it completes the charge,
// ?fail=1 declines it, and the customer's return settles the order at once.
func TestThreeDSecureWithTheSimulator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	o := f.create(t, "tds-ok", "tok_3ds")
	got, a := f.present(t, o.ID, "tds-ok-req-1")
	if got.State != order.StateRequiresAction || a.NextAction.RedirectURL == "" {
		t.Fatalf("Charge = %s, %+v; want REQUIRES_ACTION with a redirect", got.State, a)
	}
	if n := f.sim.Succeeded(a.ID); n != 0 {
		t.Fatalf("%d charges before the customer authenticated", n)
	}
	open(t, a.NextAction.RedirectURL)
	if got, _ = f.present(t, o.ID, "tds-ok-req-1"); got.State != order.StatePaid {
		t.Fatalf("Charge after authenticating = %s; want PAID", got.State)
	}
	if n := f.sim.Succeeded(a.ID); n != 1 {
		t.Errorf("%d charges, want 1", n)
	}

	o = f.create(t, "tds-fail", "tok_3ds")
	_, a = f.present(t, o.ID, "tds-fail-req-1")
	open(t, a.NextAction.RedirectURL+"?fail=1")
	if got, err := f.svc.Get(ctx, order.ForMerchant(merchant), o.ID); err != nil || got.State != order.StatePending {
		t.Fatalf("GetOrder after a failed authentication = %s, %v; want PENDING", got.State, err)
	}

	// Not present: declined, nothing to act on.
	o = f.create(t, "tds-off", "tok_3ds")
	if got, a := f.charge(t, o.ID, "tds-off-req-1"); got.State != order.StatePending || a.DeclineCode != "authentication_required" {
		t.Errorf("off-session Charge = %s, %+v; want PENDING, authentication_required", got.State, a)
	}
}

// TestThreeDSecureExpiresWithTheSimulator: an abandoned authentication is
// canceled at the simulator by the reconciler at its expiry, and can no
// longer charge.
func TestThreeDSecureExpiresWithTheSimulator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	gw, err := refpsp.New(refpsp.Config{BaseURL: f.simURL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	// The check before the expiry has to come within it, after the order is
	// created and the action presented: long enough for a loaded machine.
	const expiry = 2 * time.Second
	rec, err := reconcile.New(f.store, map[string]order.Gateway{"sim": gw}, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: gatewayTimeout, NoShowHorizon: time.Hour, ActionExpiry: expiry,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	o := f.create(t, "tds-expire", "tok_3ds")
	_, a := f.present(t, o.ID, "tds-expire-req-1")
	if got, _, err := rec.CheckNow(ctx, o.ID); err != nil || got.State != order.StateRequiresAction {
		t.Fatalf("check before the expiry = %s, %v; want REQUIRES_ACTION", got.State, err)
	}
	time.Sleep(expiry + 50*time.Millisecond)
	if got, _, err := rec.CheckNow(ctx, o.ID); err != nil || got.State != order.StatePending {
		t.Fatalf("check after the expiry = %s, %v; want PENDING", got.State, err)
	}
	resp, err := http.Get(a.NextAction.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || f.sim.Succeeded(a.ID) != 0 {
		t.Errorf("authenticating after the expiry: %s, %d charges; want refused, none", resp.Status, f.sim.Succeeded(a.ID))
	}
}

// TestCreateAndChargeRefusesActionResult: a new order waits for no
// action, so an action result with it is refused, and nothing is created.
func TestCreateAndChargeRefusesActionResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, _, err := f.svc.CreateAndCharge(context.Background(), merchant, newOrder("new-with-result", "tok_3ds"),
		order.ChargeInput{RequestID: "new-with-result-req", CustomerPresent: true, ActionResult: "X6XtfGC3!Y0"})
	var v *order.ValidationError
	if !errors.As(err, &v) || v.Field != "action_result" {
		t.Fatalf("CreateAndCharge with an action result: %v; want a validation error of action_result", err)
	}
	if _, err := f.svc.GetByReference(context.Background(), merchant, "new-with-result"); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("the order was created: %v", err)
	}
}
