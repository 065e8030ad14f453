package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestDevPortTaken: with each of dev's ports taken in turn, settle dev
// exits at once, non-zero, with one line naming the listener, the address
// and the cause, before it starts a database or prints a banner.
func TestDevPortTaken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, what string }{
		{"listen", "gRPC"},
		{"json-listen", "JSON"},
		{"console-listen", "console"},
		{"webhook-listen", "webhook"},
		{"metrics-listen", "metrics"},
		{"sim-addr", "simulator"},
		{"sim2-addr", "second simulator"},
		{"event-receiver-addr", "events receiver"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			t.Parallel()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			addrs := map[string]string{"listen": freeAddr(t), "json-listen": freeAddr(t), "console-listen": freeAddr(t), "webhook-listen": freeAddr(t), "metrics-listen": freeAddr(t),
				"sim-addr": "127.0.0.1:0", "sim2-addr": "127.0.0.1:0", "event-receiver-addr": "127.0.0.1:0"}
			addrs[tc.flag] = taken.Addr().String()
			args := []string{"dev", "-keys-file", filepath.Join(t.TempDir(), "keys")}
			for f, a := range addrs {
				args = append(args, "-"+f, a)
			}
			p := start(t, nil, args...)
			st := p.waitExit(t, 20*time.Second)
			out := p.output()
			want := fmt.Sprintf("settle dev: %s listener %s: address already in use (another settle running? pick another address with -%s)\n",
				tc.what, taken.Addr(), tc.flag)
			if st.ExitStatus() == 0 || out != want {
				t.Fatalf("dev with %s taken: exit %d, output\n%s\nwant a non-zero exit and only\n%s", tc.flag, st.ExitStatus(), out, want)
			}
		})
	}
}

// TestServePortTaken: serve, too, ends at once when its webhook port is
// taken, instead of serving gRPC without it.
func TestServePortTaken(t *testing.T) {
	t.Parallel()
	url := postgrestest.URL(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	env := map[string]string{"DATABASE_URL": url, "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "k",
		"SETTLE_NO_API_KEYS": "true", "SETTLE_ALLOW_UNSAFE_DATABASE": "true", "SETTLE_REFPSP_WEBHOOK_SECRETS": "whsec_0123456789abcdef0123456789"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out lockedBuffer
	err = run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--webhook-listen", taken.Addr().String()}, mapEnv(env), &out, &out)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "webhook listener "+taken.Addr().String()+": address already in use") {
		t.Fatalf("serve with the webhook port taken: %v (context %v), want the webhook listener's failure at once\n%s", err, ctx.Err(), out.String())
	}
}

// TestHelpExitsZero: every command's -h is an answer, not a failure, and
// dev's shows its own defaults and the Stripe key.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "reconcile", "deliver", "migrate", "dev", "gatewaysim", "chaos", "bench"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{cmd, "-h"}, mapEnv(nil), &out, &out); err != nil {
			t.Errorf("settle %s -h: %v", cmd, err)
		}
		if !strings.Contains(strings.ToLower(out.String()), "settle "+cmd) {
			t.Errorf("settle %s -h printed no usage:\n%s", cmd, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"dev", "-h"}, mapEnv(nil), &out, &out); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, want := range []string{"env STRIPE_SECRET_KEY", "-keys-file", "-api-keys", `default "127.0.0.1:0"`, `default "5s,15s,30s,1m"`, `(env SETTLE_WEBHOOK_LISTEN, default "127.0.0.1:8090")`} {
		if !strings.Contains(help, want) {
			t.Errorf("settle dev -h lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "-no-api-keys") || strings.Contains(help, "-refpsp-url") {
		t.Errorf("settle dev -h lists flags dev does not take:\n%s", help)
	}
}

// TestConfigReference: settle config reads in 100 columns; -markdown is
// the docs' table.
func TestConfigReference(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"config"}, mapEnv(nil), &out, &out); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(out.String()) {
		if n := len([]rune(strings.TrimRight(line, "\n"))); n > 100 {
			t.Errorf("settle config: a line of %d columns: %s", n, line)
		}
	}
	if !strings.Contains(out.String(), "--database-url  (env DATABASE_URL, default none)\n") {
		t.Errorf("settle config lacks database-url's line:\n%s", out.String())
	}
}

