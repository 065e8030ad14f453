package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestMetricsMoveWithCharges runs settle serve with a reconciler and a
// metrics listener, makes a charge, a timeout and a reconcile, and finds
// the counters moved on /metrics.
func TestMetricsMoveWithCharges(t *testing.T) {
	t.Parallel()
	gw := sim.New(sim.Options{ClientTimeout: simHold})
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
		// At least one lookup: the reconciler can lease the timed-out
		// order the moment its claim's lease ends, before the call's own
		// settle moves it on, and lose that race; it then looks again.
		`settle_gateway_calls_total{gateway="refpsp",op="lookup",outcome="succeeded"} `,
		`settle_reconcile_checks_total{result="succeed"} 1`,
		`settle_orders{state="PAID"} 2`,
		`settle_orders{state="CHARGING"} 0`,
		`settle_reconcile_backlog 0`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="ChargeOrder",grpc_service="settle.v1.OrderService",grpc_type="unary"} 2`,
		`settle_gateway_call_seconds_count{gateway="refpsp",op="charge"} 2`,
		`settle_db_pool_max_connections`,
		// serve admits its calls that write (admission control is on
		// by default).
		`settle_admission_admitted_total{grpc_method="/settle.v1.OrderService/ChargeOrder"} 2`,
		`settle_admission_wait_seconds_count 4`,
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

// TestRefusedMetricAndAlert: Stripe refusing Settle's key, with a 401 (a
// revoked or wrong key) or a 403 (a restricted key without the
// permission), is counted by settle_gateway_calls_total with
// outcome="refused", and the alert rule SettleGatewayRefusedCredentials
// selects exactly that series, grouped by labels it has, so the alert
// fires on the first refusal.
func TestRefusedMetricAndAlert(t *testing.T) {
	t.Parallel()
	expr := alertExpr(t, "SettleGatewayRefusedCredentials")
	for _, tc := range []struct {
		name, key string
		status    int
	}{
		{"401 revoked key", "sk_test_revoked", http.StatusUnauthorized},
		{"403 restricted key", "rk_test_readonly", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := stripetest.New(stripetest.Options{SecretKey: "sk_test_settle", RestrictedKey: "rk_test_readonly"})
			fs := httptest.NewServer(fake)
			t.Cleanup(fs.Close)
			hs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: simHold}))
			t.Cleanup(hs.Close)
			addr, metricsAddr := freeAddr(t), freeAddr(t)
			srv := start(t, append(crashEnv(postgrestest.URL(t), hs.URL), "SETTLE_METRICS_LISTEN="+metricsAddr,
				"STRIPE_SECRET_KEY="+tc.key, "STRIPE_API_BASE="+fs.URL), "serve", "--listen", addr)
			c := dial(t, addr)
			waitServing(t, c, srv)
			ctx := context.Background()
			o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "refused-" + tc.key,
				Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: stripetest.TokenVisa, Gateway: "stripe"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: "refused-req-1"})
			if status.Code(err) != codes.Internal {
				t.Fatalf("ChargeOrder = %v; want INTERNAL (a refusal of Settle's key)", err)
			}
			if n := fake.Count(http.MethodPost, ""); n != 1 {
				t.Fatalf("the fake saw %d POSTs, want the one it refused with %d", n, tc.status)
			}
			series := `settle_gateway_calls_total{gateway="stripe",op="charge",outcome="refused"}`
			body := scrape(t, "http://"+metricsAddr+"/metrics")
			if !strings.Contains(body, series+" 1\n") {
				t.Fatalf("/metrics lacks %s 1:\n%s", series, grepSettle(body))
			}
			checkAlertSelects(t, expr, series)
		})
	}
}

// alertFiles are the alert rule files in deploy/prometheus: alerts.yml,
// and those an operator loads for some deployments only (alerts-ha.yml).
func alertFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "prometheus", "alerts*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no alert rule files in deploy/prometheus: %v", err)
	}
	return files
}

// alertExpr is the expression of the alert rule name in
// deploy/prometheus's alert rule files.
func alertExpr(t *testing.T, name string) string {
	t.Helper()
	for _, f := range alertFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var file struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(b, &file); err != nil {
			t.Fatal(err)
		}
		for _, g := range file.Groups {
			for _, r := range g.Rules {
				if r.Alert == name {
					return r.Expr
				}
			}
		}
	}
	t.Fatalf("deploy/prometheus has no alert rule %s", name)
	return ""
}

var (
	// selectorRE matches a PromQL series selector with label matchers, and
	// matcherRE one equality matcher in it.
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)"\s*$`)
	byRE       = regexp.MustCompile(`by\s*\(([^)]*)\)`)
)

