package order_test

import (
	"context"
	"testing"

	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// TestLostClaimReplaysTheSameKey: a claim lost with the database (an
// asynchronous standby promoted before it had the commit) leaves the order
// PENDING with no attempt. The checkout's retry with the same request_id
// makes the attempt again with the same id, so Stripe gets the same
// idempotency keys and answers with the first PaymentIntent: one charge.
func TestLostClaimReplaysTheSameKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newStripeFixture(t, "sk_test_settle")
	o, err := f.svc.Create(ctx, merchant, newOrder("inv-lost-claim", stripetest.TokenVisa))
	if err != nil {
		t.Fatal(err)
	}
	in := order.ChargeInput{OrderID: o.ID, RequestID: "checkout-lost-claim"}
	paid, first, err := f.svc.Charge(ctx, merchant, in)
	if err != nil || paid.State != order.StatePaid {
		t.Fatalf("Charge = %s, %v; want PAID", paid.State, err)
	}

	// The failover loses everything the claim and the settle wrote.
	if _, err := f.pool.Exec(ctx, `
		WITH o AS (UPDATE orders SET state = 'PENDING', current_attempt = NULL WHERE id = $1 RETURNING id),
		e AS (DELETE FROM order_events WHERE order_id = $1 AND attempt_id IS NOT NULL)
		DELETE FROM charge_attempts WHERE order_id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}

	again, replayed, err := f.svc.Charge(ctx, merchant, in)
	if err != nil || again.State != order.StatePaid {
		t.Fatalf("Charge replayed after the lost claim = %s, %v; want PAID", again.State, err)
	}
	if replayed.ID != first.ID || replayed.GatewayChargeID != first.GatewayChargeID {
		t.Fatalf("replayed attempt %s (charge %s), first %s (charge %s): want the same", replayed.ID, replayed.GatewayChargeID, first.ID, first.GatewayChargeID)
	}
	if pis := f.fake.Ledger(); len(pis) != 1 {
		t.Fatalf("Stripe holds %d PaymentIntents for one order, want 1: %+v", len(pis), pis)
	}
}

// TestDerivedIDs: an attempt's and a refund's ids depend on the merchant,
// the order (in any case) and the request id, and on nothing else.
func TestDerivedIDs(t *testing.T) {
	t.Parallel()
	const oid = "0190a3f2-7c1d-7b3e-8f00-000000000001"
	a := order.AttemptID("m", oid, "req-1")
	if err := order.CheckID("attempt", a); err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]string{
		"other merchant": order.AttemptID("m2", oid, "req-1"),
		"other order":    order.AttemptID("m", "0190a3f2-7c1d-7b3e-8f00-000000000002", "req-1"),
		"other request":  order.AttemptID("m", oid, "req-2"),
		"parts shifted":  order.AttemptID("m"+oid, "", "req-1"),
		"a refund":       order.RefundID("m", oid, "req-1"),
	} {
		if other == a {
			t.Errorf("%s: same id %s", name, a)
		}
	}
	if order.AttemptID("m", "0190A3F2-7C1D-7B3E-8F00-000000000001", "req-1") != a || order.AttemptID("m", oid, "req-1") != a {
		t.Error("the same request gives another id")
	}
}