// TestConfigPrintsEffectiveConfiguration: settle config serve (and serve
// -print-config) prints what serve would run with, and where each value
// came from, with every secret redacted; it starts nothing. settle config
// dev (and dev -print-config) lists dev's own flags too.
func TestConfigPrintsEffectiveConfiguration(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://settle:hunter2pass@db1/settle", "STRIPE_SECRET_KEY": "sk_test_secretvalue123",
		"SETTLE_REFPSP_KEY": "refpspsecretkey", "SETTLE_GATEWAY_TIMEOUT": "7s"}
	serveWants := []string{"listen=127.0.0.1:6000", "(--listen)", "gateway-timeout=7s", "(SETTLE_GATEWAY_TIMEOUT)",
		"db-max-conns=16", "(default)", "database-url=postgres://settle:xxxxx@db1/settle", "stripe-secret-key=(redacted)", "refpsp-key=(redacted)"}
	devArgs := []string{"-sim-rate-decline", "0.25", "-sim-events-secrets", "whsec_devsecretvalue", "-data-dir", "/var/dev-data"}
	devWants := []string{"reconcile-schedule=5s,15s,30s,1m", "stripe-secret-key=(redacted)", "sim-rate-decline=0.25", "(--sim-rate-decline)",
		"sim-events-secrets=(redacted)", "data-dir=/var/dev-data", "(--data-dir)", "sim-addr=127.0.0.1:0", "sim-timeout-wait=30s", "sim-authorization-lifetime=168h0m0s",
		"keys-file=", "citus=false", "standby=false", "event-receiver-addr=127.0.0.1:0"}
	for _, tt := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"config", "serve", "-listen", "127.0.0.1:6000"}, serveWants},
		{[]string{"serve", "-print-config", "-listen", "127.0.0.1:6000"}, serveWants},
		{append([]string{"config", "dev"}, devArgs...), devWants},
		{append([]string{"dev", "-print-config"}, devArgs...), devWants},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), tt.args, mapEnv(env), &out, &out); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		got := out.String()
		for _, want := range tt.wants {
			if !strings.Contains(got, want) {
				t.Errorf("%v lacks %q:\n%s", tt.args, want, got)
			}
		}
		for _, secret := range []string{"hunter2pass", "sk_test_secretvalue123", "refpspsecretkey", "whsec_devsecretvalue"} {
			if strings.Contains(got, secret) {
				t.Errorf("%v shows the secret %q:\n%s", tt.args, secret, got)
			}
		}
		if strings.Contains(got, "print-config=") {
			t.Errorf("%v lists -print-config itself:\n%s", tt.args, got)
		}
	}
	// A DSN's password, too.
	if got := redact("database-url", "host=db1 user=settle password=hunter2pass dbname=settle"); strings.Contains(got, "hunter2pass") {
		t.Errorf("redact(DSN) = %q", got)
	}
}

// TestDevKeysFile: dev's keys are made once and read back at every later
// start; two starts at once agree on one pair.
func TestDevKeysFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "settle", "dev-keys")
	var wg sync.WaitGroup
	got := make([]devKeys, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = loadDevKeys(path) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] || got[i].checkout == "" || got[i].ops == "" {
			t.Fatalf("start %d: %+v, %v; want the same keys as start 0, %+v", i, got[i], errs[i], got[0])
		}
	}
	again, err := loadDevKeys(path)
	if err != nil || again != got[0] {
		t.Fatalf("a later start: %+v, %v; want %+v", again, err, got[0])
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keys file: %v, %v; want mode 0600", fi, err)
	}
	if d := defaultDevKeysFile(mapEnv(map[string]string{"HOME": "/home/u"})); d != "/home/u/.config/settle/dev-keys" {
		t.Errorf("default keys file = %s", d)
	}
	if d := defaultDevKeysFile(mapEnv(map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg"})); d != "/cfg/settle/dev-keys" {
		t.Errorf("default keys file with XDG_CONFIG_HOME = %s", d)
	}
}

