package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/browsertest"
)

// updateScreenshots makes TestConsoleScreenshots write docs/console/.
var updateScreenshots = flag.Bool("update-screenshots", false, "rewrite the console's screenshots in docs/console/")

// consoleRef is the merchant reference of the paid order: markup a
// merchant chose, which the console must show as text.
const consoleRef = "console-<b>x</b><script>alert(1)</script>"

// consoleDev is a settle dev with its console, and the orders the console
// tests look at.
type consoleDev struct {
	console  string // the console's base URL, no trailing slash
	checkout string // dev's checkout key
	ops      string // dev's ops key
	ops1     settlev1.OpsServiceClient
	paidID   string // consoleRef's order: tok_ok, 2500 GBP
	reviewID string // an order with a possible double charge in review
}

// startConsoleDev starts settle dev with its console on a free port, as an
// operator would (settle dev -console-listen), reads the console's
// address and dev's keys from the banner, and makes the orders: one paid
// (consoleRef), and one declined whose attempt a signed gateway event then
// reports charged, which raises a possible double charge for review.
func startConsoleDev(t *testing.T) consoleDev {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	var out lockedBuffer
	done := make(chan error, 1)
	addrs := distinctFreeAddrs(t, 2)
	args := []string{"dev", "-keys-file", filepath.Join(t.TempDir(), "dev-keys"), "--listen", addrs[0], "--json-listen", "127.0.0.1:0",
		"--webhook-listen", addrs[1], "--console-listen", "127.0.0.1:0"}
	go func() {
		done <- run(ctx, args, mapEnv(map[string]string{"SETTLE_ALLOW_UNSAFE_DATABASE": "true"}), &out, &out)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("settle dev: %v\n%s", err, out.String())
		}
	})
	for !strings.Contains(out.String(), "Events out (") {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("settle %v ended before its banner: %v\n%s", args, err, out.String())
		case <-ctx.Done():
			t.Fatalf("settle %v: no banner:\n%s", args, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	banner := out.String()
	d := consoleDev{
		console:  strings.TrimSuffix(bannerValue(t, banner, "console:   "), "/"),
		checkout: bannerValue(t, banner, "export SETTLE_KEY="),
		ops:      bannerValue(t, banner, "export SETTLE_OPS_KEY="),
	}
	conn, err := grpc.NewClient(bannerValue(t, banner, "gRPC:      "), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	d.ops1 = settlev1.NewOpsServiceClient(conn)
	orders := settlev1.NewOrderServiceClient(conn)
	checkoutCtx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+d.checkout)

	paid, err := orders.CreateAndChargeOrder(checkoutCtx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: consoleRef,
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 2500}, PaymentMethod: "tok_ok", RequestId: "console-paid-1"})
	if err != nil || paid.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
		t.Fatalf("charge %q with tok_ok: %v, %s", consoleRef, err, paid.GetOrder().GetState())
	}
	d.paidID = paid.GetOrder().GetId()

	// As docs/operations.md's recipe does: a declined attempt, then a
	// signed charge.succeeded for it.
	late, err := orders.CreateAndChargeOrder(checkoutCtx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: "console-late",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 900}, PaymentMethod: "tok_decline", RequestId: "console-late-1"})
	if err != nil {
		t.Fatalf("charge console-late with tok_decline: %v", err)
	}
	d.reviewID = late.GetOrder().GetId()
	body := fmt.Sprintf(`{"id":"evt_console_late","type":"charge.succeeded","created":0,"data":{"object":{"id":"ch_console_late","reference":%q,"status":"succeeded","amount":900,"currency":"GBP"}}}`,
		late.GetAttempt().GetId())
	ts := fmt.Sprint(time.Now().Unix())
	mac := hmac.New(sha256.New, []byte(bannerValue(t, banner, "export SETTLE_REFPSP_WEBHOOK_SECRET=")))
	mac.Write([]byte(ts + "." + body))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bannerValue(t, banner, "webhooks:  "), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Refpsp-Signature", "t="+ts+",v1="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(answer), `"review"`) {
		t.Fatalf("a success for the declined attempt: %d %s, want a review item", resp.StatusCode, answer)
	}
	return d
}

// openReviewItems returns the ids of the orders of the open review items.
func (d consoleDev) openReviewItems(t *testing.T) []string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+d.ops)
	res, err := d.ops1.ListReviewItems(ctx, &settlev1.ListReviewItemsRequest{PageSize: 500})
	if err != nil {
		t.Fatalf("ListReviewItems: %v", err)
	}
	var ids []string
	for _, it := range res.GetItems() {
		ids = append(ids, it.GetOrderId())
	}
	return ids
}

