package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/console"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

const (
	checkoutKey = "sk_test_console_checkout_0123456789"
	opsKey      = "sk_test_console_ops_0123456789"
)

// stack is Settle with its console: a real gRPC server on a fresh
// database, charging through the simulator, and the console on an
// httptest server in front of the server's in-process handler.
type stack struct {
	orders  settlev1.OrderServiceClient
	ops     settlev1.OpsServiceClient
	store   *postgres.Store
	pool    *pgxpool.Pool
	console *httptest.Server
	srv     *grpcapi.Server
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, postgrestest.URL(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	gs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: time.Second}))
	t.Cleanup(gs.Close)
	gw, err := refpsp.New(refpsp.Config{BaseURL: gs.URL, APIKey: "sk_sim_test", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	log := logs.Logger()
	store := postgres.NewStore(pool)
	gateways := map[string]order.Gateway{"sim": gw}
	svc, err := order.NewService(store, gateways, order.Config{DefaultGateway: "sim", GatewayTimeout: 500 * time.Millisecond,
		Grace: time.Second, FirstRecheck: time.Minute}, log)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(store, gateways, reconcile.Config{Schedule: []time.Duration{time.Minute}, BatchSize: 10, Concurrency: 1,
		PollInterval: time.Second, LookupTimeout: 500 * time.Millisecond, NoShowHorizon: time.Hour}, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := grpcapi.ParseKeys(fmt.Sprintf("%s %s checkout shop; %s %s ops alice",
		grpcapi.HashKey(checkoutKey), order.DefaultMerchant, grpcapi.HashKey(opsKey), order.DefaultMerchant))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcapi.NewServer(svc, store, rec, log, grpcapi.Options{Keys: keys})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &stack{orders: settlev1.NewOrderServiceClient(conn), ops: settlev1.NewOpsServiceClient(conn), store: store, pool: pool, srv: srv}
	s.console = s.newConsole(t)
	return s
}

// newConsole serves a console of its own (its own sessions and login
// limits) in front of the stack's API.
func (s *stack) newConsole(t *testing.T) *httptest.Server {
	t.Helper()
	c, err := console.New(console.Options{API: s.srv.InProcess()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)
	return hs
}

func as(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

// browser is a cookie-keeping client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, hs *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: hs.URL, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// reply is a page as the browser got it.
type reply struct {
	code     int
	body     string
	header   http.Header
	location string
}

func (b *browser) do(method, path string, form url.Values) reply {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	all, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: string(all), header: resp.Header, location: resp.Header.Get("Location")}
}

func (b *browser) get(path string) reply { return b.do(http.MethodGet, path, nil) }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page's forms.
func csrf(t *testing.T, r reply) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%.2000s", r.body)
	}
	return m[1]
}

func (b *browser) login(key string) reply {
	b.t.Helper()
	tok := csrf(b.t, b.get("/login"))
	return b.do(http.MethodPost, "/login", url.Values{"csrf": {tok}, "key": {key}})
}

// TestLoginSessionAndHeaders: pages need a session; only an ops key logs
// in; the session cookie is HttpOnly and SameSite=Strict; a POST without
// the CSRF token is refused; every answer carries the CSP and its
// neighbours; a client address's failed logins are limited.
func TestLoginSessionAndHeaders(t *testing.T) {
	s := newStack(t)
	b := newBrowser(t, s.console)
	if r := b.get("/review"); r.code != http.StatusSeeOther || r.location != "/login" {
		t.Fatalf("GET /review without a session: %d %q, want 303 to /login", r.code, r.location)
	}
	r := b.get("/login")
	for h, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options":  "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
	} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	for _, want := range []string{`<form id="login"`, `name="key" type="password"`, `id="login-submit"`, `<main id="main"`, `href="#main"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the login page has no %s", want)
		}
	}
	if strings.Contains(strings.ToLower(r.body), "<script") {
		t.Error("the login page has a script")
	}

	if r := b.login(checkoutKey); r.code != http.StatusForbidden || !strings.Contains(r.body, `<p id="error" role="alert">not an ops key</p>`) {
		t.Errorf("log in with a checkout key: %d\n%.1500s", r.code, r.body)
	}
	if r := b.login("sk_nope"); r.code != http.StatusUnauthorized || !strings.Contains(r.body, "wrong key") {
		t.Errorf("log in with a wrong key: %d\n%.1500s", r.code, r.body)
	}
	if r := b.do(http.MethodPost, "/login", url.Values{"key": {opsKey}}); r.code != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
		t.Errorf("log in without the CSRF token: %d", r.code)
	}
	r = b.login(opsKey)
	if r.code != http.StatusSeeOther || r.location != "/review" {
		t.Fatalf("log in with the ops key: %d %q\n%.1500s", r.code, r.location, r.body)
	}
	cookie := ""
	for _, c := range r.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, console.CookieName+"=") {
			cookie = c
		}
	}
	for _, want := range []string{"Path=/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, opsKey) {
		t.Error("the cookie holds the key")
	}
	page := b.get("/review")
	if page.code != http.StatusOK || !strings.Contains(page.body, `<p id="empty">`) || !strings.Contains(page.body, `<form id="logout"`) {
		t.Errorf("the empty review queue: %d\n%.2000s", page.code, page.body)
	}
	if r := b.do(http.MethodPost, "/logout", url.Values{"csrf": {"forged"}}); r.code != http.StatusForbidden || !strings.Contains(r.body, "CSRF") {
		t.Errorf("POST with a forged CSRF token: %d", r.code)
	}
	if r := b.do(http.MethodPost, "/logout", url.Values{"csrf": {csrf(t, page)}}); r.code != http.StatusSeeOther {
		t.Errorf("log out: %d", r.code)
	}
	if r := b.get("/review"); r.code != http.StatusSeeOther {
		t.Errorf("GET /review after logging out: %d, want 303", r.code)
	}

	// Five failed logins a minute; the sixth try is refused unread.
	limited := newBrowser(t, s.newConsole(t))
	for i := range 5 {
		if r := limited.login("sk_wrong"); r.code != http.StatusUnauthorized {
			t.Fatalf("failed login %d: %d", i+1, r.code)
		}
	}
	if r := limited.login(opsKey); r.code != http.StatusTooManyRequests {
		t.Errorf("a login past the limit: %d, want 429", r.code)
	}
}

// TestSearchOrderPageAndRefund: a search by merchant reference goes to
// the order; its page shows the reference as text, the summary, the
// timeline and the actions; a refund through its form succeeds, says so
// in the flash, and is in the timeline with the operator as its actor.
func TestSearchOrderPageAndRefund(t *testing.T) {
	s := newStack(t)
	const ref = "<script>alert(1)</script>"
	resp, err := s.orders.CreateAndChargeOrder(as(checkoutKey), &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref,
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", RequestId: "console-charge"})
	if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
		t.Fatalf("charge: %v, %v", resp, err)
	}
	id := resp.GetOrder().GetId()
	b := newBrowser(t, s.console)
	b.login(opsKey)

	if r := b.get("/search?q=" + url.QueryEscape(ref)); r.code != http.StatusSeeOther || r.location != "/orders/"+id {
		t.Fatalf("search by reference: %d %q", r.code, r.location)
	}
	if r := b.get("/search?q=" + strings.ToUpper(id)); r.code != http.StatusSeeOther || r.location != "/orders/"+id {
		t.Errorf("search by order id: %d %q", r.code, r.location)
	}
	if r := b.get("/search?q=nothing-like-it"); r.code != http.StatusOK || !strings.Contains(r.body, `<p id="none">`) {
		t.Errorf("search for nothing: %d\n%.1500s", r.code, r.body)
	}
	for _, q := range []string{resp.GetAttempt().GetId(), resp.GetAttempt().GetGatewayChargeId(), "console-charge"} {
		if r := b.get("/search?q=" + url.QueryEscape(q)); r.code != http.StatusSeeOther || r.location != "/orders/"+id {
			t.Errorf("search by %q: %d %q", q, r.code, r.location)
		}
	}

	// A failed delivery try of the order's first event is in its timeline.
	evs, err := s.ops.ListOrderEvents(as(opsKey), &settlev1.ListOrderEventsRequest{OrderId: id})
	if err != nil || len(evs.GetEvents()) == 0 {
		t.Fatalf("events out: %v, %v", evs, err)
	}
	num, err := order.ParseEventID(evs.GetEvents()[0].GetEventId())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.RecordDeliveries(context.Background(), []order.Delivery{{MerchantID: order.DefaultMerchant, Num: num,
		Outcome: order.DeliveryRetry, Status: 503, Backoff: time.Hour, Attempt: 1, Error: "endpoint answered 503"}}, 24*time.Hour); err != nil {
		t.Fatal(err)
	}

	page := b.get("/orders/" + id)
	if page.code != http.StatusOK {
		t.Fatalf("order page: %d\n%.2000s", page.code, page.body)
	}
	if strings.Contains(page.body, ref) || !strings.Contains(page.body, `<h1 id="order-title">Order &lt;script&gt;alert(1)&lt;/script&gt;</h1>`) {
		t.Errorf("the reference is not escaped text:\n%.2000s", page.body)
	}
	for _, want := range []string{`<dl id="order-summary">`, `<ol id="timeline">`, `data-kind="transition"`, `data-kind="attempt"`,
		"Try 1 of " + evs.GetEvents()[0].GetEventId() + " failed: HTTP 503", "endpoint answered 503",
		`<section id="actions"`, `<form id="reconcile"`, `<form id="refund"`, `name="amount_minor"`, `name="request_id"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the order page has no %s", want)
		}
	}
	if strings.Contains(page.body, `<form id="capture"`) || strings.Contains(page.body, `<form id="resolve"`) {
		t.Error("a paid order offers capture or resolve")
	}
	rid := regexp.MustCompile(`name="request_id" value="([^"]+)"`).FindStringSubmatch(page.body)[1]
	form := url.Values{"csrf": {csrf(t, page)}, "request_id": {rid}, "amount_minor": {"500"}, "reason": {"customer asked"}}
	r := b.do(http.MethodPost, "/orders/"+id+"/refund", form)
	if r.code != http.StatusSeeOther || r.location != "/orders/"+id {
		t.Fatalf("refund: %d %q", r.code, r.location)
	}
	// The same form again is the same refund.
	b.do(http.MethodPost, "/orders/"+id+"/refund", form)
	after := b.get("/orders/" + id)
	if !strings.Contains(after.body, `<div id="flash" role="status">Refund SUCCEEDED</div>`) {
		t.Errorf("no flash of the refund:\n%.2000s", after.body)
	}
	if !strings.Contains(after.body, `data-kind="refund"`) || !strings.Contains(after.body, "5.00 GBP") || !strings.Contains(after.body, "by ops:alice") {
		t.Errorf("the refund is not in the timeline with its actor:\n%s", after.body)
	}
	h, err := s.ops.GetOrderHistory(as(opsKey), &settlev1.GetOrderHistoryRequest{OrderId: id})
	if err != nil || len(h.GetRefunds()) != 1 || h.GetRefunds()[0].GetActor() != "ops:alice" || h.GetOrder().GetRefunded().GetAmountMinor() != 500 {
		t.Errorf("the API's history: %v, %v; want one refund of 500 by ops:alice", h.GetRefunds(), err)
	}
	if r := b.do(http.MethodPost, "/orders/"+id+"/refund", url.Values{"csrf": {csrf(t, after)}, "request_id": {"another"},
		"amount_minor": {"99999"}, "reason": {"too much"}}); r.code != http.StatusSeeOther {
		t.Fatalf("refund too much: %d", r.code)
	}
	if r := b.get("/orders/" + id); !strings.Contains(r.body, `<div id="flash"`) || strings.Contains(r.body, "Refund SUCCEEDED") {
		t.Errorf("a refused refund's flash:\n%.1500s", r.body)
	}
}

