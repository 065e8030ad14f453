package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestMetricsMoveWithCharges runs settle serve with a reconciler and a
// metrics listener, makes a charge, a timeout and a reconcile, and finds
// the counters moved on /metrics.
func TestMetricsMoveWithCharges(t *testing.T) {
	t.Parallel()
	gw := sim.New(sim.Options{ClientTimeout: time.Second})
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	srv := start(t, append(crashEnv(postgrestest.URL(t), hs.URL), "SETTLE_METRICS_LISTEN="+metricsAddr),
		"serve", "--listen", addr, "--with-reconciler")
	c := dial(t, addr)
	waitServing(t, c, srv)
	ctx := context.Background()
	for i, token := range []string{"tok_ok", "tok_timeout"} {
		o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "metrics-" + token,
			Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: token})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: "metrics-req-" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`settle_gateway_calls_total{gateway="refpsp",op="charge",outcome="succeeded"} 1`,
		`settle_gateway_calls_total{gateway="refpsp",op="charge",outcome="unknown"} 1`,
		`settle_gateway_calls_total{gateway="refpsp",op="lookup",outcome="succeeded"} 1`,
		`settle_reconcile_checks_total{result="succeed"} 1`,
		`settle_orders{state="PAID"} 2`,
		`settle_orders{state="CHARGING"} 0`,
		`settle_reconcile_backlog 0`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ChargeOrder",grpc_service="settle.v1.OrderService",grpc_type="unary"} 2`,
		`settle_gateway_call_seconds_count{gateway="refpsp",op="charge"} 2`,
		`settle_db_pool_max_connections`,
	}
	// Go's profiler is served only when asked for (--pprof).
	if resp, err := http.Get("http://" + metricsAddr + "/debug/pprof/"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without --pprof: %s, want 404", resp.Status)
	}
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		body = scrape(t, "http://"+metricsAddr+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s:\n%s", missing, grepSettle(body))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := scrape(t, "http://"+metricsAddr+path); got != "ok\n" {
			t.Fatalf("%s = %q", path, got)
		}
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepSettle(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "settle_") || strings.HasPrefix(l, "grpc_server_handled_total") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
