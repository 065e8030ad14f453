package telemetry_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/settlepay/settle/internal/lab/bench"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/telemetry"
)

// TestGatewaySpan: each gateway call has a span with the order and attempt
// ids and the outcome, and never the payment method.
func TestGatewaySpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	gw := telemetry.NewMetrics().Gateway("sim", bench.NewInstant(), tp.Tracer(telemetry.TracerName))
	req := order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), MerchantReference: "span-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_secret_span"}
	if _, err := gw.Charge(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Lookup(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "gateway.charge" || spans[1].Name != "gateway.lookup" {
		t.Fatalf("spans %v, want gateway.charge and gateway.lookup", spans)
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
}