// TestReviewItemResolves: a possible double charge is in the queue with
// its form; resolving it through the console asks the gateway first and
// records the operator's key as the actor.
func TestReviewItemResolves(t *testing.T) {
	s := newStack(t)
	resp, err := s.orders.CreateAndChargeOrder(as(checkoutKey), &settlev1.CreateAndChargeOrderRequest{MerchantReference: "double-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_decline", RequestId: "double-1"})
	if err != nil {
		t.Fatal(err)
	}
	o := resp.GetOrder()
	r, err := s.store.RecordGatewayEvent(context.Background(), order.GatewayEvent{Gateway: "sim", ID: "evt-double", Type: "charge.succeeded",
		ObjectID: "ch_double", AttemptID: o.GetCurrentAttemptId(), Succeeded: true, Outcome: order.OutcomeSucceeded})
	if err != nil || r.Result != order.EventReview {
		t.Fatalf("record the event: %+v, %v", r, err)
	}
	b := newBrowser(t, s.console)
	b.login(opsKey)
	page := b.get("/review")
	m := regexp.MustCompile(`<tr class="review-item" data-id="([^"]+)" data-kind="POSSIBLE_DOUBLE_CHARGE" data-order-id="` + o.GetId() + `">`).FindStringSubmatch(page.body)
	if m == nil || !strings.Contains(page.body, `<form class="resolve"`) || !strings.Contains(page.body, `class="order-link" href="/orders/`+o.GetId()) {
		t.Fatalf("the review queue:\n%s", page.body)
	}
	item := m[1]
	res := b.do(http.MethodPost, "/review/"+item+"/resolve", url.Values{"csrf": {csrf(t, page)}, "order_id": {o.GetId()},
		"kind": {"item"}, "decision": {"NOT_CHARGED"}, "note": {"the gateway's dashboard shows no charge"}})
	if res.code != http.StatusSeeOther || res.location != "/review" {
		t.Fatalf("resolve: %d %q", res.code, res.location)
	}
	after := b.get("/review")
	if !strings.Contains(after.body, `<div id="flash" role="status">Review item resolved: NOT_CHARGED by ops:alice</div>`) ||
		!strings.Contains(after.body, `<p id="empty">`) {
		t.Errorf("after resolving:\n%s", after.body)
	}
	items, err := s.ops.ListReviewItems(as(opsKey), &settlev1.ListReviewItemsRequest{})
	if err != nil || len(items.GetItems()) != 0 {
		t.Errorf("the API's queue: %v, %v; want empty", items, err)
	}
}