// TestDevBannerAndAPIKeys: dev started twice on one keys file prints the
// same keys, which work, and where they are kept; the banner lists every
// token, the metrics address, which answers, and the second simulator,
// sim2, on which an order routed over sim and sim2 is paid after sim's
// technical decline. With -api-keys, dev's keys give way to the given ones.
func TestDevBannerAndAPIKeys(t *testing.T) {
	t.Parallel()
	keysFile := filepath.Join(t.TempDir(), "dev-keys")
	devRun := func(extra ...string) (banner string, stop func()) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		var out lockedBuffer
		done := make(chan error, 1)
		args := append([]string{"dev", "-keys-file", keysFile, "--listen", freeAddr(t), "--json-listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--webhook-listen", freeAddr(t)}, extra...)
		go func() {
			done <- run(ctx, args, mapEnv(map[string]string{"SETTLE_ALLOW_UNSAFE_DATABASE": "true"}), &out, &out)
		}()
		for !strings.Contains(out.String(), "Events out (") && ctx.Err() == nil {
			select {
			case err := <-done:
				t.Fatalf("dev exited: %v\n%s", err, out.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
		return out.String(), func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("dev: %v", err)
			}
		}
	}
	first, stop := devRun()
	stop()
	second, stop := devRun()
	key := bannerValue(t, second, "export SETTLE_KEY=")
	if key != bannerValue(t, first, "export SETTLE_KEY=") {
		t.Fatalf("dev's key changed across restarts:\n%s\n%s", first, second)
	}
	for _, want := range []string{"kept in " + keysFile, "sim2:      http://127.0.0.1:", "/webhooks/sim2", `"gateway":"sim2"`, "tok_3ds ", "tok_timeout_silent ", "tok_lookup_fails ", "tok_refund_lookup_fails", `"unknown_token"`, "metrics:   http://127.0.0.1:", "STRIPE_SECRET_KEY"} {
		if !strings.Contains(second, want) {
			t.Errorf("banner lacks %q:\n%s", want, second)
		}
	}
	grpcAddr := bannerValue(t, second, "gRPC:      ")
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
	if _, err := dial(t, grpcAddr).CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "banner-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}); err != nil {
		t.Errorf("CreateOrder with dev's key: %v", err)
	}
	// The banner's json: line is the JSON over HTTP listener, on a free
	// port here, answering dev's key.
	jsonURL := bannerValue(t, second, "json:      ")
	get, err := http.NewRequest(http.MethodGet, jsonURL+"/v1/orders?merchant_reference=banner-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(get); err != nil {
		t.Errorf("GET /v1/orders over JSON: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"merchantReference":"banner-1"`) {
			t.Errorf("GET %s/v1/orders?merchant_reference=banner-1 with dev's key: %d %s", jsonURL, resp.StatusCode, body)
		}
	}
	// The banner's console: line is the console, on a free port here,
	// whose login page answers.
	consoleURL := bannerValue(t, second, "console:   ")
	if resp, err := http.Get(consoleURL + "login"); err != nil {
		t.Errorf("GET the console's login page: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<form id="login"`) {
			t.Errorf("GET %slogin: %d %.500s", consoleURL, resp.StatusCode, body)
		}
	}
	devCascade(t, second)
	stop()

	mine := "sk_mine_0123456789abcdef0123"
	third, stop := devRun("-api-keys", grpcapi.HashKey(mine)+" default checkout mine")
	defer stop()
	if strings.Contains(third, "export SETTLE_KEY=") || !strings.Contains(third, "from -api-keys") {
		t.Errorf("banner with -api-keys still offers dev's keys:\n%s", third)
	}
	grpcAddr = bannerValue(t, third, "gRPC:      ")
	c := dial(t, grpcAddr)
	req := &settlev1.CreateOrderRequest{MerchantReference: "banner-2", Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}
	if _, err := c.CreateOrder(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+mine), req); err != nil {
		t.Errorf("CreateOrder with the -api-keys key: %v", err)
	}
	if _, err := c.CreateOrder(ctx, req); err == nil {
		t.Errorf("dev's own key still works beside -api-keys")
	}
}

