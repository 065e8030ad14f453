package order_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// TestCreateAndChargeThreeDSecure: the one-call path takes the customer's
// presence and a return URL as ChargeOrder does. A card that Stripe
// challenges moves the new order to REQUIRES_ACTION with the redirect and
// the client secret; after the challenge, the same call again settles it
// PAID.
func TestCreateAndChargeThreeDSecure(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	n := newOrder(uniqueRef(), stripetest.TokenRequiresAction)
	in := order.ChargeInput{RequestID: "one-call-3ds-1", CustomerPresent: true, ReturnURL: "https://checkout.example/return"}

	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil || o.State != order.StateRequiresAction || a == nil || a.Outcome != order.OutcomeRequiresAction ||
		a.NextAction.RedirectURL == "" || a.NextAction.ClientSecret == "" {
		t.Fatalf("CreateAndCharge = %s, %+v, %v; want REQUIRES_ACTION with the next action", o.State, a, err)
	}
	if pi, ok := f.fake.Intent(a.GatewayChargeID); !ok || pi.Status != "requires_action" || pi.RedirectURL == "" {
		t.Fatalf("PaymentIntent = %+v; want it waiting for the customer, confirmed with the return URL", pi)
	}
	resp, err := http.Get(a.NextAction.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	paid, a2, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil || paid.ID != o.ID || paid.State != order.StatePaid || a2 == nil || a2.ID != a.ID {
		t.Fatalf("CreateAndCharge after the challenge = %+v, %+v, %v; want the same order PAID", paid, a2, err)
	}
	events, _, err := f.store.History(ctx, o.MerchantID, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, e := range events {
		path = append(path, e.Name)
	}
	if got := strings.Join(path, " "); got != "create charge require_action succeed" {
		t.Errorf("history = %s; want create charge require_action succeed", got)
	}
}

// TestCreateAndChargeSavedCard: a one-call charge of a saved card sends its
// Stripe Customer with the create and keeps it with the attempt, so that
// the reconciler's replay of a create whose answer was lost carries it
// again (and finds the one PaymentIntent, rather than an idempotency_error
// that would leave the order CHARGING). Another customer under the same
// request_id is a conflict.
func TestCreateAndChargeSavedCard(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	const customer = "cus_OneCall4242"

	n := newOrder(uniqueRef(), stripetest.TokenVisa)
	in := order.ChargeInput{RequestID: "one-call-saved-1", Customer: customer}
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil || o.State != order.StatePaid || a == nil || a.Customer != customer {
		t.Fatalf("CreateAndCharge = %+v, %+v, %v; want PAID for %s", o, a, err, customer)
	}
	if pis := f.fake.Intents(a.ID); len(pis) != 1 || pis[0].Customer != customer {
		t.Fatalf("PaymentIntents = %+v; want one, for %s", pis, customer)
	}
	other := in
	other.Customer = "cus_SomeoneElse"
	var conflict *order.ConflictError
	if _, _, err := f.svc.CreateAndCharge(ctx, merchant, n, other); !errors.As(err, &conflict) {
		t.Errorf("the same request_id with another customer: err = %v; want a ConflictError", err)
	}

	// The create's answer is lost: the reconciler replays it with the
	// attempt's customer and cancels the one PaymentIntent.
	o, a, err = f.svc.CreateAndCharge(ctx, merchant, newOrder(uniqueRef(), stripetest.TokenCreateDropped),
		order.ChargeInput{RequestID: "one-call-saved-2", Customer: customer})
	if err != nil || o.State != order.StateCharging || a.Customer != customer {
		t.Fatalf("CreateAndCharge = %+v, %+v, %v; want CHARGING for %s", o, a, err, customer)
	}
	if _, att := f.load(t, o.ID); att.Customer != customer {
		t.Fatalf("stored attempt %+v; want customer %s", att, customer)
	}
	got, att := f.check(t, o)
	if got.State != order.StatePending || att.DeclineCode != "canceled_unconfirmed" {
		t.Fatalf("after a check: order %s, attempt %+v; want PENDING, canceled_unconfirmed", got.State, att)
	}
	if pis := f.fake.Intents(a.ID); len(pis) != 1 || pis[0].Customer != customer || pis[0].Status != "canceled" {
		t.Errorf("PaymentIntents = %+v; want one, for %s, canceled", pis, customer)
	}
}

// TestCreateAndChargeSavedCardConflictCreatesNothing: a saved card's
// one-call charge with a new reference and the request_id of another
// order is a conflict that creates nothing, as it is without a customer.
// (Written as a create and then a claim, it left a PENDING order behind.)
func TestCreateAndChargeSavedCardConflictCreatesNothing(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	in := order.ChargeInput{RequestID: "one-call-saved-taken", Customer: "cus_OneCallTaken42"}
	if _, _, err := f.svc.CreateAndCharge(ctx, merchant, newOrder(uniqueRef(), stripetest.TokenVisa), in); err != nil {
		t.Fatal(err)
	}
	for _, customer := range []string{in.Customer, "cus_SomeoneElse42", ""} {
		n := newOrder(uniqueRef(), stripetest.TokenVisa)
		again := in
		again.Customer = customer
		var conflict *order.ConflictError
		if _, _, err := f.svc.CreateAndCharge(ctx, merchant, n, again); !errors.As(err, &conflict) {
			t.Errorf("customer %q: a new reference with a taken request_id: err = %v; want a ConflictError", customer, err)
		}
		if o, err := f.svc.GetByReference(ctx, merchant, n.MerchantReference); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("customer %q: the failed call left an order behind: %s %v", customer, o.State, err)
		}
	}
	if n := len(f.fake.Ledger()); n != 1 {
		t.Errorf("the fake holds %d PaymentIntents, want the first call's one", n)
	}
}

// TestCreateAndChargeValidatesAsCharge: the one-call path refuses a bad
// return URL or customer as ChargeOrder does, naming the same field, and
// creates nothing.
func TestCreateAndChargeValidatesAsCharge(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")
	ctx := context.Background()
	for i, in := range []order.ChargeInput{
		{ReturnURL: "javascript:alert(1)"},
		{ReturnURL: "/relative/return", CustomerPresent: true},
		{ReturnURL: "https://user:secret@checkout.example/return"},
		{Customer: "cust_42"},
		{Customer: "cus_4242 4242"},
	} {
		in.RequestID = "one-call-bad-request"
		n := newOrder(uniqueRef(), stripetest.TokenVisa)
		_, _, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
		var verr *order.ValidationError
		if !errors.As(err, &verr) {
			t.Errorf("case %d: CreateAndCharge(%+v) = %v; want a ValidationError", i, in, err)
			continue
		}
		// The same field as ChargeOrder's validation names.
		charge := in
		charge.OrderID = order.NewID()
		var want *order.ValidationError
		if !errors.As(charge.Validate(), &want) || want.Field != verr.Field {
			t.Errorf("case %d: field %q; ChargeOrder's validation says %v", i, verr.Field, charge.Validate())
		}
		if _, err := f.svc.GetByReference(ctx, merchant, n.MerchantReference); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("case %d: the refused call left an order behind: %v", i, err)
		}
	}
	if n := len(f.fake.Ledger()); n != 0 {
		t.Errorf("the fake holds %d PaymentIntents, want none", n)
	}
}