// checkAlertSelects checks that every series selector of expr selects the
// series (a line of /metrics, name{labels}), by name and equality
// matchers, and that it groups by labels the series has.
func checkAlertSelects(t *testing.T, expr, series string) {
	t.Helper()
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	have := map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		k, v, _ := strings.Cut(kv, "=")
		have[k] = strings.Trim(v, `"`)
	}
	sels := selectorRE.FindAllStringSubmatch(expr, -1)
	if len(sels) == 0 {
		t.Fatalf("alert expression %q selects no series with matchers", expr)
	}
	for _, sel := range sels {
		if sel[1] != name {
			t.Errorf("alert expression selects %s, not %s", sel[1], name)
			continue
		}
		for _, m := range strings.Split(sel[2], ",") {
			mm := matcherRE.FindStringSubmatch(m)
			switch {
			case mm == nil:
				t.Errorf("alert expression: matcher %q does not parse", m)
			case mm[2] != "=":
				t.Errorf("alert expression: matcher %q is not an equality; this test reads only those", m)
			case have[mm[1]] != mm[3]:
				t.Errorf("alert expression: %s=%q does not select %s", mm[1], mm[3], series)
			}
		}
	}
	for _, by := range byRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(by[1], ",") {
			if l = strings.TrimSpace(l); have[l] == "" {
				t.Errorf("alert expression groups by %q, which %s does not have", l, series)
			}
		}
	}
}

// clauseRE matches one clause of an alert expression that alertFires
// evaluates: max(selector) compared with a number.
var clauseRE = regexp.MustCompile(`^max\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s*\)\s*(==|!=|>=|<=|>|<)\s*([0-9.]+)$`)

// alertFires evaluates expr against one scrape of /metrics (body), as
// Prometheus would with that process the only one scraped: expr must be
// clauses "max(selector) <op> <number>" joined by "and on()", which is
// what the rules about the database's standbys are, or alternatives of
// those joined by "or" (the captures' and voids' reviews); the test fails
// on any other form rather than guess. A clause whose selector matches no
// series is false, as an empty vector is in PromQL.
func alertFires(t *testing.T, expr, body string) bool {
	t.Helper()
	for _, alt := range strings.Split(strings.Join(strings.Fields(expr), " "), " or ") {
		if allClausesHold(t, alt, body) {
			return true
		}
	}
	return false
}

// allClausesHold evaluates clauses joined by "and on()" for alertFires.
func allClausesHold(t *testing.T, expr, body string) bool {
	t.Helper()
	fires := true
	for _, clause := range strings.Split(expr, " and on() ") {
		m := clauseRE.FindStringSubmatch(strings.TrimSpace(clause))
		if m == nil {
			t.Fatalf("alert expression clause %q is not max(selector) <op> <number>, the form this test evaluates", clause)
		}
		name, matchers, op := m[1], map[string]string{}, m[3]
		if m[2] != "" {
			for _, s := range strings.Split(m[2], ",") {
				mm := matcherRE.FindStringSubmatch(s)
				if mm == nil || mm[2] != "=" {
					t.Fatalf("alert expression: matcher %q is not an equality; this test reads only those", s)
				}
				matchers[mm[1]] = mm[3]
			}
		}
		want, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatal(err)
		}
		found, highest := false, 0.0
		for _, line := range strings.Split(body, "\n") {
			series, value, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			n, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
			if n != name {
				continue
			}
			have := map[string]string{}
			for _, kv := range strings.Split(labels, ",") {
				k, v, _ := strings.Cut(kv, "=")
				have[k] = strings.Trim(v, `"`)
			}
			selected := true
			for k, v := range matchers {
				selected = selected && have[k] == v
			}
			v, err := strconv.ParseFloat(value, 64)
			if !selected || err != nil {
				continue
			}
			if !found || v > highest {
				found, highest = true, v
			}
		}
		holds := found && map[string]bool{
			"==": highest == want, "!=": highest != want, ">=": highest >= want,
			"<=": highest <= want, ">": highest > want, "<": highest < want,
		}[op]
		fires = fires && holds
	}
	return fires
}