// bannerValue returns the word after prefix in the banner.
func bannerValue(t *testing.T, banner, prefix string) string {
	t.Helper()
	_, rest, ok := strings.Cut(banner, prefix)
	if !ok {
		t.Fatalf("no %q in the banner:\n%s", prefix, banner)
	}
	return strings.Fields(rest)[0]
}

// devCascade charges an order routed over sim and sim2 on the dev whose
// banner is given: sim declines processing_error, a proven non-charge, so
// the same call cascades to sim2, which charges it in its own ledger.
func devCascade(t *testing.T, banner string) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+bannerValue(t, banner, "export SETTLE_KEY="))
	conn, err := grpc.NewClient(bannerValue(t, banner, "gRPC:      "), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	routes := []*settlev1.Route{{Gateway: "sim", PaymentMethod: "tok_decline_processing_error"}, {Gateway: "sim2", PaymentMethod: "tok_ok"}}
	res, err := settlev1.NewOrderServiceClient(conn).CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "cascade-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 700}, Routes: routes, RequestId: "cascade-1-click-1"})
	if err != nil {
		t.Fatalf("CreateAndChargeOrder routed over sim and sim2: %v", err)
	}
	if o := res.GetOrder(); o.GetState() != settlev1.OrderState_ORDER_STATE_PAID || o.GetGateway() != "sim2" {
		t.Fatalf("order routed over sim and sim2: %s on %q, want PAID on sim2", o.GetState(), o.GetGateway())
	}
	opsCtx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+bannerValue(t, banner, "export SETTLE_OPS_KEY="))
	h, err := settlev1.NewOpsServiceClient(conn).GetOrderHistory(opsCtx, &settlev1.GetOrderHistoryRequest{OrderId: res.GetOrder().GetId()})
	if err != nil {
		t.Fatalf("GetOrderHistory: %v", err)
	}
	var path []string
	for _, a := range h.GetAttempts() {
		path = append(path, fmt.Sprintf("%s %s %s (%s)", a.GetGateway(), a.GetOutcome(), a.GetDeclineCode(), a.GetCascadeAfter()))
	}
	want := []string{"sim ATTEMPT_OUTCOME_DECLINED processing_error ()", "sim2 ATTEMPT_OUTCOME_SUCCEEDED  (sim declined: processing_error)"}
	if !slices.Equal(path, want) {
		t.Errorf("attempts of the cascaded order:\n%s\nwant\n%s", strings.Join(path, "\n"), strings.Join(want, "\n"))
	}
	// Each simulator is an account of its own: the charge is in sim2's
	// ledger only.
	for _, l := range []struct{ url, want string }{{bannerValue(t, banner, "gateway:   "), `"status":"declined"`}, {bannerValue(t, banner, "sim2:      "), `"status":"succeeded"`}} {
		resp, err := http.Get(l.url + "/v1/ledger")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n := strings.Count(string(body), `"description":"cascade-1"`); n != 1 || !strings.Contains(string(body), l.want) {
			t.Errorf("ledger of %s: %d charges of cascade-1, want 1 (%s):\n%s", l.url, n, l.want, body)
		}
	}
}
