package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/settlepay/settle/internal/order"
)

// TestWiredGatewaysKeepTheirCapabilities: the gateways as serve wires
// them (each behind the metrics and tracing wrapper) still offer what
// their adapters can do, and the charge path finds it: Stripe's amount
// check refuses at creation an amount Stripe cannot carry (the wrapper
// used to hide it, and such an order failed at its first charge), and
// both adapters refund. Every configured gateway has its request budget.
func TestWiredGatewaysKeepTheirCapabilities(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		// The pool is opened without connecting: nothing here needs a
		// database.
		"DATABASE_URL":       "postgres://settle@127.0.0.1:1/settle",
		"SETTLE_REFPSP_URL":  "http://127.0.0.1:1",
		"SETTLE_REFPSP_KEY":  "sk_wiring",
		"STRIPE_SECRET_KEY":  "sk_test_wiring",
		"SETTLE_NO_API_KEYS": "true",
	}
	cfg, _, err := parse("serve", nil, func(k string) string { return env[k] }, io.Discard, commandOptions["serve"]...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "refpsp", nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.pool.Close)

	for _, name := range []string{"refpsp", "stripe"} {
		if _, ok := order.GatewayAs[order.Refunder](a.gateways[name]); !ok {
			t.Errorf("wired gateway %s hides its refunds", name)
		}
		if a.budgets[name] == nil {
			t.Errorf("wired gateway %s has no request budget", name)
		}
	}
	if _, ok := order.GatewayAs[order.AmountChecker](a.gateways["stripe"]); !ok {
		t.Error("wired gateway stripe hides its amount check")
	}
	svc, err := a.service()
	if err != nil {
		t.Fatal(err)
	}
	// Three decimals: Stripe takes multiples of ten only. The check runs
	// before the store is asked anything.
	_, err = svc.Create(context.Background(), order.DefaultMerchant, order.NewOrder{MerchantReference: "wiring-1",
		Amount: order.Money{Currency: "KWD", AmountMinor: 1001}, PaymentMethod: "pm_card_visa", Gateway: "stripe"})
	if verr := (*order.ValidationError)(nil); !errors.As(err, &verr) || verr.Field != "amount.amount_minor" {
		t.Errorf("Create of KWD 1.001 through the wired stripe gateway: %v; want amount.amount_minor refused", err)
	}
}
