package telemetry_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/telemetry"
)

// TestGatewaySpan: each call an adapter reports to its observer has a
// span with the order and attempt ids and the outcome, and never the
// payment method, and is counted and timed by gateway, operation and
// outcome.
func TestGatewaySpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	m := telemetry.NewMetrics()
	hs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: time.Second}))
	t.Cleanup(hs.Close)
	gw, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_span", Timeout: 5 * time.Second,
		Observer: m.GatewayObserver("sim", tp.Tracer(telemetry.TracerName))})
	if err != nil {
		t.Fatal(err)
	}
	req := order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), MerchantReference: "span-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}
	if _, err := gw.Charge(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Lookup(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Lookup(context.Background(), order.ChargeRequest{OrderID: req.OrderID}); err == nil {
		t.Fatal("a lookup without an attempt id did not fail")
	}
	spans := exp.GetSpans()
	if len(spans) != 3 || spans[0].Name != "gateway.charge" || spans[1].Name != "gateway.lookup" {
		t.Fatalf("spans %v, want gateway.charge and two gateway.lookup", spans)
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
		if kv.Value.String() == req.PaymentMethod {
			t.Fatalf("span carries the payment method in %s", kv.Key)
		}
	}
	if attrs["settle.order_id"] != req.OrderID || attrs["settle.attempt_id"] != req.AttemptID ||
		attrs["settle.gateway"] != "sim" || attrs["settle.outcome"] != "succeeded" {
		t.Fatalf("span attributes %v", attrs)
	}
	// A capture's and a void's lookup that cannot say count as errors too.
	if _, err := gw.LookupCapture(context.Background(), order.CaptureRequest{OrderID: req.OrderID}); err == nil {
		t.Fatal("a capture lookup without a capture id did not fail")
	}
	if _, err := gw.LookupVoid(context.Background(), order.VoidRequest{OrderID: req.OrderID}); err == nil {
		t.Fatal("a void lookup without a void id did not fail")
	}
	rec := httptest.NewRecorder()
	m.Handler(func(context.Context) error { return nil }).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`settle_gateway_calls_total{gateway="sim",op="charge",outcome="succeeded"} 1`,
		`settle_gateway_calls_total{gateway="sim",op="lookup",outcome="succeeded"} 1`,
		`settle_gateway_calls_total{gateway="sim",op="lookup",outcome="error"} 1`,
		`settle_gateway_calls_total{gateway="sim",op="lookup_capture",outcome="error"} 1`,
		`settle_gateway_calls_total{gateway="sim",op="lookup_void",outcome="error"} 1`,
		`settle_gateway_call_seconds_count{gateway="sim",op="charge"} 1`,
		`settle_gateway_call_seconds_count{gateway="sim",op="lookup"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestStoreGauges: the store's gauges know every order state, the
// authorized, voided and expired ones among them, and export the
// captures and voids by state and the authorizations near their
// capture_before, as the alert rules read them.
func TestStoreGauges(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://settle@127.0.0.1:1/none") // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := telemetry.NewMetrics()
	m.WatchStore(func(context.Context) (order.Stats, error) {
		return order.Stats{
			ByState: map[order.State]int64{order.StateAuthorized: 4, order.StateVoided: 2, order.StateExpired: 1},
			Holds: order.HoldStats{Expiring: 3,
				CapturesByState: map[order.CaptureState]int64{order.CaptureNeedsReview: 2, order.CaptureSucceeded: 5},
				VoidsByState:    map[order.VoidState]int64{order.VoidNeedsReview: 1}},
		}, nil
	}, pool)
	rec := httptest.NewRecorder()
	m.Handler(func(context.Context) error { return nil }).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`settle_orders{state="AUTHORIZED"} 4`,
		`settle_orders{state="VOIDED"} 2`,
		`settle_orders{state="EXPIRED"} 1`,
		`settle_orders{state="PAID"} 0`,
		`settle_authorizations_expiring{within="24h"} 3`,
		`settle_captures{state="NEEDS_REVIEW"} 2`,
		`settle_captures{state="SUCCEEDED"} 5`,
		`settle_captures{state="CAPTURING"} 0`,
		`settle_voids{state="NEEDS_REVIEW"} 1`,
		`settle_voids{state="VOIDING"} 0`,
		`settle_stats_up 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
