package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/lab/bench"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestWiredGatewaysKeepTheirCapabilities: the gateways as serve (and the
// benchmark's server) wires them are the adapters themselves, each with
// every method of its adapter, so that no optional capability of order
// (a refund, an amount check, reading events, and whatever comes next) is
// hidden from the charge path; the capabilities known today are checked
// by name, as the charge path asks for them. Stripe's amount check refuses
// at creation an amount Stripe cannot carry (a metrics wrapper once hid
// it, and such an order failed at its first charge). Every configured
// gateway has its request budget, and the webhook listener reads each
// gateway's events with the same adapter.
func TestWiredGatewaysKeepTheirCapabilities(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		// The pool is opened without connecting: nothing here needs a
		// database.
		"DATABASE_URL":                  "postgres://settle@127.0.0.1:1/settle",
		"SETTLE_REFPSP_URL":             "http://127.0.0.1:1",
		"SETTLE_REFPSP_KEY":             "sk_wiring",
		"STRIPE_SECRET_KEY":             "sk_test_wiring",
		"SETTLE_NO_API_KEYS":            "true",
		"STRIPE_WEBHOOK_SECRETS":        "whsec_wiring0123456789abcdefghijklmnop",
		"SETTLE_REFPSP_WEBHOOK_SECRETS": "whsec_wiring_0123456789abcdefghijklmnop",
		"ADYEN_API_KEY":                 "AQE_wiring",
		"ADYEN_MERCHANT_ACCOUNT":        "SettleWiringECOM",
		"ADYEN_HMAC_KEYS":               strings.Repeat("ab", 32),
	}
	cfg, _, err := parse("serve", nil, func(k string) string { return env[k] }, io.Discard, commandOptions["serve"]...)
	if err != nil {
		t.Fatal(err)
	}
	lab := map[string]func(gateway.Observer) order.Gateway{
		"instant": func(obs gateway.Observer) order.Gateway { return bench.NewObservedInstant(obs) },
	}
	a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "refpsp", lab, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.pool.Close)

	for name, adapter := range map[string]reflect.Type{
		"refpsp":  reflect.TypeFor[*refpsp.Client](),
		"stripe":  reflect.TypeFor[*stripe.Gateway](),
		"instant": reflect.TypeFor[*bench.Instant](),
		"adyen":   reflect.TypeFor[*adyen.Gateway](),
	} {
		wired := reflect.TypeOf(a.gateways[name])
		if wired == nil {
			t.Errorf("no gateway %s wired", name)
			continue
		}
		for m := range adapter.Methods() {
			got, ok := wired.MethodByName(m.Name)
			if !ok || !sameSignature(got.Type, m.Type) {
				t.Errorf("wired gateway %s (%s) lacks the adapter's %s%s", name, wired, m.Name, m.Type)
			}
		}
		if _, ok := a.gateways[name].(order.Refunder); !ok {
			t.Errorf("wired gateway %s hides its refunds", name)
		}
	}
	for _, name := range []string{"refpsp", "stripe"} {
		if r, ok := a.gateways[name].(order.EventReceiver); !ok {
			t.Errorf("wired gateway %s hides its events", name)
		} else if a.receivers[name] != r {
			t.Errorf("the webhook listener reads %s's events with another value than the wired gateway", name)
		}
		if a.budgets[name] == nil {
			t.Errorf("wired gateway %s has no request budget", name)
		}
	}
	// The audit reads the gateways as wired: each that lists its
	// records must still list them.
	for _, name := range []string{"refpsp", "stripe", "adyen"} {
		if _, ok := a.gateways[name].(order.ChargeLister); !ok {
			t.Errorf("wired gateway %s hides its listing from the audit", name)
		}
	}
	if _, ok := a.gateways["stripe"].(order.AmountChecker); !ok {
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

// sameSignature says whether two methods' types, each with its receiver
// first, take and return the same.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() || a.IsVariadic() != b.IsVariadic() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}

// TestKWDAmountRefusedAtCreateForStripe: through the running server, an
// order of 1.255 KWD for Stripe (which takes three-decimal amounts in
// multiples of ten only) is refused INVALID_ARGUMENT at CreateOrder, and
// at CreateAndChargeOrder, naming the field, with nothing sent to Stripe;
// 1.250 KWD is accepted.
func TestKWDAmountRefusedAtCreateForStripe(t *testing.T) {
	t.Parallel()
	fake := stripetest.New(stripetest.Options{SecretKey: "sk_test_settle"})
	fs := httptest.NewServer(fake)
	t.Cleanup(fs.Close)
	hs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: time.Second}))
	t.Cleanup(hs.Close)
	addr := freeAddr(t)
	srv := start(t, append(crashEnv(postgrestest.URL(t), hs.URL), "STRIPE_SECRET_KEY=sk_test_settle", "STRIPE_API_BASE="+fs.URL),
		"serve", "--listen", addr)
	c := dial(t, addr)
	waitServing(t, c, srv)
	ctx := context.Background()
	kwd := func(minor int64) *settlev1.Money { return &settlev1.Money{Currency: "KWD", AmountMinor: minor} }

	_, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "kwd-1255",
		Amount: kwd(1255), PaymentMethod: stripetest.TokenVisa, Gateway: "stripe"})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "amount.amount_minor") {
		t.Fatalf("CreateOrder of 1.255 KWD for Stripe = %v; want INVALID_ARGUMENT naming amount.amount_minor", err)
	}
	_, err = c.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "kwd-1255-charged",
		Amount: kwd(1255), PaymentMethod: stripetest.TokenVisa, Gateway: "stripe", RequestId: "kwd-1255-request"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateAndChargeOrder of 1.255 KWD for Stripe = %v; want INVALID_ARGUMENT", err)
	}
	if n := fake.Count(http.MethodPost, ""); n != 0 {
		t.Fatalf("Stripe was sent %d requests for refused orders, want none", n)
	}
	if _, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "kwd-1250",
		Amount: kwd(1250), PaymentMethod: stripetest.TokenVisa, Gateway: "stripe"}); err != nil {
		t.Fatalf("CreateOrder of 1.250 KWD for Stripe: %v", err)
	}
}