// TestStripeOffSessionActionIsCanceled: a merchant-initiated charge that
// Stripe answers requires_action is reported declined only once its
// PaymentIntent is canceled, so that nothing is left open that a later
// confirm could charge. When the cancel cannot say, the order stays
// CHARGING with its attempt unknown (never declined with an open intent),
// and the reconciler cancels the PaymentIntent by its recorded id, however
// young the attempt, rather than waiting for a customer who is not there.
func TestStripeOffSessionActionIsCanceled(t *testing.T) {
	t.Parallel()
	f := newStripeFixture(t, "sk_test_settle")

	o, a, err := f.charge(t, stripetest.TokenRequiresAction)
	if err != nil || o.State != order.StatePending || a.Outcome != order.OutcomeDeclined ||
		a.DeclineCode != order.DeclineAuthenticationRequired {
		t.Fatalf("off-session Charge = %s, %+v, %v; want PENDING, declined authentication_required", o.State, a, err)
	}
	if pi, ok := f.fake.Intent(a.GatewayChargeID); !ok || pi.Status != "canceled" {
		t.Fatalf("PaymentIntent = %+v; want it canceled", pi)
	}

	// The cancel fails: unknown, and the order waits for the reconciler.
	f.failCancels.Store(true)
	o, a, err = f.charge(t, stripetest.TokenRequiresAction)
	if err != nil || o.State != order.StateCharging || a.Outcome != order.OutcomeUnknown || a.GatewayChargeID == "" {
		t.Fatalf("off-session Charge with a failing cancel = %s, %+v, %v; want CHARGING, unknown, with the PaymentIntent's id", o.State, a, err)
	}
	if pi, _ := f.fake.Intent(a.GatewayChargeID); pi.Status != "requires_action" {
		t.Fatalf("PaymentIntent = %+v; want it still waiting (the cancel failed)", pi)
	}
	// A check while Stripe still cannot cancel leaves it CHARGING, not
	// REQUIRES_ACTION: nobody will act.
	if got, att := f.check(t, o); got.State != order.StateCharging || !att.AwaitsNobody() {
		t.Fatalf("check while cancels fail: order %s, attempt %+v; want CHARGING, still marked", got.State, att)
	}
	f.failCancels.Store(false)
	got, att := f.check(t, o)
	if got.State != order.StatePending || att.Outcome != order.OutcomeDeclined || att.GatewayChargeID != a.GatewayChargeID {
		t.Fatalf("after a check: order %s, attempt %+v; want PENDING, declined", got.State, att)
	}
	if pi, _ := f.fake.Intent(a.GatewayChargeID); pi.Status != "canceled" || pi.Confirmations != 1 {
		t.Errorf("PaymentIntent = %+v; want it canceled, confirmed once", pi)
	}
	if f.fake.Authenticate(a.GatewayChargeID, true) {
		t.Error("the canceled intent was authenticated")
	}
}