// login logs in to the console with key and returns the status of the
// page it ends on.
func (d consoleDev) login(ctx context.Context, t *testing.T, key string) int {
	t.Helper()
	browsertest.Navigate(ctx, t, d.console+"/login")
	browsertest.Fill(ctx, t, "form#login input[name=key]", key)
	return browsertest.Submit(ctx, t, "button#login-submit")
}

// checkLayout checks what every page of the console has: the main
// landmark, the links of the navigation, the logout form, a CSRF token in
// each POST form, and no script at all.
func checkLayout(ctx context.Context, t *testing.T, page string) {
	t.Helper()
	for _, sel := range []string{"main#main", `a[href="/review"]`, `a[href="/search"]`, `a[href="/health"]`, "form#logout"} {
		if browsertest.Count(ctx, t, sel) == 0 {
			t.Errorf("%s: no %s", page, sel)
		}
	}
	posts, tokens := browsertest.Count(ctx, t, "form[method=post i]"), browsertest.Count(ctx, t, "form[method=post i] input[type=hidden][name=csrf]")
	if posts == 0 || posts != tokens {
		t.Errorf("%s: %d POST forms, %d with a csrf input", page, posts, tokens)
	}
	if n := browsertest.Count(ctx, t, "script"); n != 0 {
		t.Errorf("%s: %d script elements", page, n)
	}
}

// scriptless says whether a Content-Security-Policy allows no script: its
// script-src, or else its default-src, is 'none'.
func scriptless(csp string) bool {
	sources := map[string]string{}
	for d := range strings.SplitSeq(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		sources[strings.ToLower(name)] = strings.TrimSpace(value)
	}
	if v, ok := sources["script-src"]; ok {
		return v == "'none'"
	}
	return sources["default-src"] == "'none'"
}

