package audit_test

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// TestStripeAccount audits orders Settle charged through the Stripe
// adapter at the Stripe fake, whose pages hold few records: a clean set
// yields no finding, and a refund made at Stripe outside Settle yields
// its REFUND_MISMATCH and nothing else.
func TestStripeAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fake := stripetest.New(stripetest.Options{PageSize: 7})
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	gw, err := stripe.New(stripe.Config{SecretKey: "sk_test_audit", BaseURL: hs.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gws := map[string]order.Gateway{"stripe": gw}
	svc, err := order.NewService(f.store, gws, order.Config{DefaultGateway: "stripe", GatewayTimeout: 5 * time.Second,
		FirstRecheck: time.Second}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 40
	var last *order.Attempt
	for i := range n {
		o, a, err := svc.CreateAndCharge(ctx, order.DefaultMerchant, order.NewOrder{
			MerchantReference: fmt.Sprintf("stripe-audit-%d", i), Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
			PaymentMethod: stripetest.TokenVisa, Gateway: "stripe"}, order.ChargeInput{RequestID: fmt.Sprintf("stripe-%03d", i)})
		if err != nil || o.State != order.StatePaid || a == nil {
			t.Fatalf("order %d: %+v, %v", i, o, err)
		}
		last = a
	}
	w := f.window()
	a := f.auditor(t, gws)

	r, err := a.Audit(ctx, order.DefaultMerchant, "stripe", w, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Covered || !r.Clean() || r.Seen != n {
		t.Fatalf("clean run %+v: want covered, clean, %d charges seen", r, n)
	}

	// A refund at Stripe that Settle never asked for.
	res, err := gw.Refund(ctx, order.RefundRequest{RefundID: order.NewID(), OrderID: last.OrderID,
		ChargeAttemptID: last.ID, ChargeID: last.GatewayChargeID, Amount: order.Money{Currency: "GBP", AmountMinor: 500}})
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Refund at Stripe = %+v, %v", res, err)
	}
	r, err = a.Audit(ctx, order.DefaultMerchant, "stripe", w, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nonzero(r.Counts), map[audit.Class]int{audit.RefundMismatch: 1}; !maps.Equal(got, want) || !r.Covered {
		t.Fatalf("run after a refund outside Settle found %v (covered %v); want %v", got, r.Covered, want)
	}
}
