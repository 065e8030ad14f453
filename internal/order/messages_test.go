package order_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// TestMoneyString: an amount reads in the currency's units, with the minor
// units beside them, for every exponent.
func TestMoneyString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		m    order.Money
		want string
	}{
		{order.Money{Currency: "GBP", AmountMinor: 750}, "7.50 GBP (750 minor units)"},
		{order.Money{Currency: "GBP", AmountMinor: 5}, "0.05 GBP (5 minor units)"},
		{order.Money{Currency: "KWD", AmountMinor: 1234}, "1.234 KWD (1234 minor units)"},
		{order.Money{Currency: "CLF", AmountMinor: 10000}, "1.0000 CLF (10000 minor units)"},
		{order.Money{Currency: "JPY", AmountMinor: 750}, "750 JPY"},
		{order.Money{Currency: "XAU", AmountMinor: 3}, "3 XAU"},
		{order.Money{Currency: "GBP", AmountMinor: -750}, "-7.50 GBP (-750 minor units)"},
	} {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.m, got, tt.want)
		}
	}
	err := &order.RefundLimitError{Left: 750, Currency: "GBP"}
	if !strings.Contains(err.Error(), "7.50 GBP (750 minor units)") {
		t.Errorf("RefundLimitError = %q; want the amount in pounds beside its minor units", err)
	}
}

// TestLengthMessagesStateTheLimit: a field too short, too long or too
// large is refused with the limit it broke.
func TestLengthMessagesStateTheLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{order.CheckRequestID("ab"), "at least 8"},
		{order.CheckRequestID(strings.Repeat("r", 300)), "at most 255"},
		{order.CheckReference("merchant_reference", strings.Repeat("r", 300)), "at most 255"},
		{order.Money{Currency: "GBP", AmountMinor: order.MaxAmountMinor + 1}.Validate("amount"), "at most 1000000000000 minor units"},
		{order.RefundInput{OrderID: "00000000-0000-0000-0000-000000000000", RequestID: "refund-request-1", AmountMinor: order.MaxAmountMinor + 1}.Validate(), "at most 1000000000000 minor units"},
	} {
		var ve *order.ValidationError
		if !errors.As(tt.err, &ve) || !strings.Contains(ve.Reason, tt.want) {
			t.Errorf("error %v; want a validation error stating %q", tt.err, tt.want)
		}
	}
}

// TestUnconfiguredGatewayNamesTheSetting: an order for a gateway the
// server lacks names it and the setting that configures it; a name the
// server does not know is not echoed, and the answer lists those it has.
func TestUnconfiguredGatewayNamesTheSetting(t *testing.T) {
	t.Parallel()
	gw, err := refpsp.New(refpsp.Config{BaseURL: "http://127.0.0.1:1", APIKey: "k", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := order.NewService(nil, map[string]order.Gateway{"sim": gw}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: time.Second, FirstRecheck: time.Second,
		Unconfigured: map[string]string{"stripe": "STRIPE_SECRET_KEY"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	create := func(gateway string) string {
		_, err := svc.Create(context.Background(), order.DefaultMerchant, order.NewOrder{MerchantReference: "gw-1",
			Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok", Gateway: gateway})
		var ve *order.ValidationError
		if !errors.As(err, &ve) || ve.Field != "gateway" {
			t.Fatalf("Create(gateway %q) = %v; want a validation error on gateway", gateway, err)
		}
		return err.Error()
	}
	if got := create("stripe"); !strings.Contains(got, `"stripe" is not configured on this server; set STRIPE_SECRET_KEY`) {
		t.Errorf("gateway stripe: %q", got)
	}
	if got := create("strpie"); strings.Contains(got, "strpie") || !strings.Contains(got, "use one of: sim") {
		t.Errorf("gateway strpie: %q; want the server's gateways and not the name echoed", got)
	}
}

// TestSilentTimeoutAndFailingLookups: the simulator's tok_timeout_silent
// leaves a CHARGING order that only the reconciler's lookup makes PAID;
// tok_lookup_fails one that the reconciler cannot settle, which reaches
// NEEDS_REVIEW once the schedule is spent.
func TestSilentTimeoutAndFailingLookups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	runDue := func(id string) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, "UPDATE orders SET reconcile_at = now() WHERE id = $1", id); err != nil {
			t.Fatal(err)
		}
		if _, err := f.rec.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	silent := f.create(t, "silent-1", "tok_timeout_silent")
	if o, _ := f.charge(t, silent.ID, "silent-req-1"); o.State != order.StateCharging {
		t.Fatalf("charge with tok_timeout_silent = %s; want CHARGING", o.State)
	}
	runDue(silent.ID)
	if o, err := f.store.Order(ctx, order.AnyMerchant, silent.ID); err != nil || o.State != order.StatePaid {
		t.Fatalf("after a reconcile: %s, %v; want PAID", o.State, err)
	}

	fails := f.create(t, "fails-1", "tok_lookup_fails")
	if o, _ := f.charge(t, fails.ID, "fails-req-1"); o.State != order.StateCharging {
		t.Fatalf("charge with tok_lookup_fails = %s; want CHARGING", o.State)
	}
	runDue(fails.ID)
	if o, _ := f.store.Order(ctx, order.AnyMerchant, fails.ID); o.State != order.StateCharging {
		t.Fatalf("after one failed lookup: %s; want CHARGING", o.State)
	}
	runDue(fails.ID) // the fixture's schedule has two steps
	if o, _ := f.store.Order(ctx, order.AnyMerchant, fails.ID); o.State != order.StateNeedsReview {
		t.Fatalf("after the schedule: %s; want NEEDS_REVIEW", o.State)
	}
}