// TestAuditFindingResolves: a finding of the gateway audit with no order
// (a charge made outside Settle) is in the queue with both sides shown as
// text, and resolving it with a note records the operator as its actor.
func TestAuditFindingResolves(t *testing.T) {
	s := newStack(t)
	var id string
	if err := s.pool.QueryRow(context.Background(), `INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway,
		class, gateway_record_id, record_key, gateway_record) VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'sim', 'FOREIGN',
		'ch_outside', 'ch_outside', '{"id": "ch_outside", "reference": "<b>x</b>"}') RETURNING id::text`,
		order.DefaultMerchant).Scan(&id); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.console)
	b.login(opsKey)
	page := b.get("/review")
	if !strings.Contains(page.body, `data-id="`+id+`" data-kind="AUDIT_FINDING"`) || !strings.Contains(page.body, `name="kind" value="finding"`) ||
		!strings.Contains(page.body, "&lt;b&gt;x&lt;/b&gt;") || strings.Contains(page.body, "<b>x</b>") {
		t.Fatalf("the review queue:\n%s", page.body)
	}
	form := url.Values{"csrf": {csrf(t, page)}, "order_id": {""}, "merchant_id": {order.DefaultMerchant}, "kind": {"finding"},
		"decision": {"DEALT_WITH"}, "note": {"a manual charge by the shop's staff"}}
	if r := b.do(http.MethodPost, "/review/"+id+"/resolve", form); r.code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", r.code)
	}
	after := b.get("/review")
	if !strings.Contains(after.body, `Audit finding resolved by ops:alice`) || !strings.Contains(after.body, `<p id="empty">`) {
		t.Errorf("after resolving:\n%s", after.body)
	}
}