// TestWebhookSecretsNeedTheirGateway: a gateway's events are read by its
// adapter, so a gateway's webhook secrets without the gateway stop the
// server at start, naming both settings.
func TestWebhookSecretsNeedTheirGateway(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "sk_wiring",
			"STRIPE_WEBHOOK_SECRETS": "whsec_wiring0123456789abcdefghijklmnop"}, []string{"stripe-webhook-secrets", "STRIPE_SECRET_KEY"}},
		{map[string]string{"STRIPE_SECRET_KEY": "sk_test_wiring", "SETTLE_DEFAULT_GATEWAY": "stripe",
			"SETTLE_REFPSP_WEBHOOK_SECRETS": "whsec_wiring_0123456789abcdefghijklmnop"}, []string{"refpsp-webhook-secrets", "SETTLE_REFPSP_URL"}},
	} {
		tc.env["DATABASE_URL"], tc.env["SETTLE_NO_API_KEYS"] = "postgres://settle@127.0.0.1:1/settle", "true"
		getenv := func(k string) string { return tc.env[k] }
		cfg, _, err := parse("serve", nil, getenv, io.Discard, commandOptions["serve"]...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler), "refpsp", nil, getenv)
		if err == nil {
			a.pool.Close()
			t.Fatalf("%v: started with a gateway's webhook secrets and no such gateway", tc.want)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not name %s", err, w)
			}
		}
	}
}

// TestStripeMulticaptureIsWired: --stripe-multicapture (or its variable)
// reaches the Stripe adapter. Without it a capture that is not final is
// declined before anything is sent; with it the capture is sent (here to
// an address where nothing listens).
func TestStripeMulticaptureIsWired(t *testing.T) {
	t.Parallel()
	closed := "http://" + freeAddr(t)
	for _, multi := range []string{"false", "true"} {
		env := map[string]string{
			"DATABASE_URL":               "postgres://settle@127.0.0.1:1/settle",
			"STRIPE_SECRET_KEY":          "sk_test_wiring",
			"STRIPE_API_BASE":            closed,
			"SETTLE_NO_API_KEYS":         "true",
			"SETTLE_STRIPE_MULTICAPTURE": multi,
			"SETTLE_DEFAULT_GATEWAY":     "stripe",
		}
		cfg, _, err := parse("serve", nil, func(k string) string { return env[k] }, io.Discard, commandOptions["serve"]...)
		if err != nil {
			t.Fatal(err)
		}
		a, err := newApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "stripe", nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.pool.Close)
		c, ok := a.gateways["stripe"].(order.Capturer)
		if !ok {
			t.Fatalf("the wired gateway stripe (%T) does not capture", a.gateways["stripe"])
		}
		res, _ := c.Capture(t.Context(), order.CaptureRequest{CaptureID: order.NewID(), OrderID: order.NewID(), ChargeID: "pi_wiring",
			Amount: order.Money{Currency: "EUR", AmountMinor: 100}, Final: false, CreatedAt: time.Now()})
		if declined := res.DeclineCode == "multicapture_unsupported"; declined != (multi == "false") {
			t.Errorf("with SETTLE_STRIPE_MULTICAPTURE=%s, a capture that is not final = %+v", multi, res)
		}
	}
}