// TestConsoleInBrowser walks the operator's console in Chromium against a
// real settle dev: the login and its refusals, the review queue and a
// resolution, the search, an order's page with its timeline, a partial
// refund and the delivery of its event, the CSRF check, the health page,
// the headers, and markup in a merchant's reference shown as text.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs settle dev and Chromium; skipped with -short")
	}
	t.Parallel()
	ctx := browsertest.New(t)
	d := startConsoleDev(t)
	responses := browsertest.Record(ctx, t)

	// Unauthenticated, every page is the login page.
	browsertest.Navigate(ctx, t, d.console+"/review")
	if u := browsertest.Location(ctx, t); !strings.HasSuffix(u, "/login") && !strings.Contains(u, "/login?") {
		t.Fatalf("/review without a session ended on %s, want /login", u)
	}
	// A checkout key is not an operator's.
	d.login(ctx, t, d.checkout)
	if u := browsertest.Location(ctx, t); !strings.Contains(u, "/login") {
		t.Errorf("after logging in with the checkout key: %s, want the login page again", u)
	}
	if got := browsertest.Text(ctx, t, "p#error"); !strings.Contains(got, "not an ops key") {
		t.Errorf("login with the checkout key: p#error %q, want it to say \"not an ops key\"", got)
	}
	if d.login(ctx, t, d.ops) != http.StatusOK || !strings.HasSuffix(browsertest.Location(ctx, t), "/review") {
		t.Fatalf("login with the ops key ended on %s, want /review", browsertest.Location(ctx, t))
	}
	var session *network.Cookie
	for _, c := range browsertest.Cookies(ctx, t, d.console) {
		if c.Name == "settle_console" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie settle_console = %+v, want HttpOnly and SameSite=Strict", session)
	}

	// The review queue: the possible double charge, resolved NOT_CHARGED
	// (the simulator declined the attempt, which Settle asks it first).
	checkLayout(ctx, t, "/review")
	row := fmt.Sprintf(`tr.review-item[data-order-id=%q]`, d.reviewID)
	if browsertest.Count(ctx, t, row) != 1 || browsertest.Count(ctx, t, row+" a.order-link") != 1 {
		t.Fatalf("/review: no %s with an a.order-link", row)
	}
	if kind, _ := browsertest.Attr(ctx, t, row, "data-kind"); !strings.Contains(strings.ToLower(kind), "double") {
		t.Errorf("review item's data-kind = %q, want the possible double charge's", kind)
	}
	form := row + " form.resolve"
	if browsertest.Count(ctx, t, form) == 0 && browsertest.Count(ctx, t, "form.resolve") == 1 {
		// The one item's form may sit beside the table.
		form = "form.resolve"
	}
	decisions := browsertest.Attrs(ctx, t, form+" select[name=decision] option", "value")
	notCharged := slices.IndexFunc(decisions, func(v string) bool { return strings.Contains(strings.ToLower(v), "not") })
	if notCharged < 0 {
		t.Fatalf("%s: decisions %q, none is \"not charged\"", form, decisions)
	}
	browsertest.Fill(ctx, t, form+" select[name=decision]", decisions[notCharged])
	browsertest.Fill(ctx, t, form+" textarea[name=note]", "the simulator declined it")
	seen := len(responses.All())
	if status := browsertest.Submit(ctx, t, form+" button, "+form+" input[type=submit]"); status != http.StatusOK {
		t.Errorf("resolve: page %d", status)
	}
	if !redirected(responses, seen) {
		t.Errorf("the resolve POST was not answered 303: %+v", responses.All()[seen:])
	}
	if browsertest.Text(ctx, t, "div#flash") == "" {
		t.Errorf("no flash after the resolution")
	}
	if slices.Contains(d.openReviewItems(t), d.reviewID) {
		t.Errorf("the possible double charge is still open after its resolution in the console")
	}
	browsertest.Navigate(ctx, t, d.console+"/review")
	if n := browsertest.Count(ctx, t, row); n != 0 {
		t.Errorf("/review still lists the resolved item")
	}

	// Search: none, then the paid order by its reference, one hit, which
	// is its page.
	browsertest.Navigate(ctx, t, d.console+"/search")
	checkLayout(ctx, t, "/search")
	browsertest.Fill(ctx, t, "form#search input[name=q]", "no-such-reference-anywhere")
	browsertest.Submit(ctx, t, "form#search button, form#search input[type=submit]")
	browsertest.WaitVisible(ctx, t, "p#none")
	browsertest.Fill(ctx, t, "form#search input[name=q]", consoleRef)
	browsertest.Submit(ctx, t, "form#search button, form#search input[type=submit]")
	orderURL := d.console + "/orders/" + d.paidID
	if u := browsertest.Location(ctx, t); u != orderURL {
		t.Fatalf("search for %q ended on %s, want %s", consoleRef, u, orderURL)
	}

	// The order's page: the reference as text, not markup.
	checkLayout(ctx, t, "/orders/{id}")
	if got := browsertest.Text(ctx, t, "h1#order-title"); got != "Order "+consoleRef {
		t.Errorf("h1#order-title = %q, want the reference as text %q", got, "Order "+consoleRef)
	}
	if n := browsertest.Count(ctx, t, "h1#order-title *"); n != 0 {
		t.Errorf("h1#order-title has %d elements: the reference became markup", n)
	}
	browsertest.WaitVisible(ctx, t, "dl#order-summary")
	kinds := browsertest.Attrs(ctx, t, "ol#timeline li.timeline-entry", "data-kind")
	for _, k := range []string{"transition", "attempt", "event"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("timeline kinds %q: no %s", kinds, k)
		}
	}
	for _, k := range kinds {
		if !slices.Contains([]string{"transition", "attempt", "refund", "capture", "void", "dispute", "event", "delivery"}, k) {
			t.Errorf("timeline entry of unknown kind %q", k)
		}
	}
	if ev, resend := browsertest.Count(ctx, t, "li.timeline-entry[data-kind=event]"), browsertest.Count(ctx, t, "li.timeline-entry[data-kind=event] form.resend"); ev != resend {
		t.Errorf("%d event entries, %d with form.resend", ev, resend)
	}
	if browsertest.Count(ctx, t, "section#actions form#reconcile") != 1 || browsertest.Count(ctx, t, "section#actions form#refund") != 1 {
		t.Errorf("section#actions lacks form#reconcile or form#refund")
	}
	if n := browsertest.Count(ctx, t, "form#capture, form#void, form#resolve"); n != 0 {
		t.Errorf("a PAID order offers %d capture, void or resolve forms", n)
	}
	if r, ok := responses.Last("/orders/" + d.paidID); !ok || !scriptless(r.Headers["content-security-policy"]) {
		t.Errorf("the order page's Content-Security-Policy %q allows scripts", r.Headers["content-security-policy"])
	}

	// The CSRF check, with the browser's session and no token.
	action, _ := browsertest.Attr(ctx, t, "form#refund", "action")
	target := resolveURL(t, orderURL, action)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(url.Values{"amount_minor": {"100"}, "reason": {"forged"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err := client.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "CSRF") {
		t.Errorf("POST %s without a CSRF token: %d\n%s\nwant 403 naming CSRF", target, resp.StatusCode, body)
	}

	// A partial refund through the form: a flash, a refund entry, and
	// its event delivered to dev's receiver.
	browsertest.Navigate(ctx, t, orderURL)
	deliveries := browsertest.Count(ctx, t, "li.timeline-entry[data-kind=delivery]")
	browsertest.Fill(ctx, t, "form#refund input[name=amount_minor]", "1000")
	browsertest.Fill(ctx, t, "form#refund input[name=reason]", "customer returned one item")
	seen = len(responses.All())
	browsertest.Submit(ctx, t, "form#refund button, form#refund input[type=submit]")
	if !redirected(responses, seen) {
		t.Errorf("the refund POST was not answered 303: %+v", responses.All()[seen:])
	}
	if u := browsertest.Location(ctx, t); !strings.HasPrefix(u, orderURL) {
		t.Errorf("after the refund: %s, want the order's page", u)
	}
	if browsertest.Text(ctx, t, "div#flash") == "" {
		t.Errorf("no flash after the refund")
	}
	if browsertest.Count(ctx, t, "li.timeline-entry[data-kind=refund]") == 0 {
		t.Errorf("no refund entry in the timeline after the refund")
	}
	deadline := time.Now().Add(30 * time.Second)
	for browsertest.Count(ctx, t, "li.timeline-entry[data-kind=delivery]") <= deliveries {
		if time.Now().After(deadline) {
			t.Fatalf("no new delivery entry 30s after the refund (%d before): the refund's event was not delivered", deliveries)
		}
		time.Sleep(500 * time.Millisecond)
		browsertest.Navigate(ctx, t, orderURL)
	}

	// Health: the gateways and the throughput chart.
	browsertest.Navigate(ctx, t, d.console+"/health")
	checkLayout(ctx, t, "/health")
	if names := browsertest.Attrs(ctx, t, "table#gateways tr.gateway", "data-name"); !slices.Contains(names, "sim") {
		t.Errorf("table#gateways: %q, want sim", names)
	}
	if browsertest.Count(ctx, t, "svg#throughput") != 1 {
		t.Errorf("/health: no svg#throughput")
	}

	// Every page the console answered forbade scripts.
	for _, r := range responses.All() {
		if strings.HasPrefix(r.URL, d.console) && strings.HasPrefix(r.Headers["content-type"], "text/html") && !scriptless(r.Headers["content-security-policy"]) {
			t.Errorf("%s: Content-Security-Policy %q allows scripts", r.URL, r.Headers["content-security-policy"])
		}
	}

	// Logging out ends the session.
	browsertest.Submit(ctx, t, "form#logout button, form#logout input[type=submit]")
	browsertest.Navigate(ctx, t, d.console+"/review")
	if u := browsertest.Location(ctx, t); !strings.Contains(u, "/login") {
		t.Errorf("/review after logging out ended on %s, want /login", u)
	}
}

// TestConsoleScreenshots writes the screenshots of the console's main
// pages that docs/console/ holds, from a settle dev of its own:
//
//	go test ./cmd/settle -run TestConsoleScreenshots -update-screenshots
func TestConsoleScreenshots(t *testing.T) {
	if !*updateScreenshots {
		t.Skip("writes docs/console/*.png; run with -update-screenshots")
	}
	ctx := browsertest.New(t)
	d := startConsoleDev(t)
	dir := filepath.Join("..", "..", "docs", "console")
	browsertest.Navigate(ctx, t, d.console+"/login")
	browsertest.Screenshot(ctx, t, filepath.Join(dir, "login.png"))
	d.login(ctx, t, d.ops)
	browsertest.Screenshot(ctx, t, filepath.Join(dir, "review.png"))
	browsertest.Navigate(ctx, t, d.console+"/orders/"+d.paidID)
	browsertest.Screenshot(ctx, t, filepath.Join(dir, "order.png"))
	browsertest.Navigate(ctx, t, d.console+"/health")
	browsertest.Screenshot(ctx, t, filepath.Join(dir, "health.png"))
}

// redirected says whether a 303 is among the responses recorded after the
// first seen.
func redirected(r *browsertest.Responses, seen int) bool {
	return slices.ContainsFunc(r.All()[seen:], func(r browsertest.Response) bool { return r.Status == http.StatusSeeOther })
}

// distinctFreeAddrs returns n free loopback addresses, all different:
// each is held until all are picked, since freeAddr called twice may give
// the same port back.
func distinctFreeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// resolveURL resolves a form's action against its page.
func resolveURL(t *testing.T, page, action string) string {
	t.Helper()
	base, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(action)
	if err != nil {
		t.Fatal(err)
	}
	return base.ResolveReference(ref).String()
}
