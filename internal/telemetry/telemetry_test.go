package telemetry_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