// TestHoldMetricsAndAlerts runs settle serve with a reconciler against the
// simulator, whose authorizations last two hours: an authorization and a
// capture whose lookups fail until the reconciler gives up on it. /metrics
// then counts both orders AUTHORIZED and expiring within a day and the
// capture in review, and the alert rules SettleAuthorizationsExpiring and
// SettleCapturesInReview, which fired on neither before, fire on that
// scrape.
func TestHoldMetricsAndAlerts(t *testing.T) {
	t.Parallel()
	expiring, inReview := alertExpr(t, "SettleAuthorizationsExpiring"), alertExpr(t, "SettleCapturesInReview")
	hs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: simHold, AuthorizationLifetime: 2 * time.Hour}))
	t.Cleanup(hs.Close)
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	srv := start(t, append(crashEnv(postgrestest.URL(t), hs.URL), "SETTLE_METRICS_LISTEN="+metricsAddr),
		"serve", "--listen", addr, "--with-reconciler")
	c := dial(t, addr)
	waitServing(t, c, srv)
	body := scrape(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{`settle_authorizations_expiring{within="24h"} 0`, `settle_captures{state="NEEDS_REVIEW"} 0`,
		`settle_voids{state="NEEDS_REVIEW"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics lacks %s:\n%s", want, grepSettle(body))
		}
	}
	if alertFires(t, expiring, body) || alertFires(t, inReview, body) {
		t.Fatalf("an alert fires with no authorization:\n%s", grepSettle(body))
	}
	ctx := context.Background()
	var lookupFails string
	for _, token := range []string{"tok_ok", "tok_capture_lookup_fails"} {
		o, err := c.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "holds-" + token,
			Amount:        &settlev1.Money{Currency: "GBP", AmountMinor: 900},
			PaymentMethod: token, Capture: settlev1.CaptureMode_CAPTURE_MODE_MANUAL})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: o.GetOrder().GetId(), RequestId: "holds-req-" + token})
		if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_AUTHORIZED {
			t.Fatalf("ChargeOrder %s = %v, %v; want AUTHORIZED", token, resp.GetOrder().GetState(), err)
		}
		lookupFails = o.GetOrder().GetId()
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.CaptureOrder(cctx, &settlev1.CaptureOrderRequest{OrderId: lookupFails, RequestId: "holds-capture-1"}); err != nil {
		t.Fatalf("CaptureOrder: %v", err)
	}
	want := []string{
		`settle_orders{state="AUTHORIZED"} 2`,
		`settle_authorizations_expiring{within="24h"} 2`,
		`settle_captures{state="NEEDS_REVIEW"} 1`,
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		body = scrape(t, "http://"+metricsAddr+"/metrics")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w+"\n") {
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
		time.Sleep(200 * time.Millisecond)
	}
	if !alertFires(t, expiring, body) {
		t.Errorf("SettleAuthorizationsExpiring (%s) does not fire on:\n%s", expiring, grepSettle(body))
	}
	if !alertFires(t, inReview, body) {
		t.Errorf("SettleCapturesInReview (%s) does not fire on:\n%s", inReview, grepSettle(body))
	}
}

// TestBreakerMetricsAndAlert: the app's breakers, configured by the
// serve flags, report to /metrics: each gateway account's state from the
// start, and, after charges to a gateway nothing listens on open its
// breaker, its state open and the opening the alert
// SettleGatewayBreakerOpen counts by gateway.
func TestBreakerMetricsAndAlert(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":             postgrestest.URL(t),
		"SETTLE_REFPSP_URL":        "http://127.0.0.1:1",
		"SETTLE_REFPSP_KEY":        "sk_breaker",
		"SETTLE_NO_API_KEYS":       "true",
		"SETTLE_BREAKER_MIN_CALLS": "2",
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
	srv := httptest.NewServer(a.metrics.Handler(func(context.Context) error { return nil }))
	t.Cleanup(srv.Close)
	body := scrape(t, srv.URL+"/metrics")
	for _, want := range []string{`settle_gateway_breaker_state{gateway="refpsp"} 0`, `settle_gateway_breaker_openings_total{gateway="refpsp"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics lacks %s:\n%s", want, grepSettle(body))
		}
	}
	svc, err := a.service()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		o, err := svc.Create(ctx, order.DefaultMerchant, order.NewOrder{MerchantReference: fmt.Sprintf("breaker-%d", i),
			Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
		if err != nil {
			t.Fatal(err)
		}
		if o, _, err = svc.Charge(ctx, order.DefaultMerchant, order.ChargeInput{OrderID: o.ID, RequestID: fmt.Sprintf("breaker-req-%d", i)}); err != nil || o.State != order.StatePending {
			t.Fatalf("charge to a gateway nothing listens on: %s, %v; want PENDING (not sent)", o.State, err)
		}
	}
	body = scrape(t, srv.URL+"/metrics")
	for _, want := range []string{`settle_gateway_breaker_state{gateway="refpsp"} 2`, `settle_gateway_breaker_openings_total{gateway="refpsp"} 1`} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("/metrics lacks %s:\n%s", want, grepSettle(body))
		}
	}
	expr := alertExpr(t, "SettleGatewayBreakerOpen")
	if !strings.Contains(expr, "increase(settle_gateway_breaker_openings_total[") || !strings.Contains(expr, "by (gateway)") {
		t.Errorf("alert expression %q does not count the openings by gateway", expr)
	}
}
