// Package browsertest drives a real, headless Chromium from tests, for the
// pages Settle serves to people (the operator's console). It starts Debian's
// Chromium (the chromium package) with chromedp, one browser per test, and
// offers the few steps such a test takes: open a page, fill a field, submit
// a form, read an element's text, count elements, take a screenshot, read
// the browser's cookies and the HTTP responses it saw.
//
// Every step takes the browser's context (from New) and the test, and ends
// the test on an error, so that a test reads as the operator's clicks:
//
//	ctx := browsertest.New(t)
//	browsertest.Navigate(ctx, t, url+"/login")
//	browsertest.Fill(ctx, t, "input[name=key]", key)
//	browsertest.Submit(ctx, t, "button#login-submit")
//
// Without Chromium a test is skipped with what to install, except with
// CI=true, where it fails: CI installs it (.ci/run), and a skip there would
// hide a missing dependency.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Timeout bounds everything one browser does in a test.
const Timeout = 3 * time.Minute

// install is what to run when Chromium is missing.
const install = "apt-get install -y --no-install-recommends chromium fonts-dejavu-core, or set SETTLE_CHROMIUM to a Chromium binary"

// Chromium returns the Chromium binary to run: $SETTLE_CHROMIUM when set,
// else chromium on the PATH, else Debian's /usr/bin/chromium.
func Chromium() (string, error) {
	if p := os.Getenv("SETTLE_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SETTLE_CHROMIUM: %w", err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium", nil
	}
	return "", errors.New("no chromium on the PATH nor /usr/bin/chromium")
}

// Need returns the Chromium binary, or skips the test with what to install;
// with CI=true it fails the test instead.
func Need(t testing.TB) string {
	t.Helper()
	path, err := Chromium()
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("Chromium is missing (%v): %s", err, install)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// New starts a headless Chromium for the test, with a profile of its own
// in a temporary directory, and returns the context of its one tab, which
// the other functions take. The browser ends with the test, or after
// Timeout.
func New(t testing.TB) context.Context {
	t.Helper()
	path := Need(t)
	// Before the cleanup that stops the browser, so that the profile is
	// removed after the browser has exited.
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		// Screenshots look alike on every machine: no smoothing that
		// depends on the screen.
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.Flag("hide-scrollbars", true),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root (CI and containers).
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), Timeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser's process to exit
		cancelTimeout()
	})
	// Start the browser now, so that a Chromium that cannot start fails
	// here, with its cause, rather than in the test's first step.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	return bctx
}

// Navigate opens address in the tab, waits for the page to load and returns
// the HTTP status of the page loaded (after any redirects).
func Navigate(ctx context.Context, t testing.TB, address string) int {
	t.Helper()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(address))
	if err != nil {
		t.Fatalf("open %s: %v", address, err)
	}
	return int(resp.Status)
}

// Fill sets the value of the input, textarea or select that sel (a CSS
// selector) finds first: for a select, the value of one of its options.
func Fill(ctx context.Context, t testing.TB, sel, value string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(sel), value, chromedp.NodeReady)); err != nil {
		t.Fatalf("fill %s: %v", sel, err)
	}
}

// Submit clicks what sel finds first (a form's button, or a link), waits
// for the page that the click loads and returns its HTTP status, after any
// redirects (a 303 after a POST).
func Submit(ctx context.Context, t testing.TB, sel string) int {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("submit by clicking %s: %v", sel, err)
	}
	return int(resp.Status)
}

// Click clicks what sel finds first and does not wait for a page: for
// what loads none. For a button or a link that loads one, use Submit.
func Click(ctx context.Context, t testing.TB, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// Text returns the visible text of the first element sel finds, trimmed,
// waiting for it to be visible.
func Text(ctx context.Context, t testing.TB, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// Attr returns the attribute name of the first element sel finds, and
// whether it has it.
func Attr(ctx context.Context, t testing.TB, sel, name string) (string, bool) {
	t.Helper()
	res, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name, chromedp.NodeReady))
	if err != nil {
		t.Fatalf("attribute %s of %s: %v", name, sel, err)
	}
	return res.Value, res.Exists
}

// Attrs returns the attribute name of every element sel finds now, in
// document order ("" for one without it); none is an answer, not a
// timeout.
func Attrs(ctx context.Context, t testing.TB, sel, name string) []string {
	t.Helper()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
	if err != nil {
		t.Fatalf("attribute %s of %s: %v", name, sel, err)
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.AttributeValue(name)
	}
	return out
}

// WaitVisible waits until the first element sel finds is visible.
func WaitVisible(ctx context.Context, t testing.TB, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("wait for %s to be visible: %v", sel, err)
	}
}

// Count returns how many elements of the page sel finds now, without
// waiting: 0 is an answer, not a timeout. It asks the DOM, not the page's
// JavaScript, so it works on pages whose policy forbids scripts.
func Count(ctx context.Context, t testing.TB, sel string) int {
	t.Helper()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return len(nodes)
}

// Location returns the URL of the page in the tab.
func Location(ctx context.Context, t testing.TB) string {
	t.Helper()
	u, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("location: %v", err)
	}
	return u
}

// Screenshot writes a PNG of the whole page to path, making its directory.
func Screenshot(ctx context.Context, t testing.TB, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Cookies returns the browser's cookies for address.
func Cookies(ctx context.Context, t testing.TB, address string) []*network.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{address}})
	if err != nil {
		t.Fatalf("cookies of %s: %v", address, err)
	}
	return res.Cookies
}

// Response is an HTTP response the browser received: a page, a redirect,
// or anything the page loaded.
type Response struct {
	URL    string
	Status int
	// Headers are the response's headers as the browser saw them, by
	// lower-case name.
	Headers map[string]string
}

// Responses records the HTTP responses the tab receives from now on,
// redirects included, in the order they arrive.
type Responses struct {
	mu   sync.Mutex
	list []Response
}

// Record starts recording the tab's responses.
func Record(ctx context.Context, t testing.TB) *Responses {
	t.Helper()
	r := &Responses{}
	add := func(resp *network.Response) {
		h := make(map[string]string, len(resp.Headers))
		for k, v := range resp.Headers {
			h[strings.ToLower(k)] = fmt.Sprint(v)
		}
		r.mu.Lock()
		r.list = append(r.list, Response{URL: resp.URL, Status: int(resp.Status), Headers: h})
		r.mu.Unlock()
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			// A redirect is not a response event of its own: the next
			// request carries it.
			if ev.RedirectResponse != nil {
				add(ev.RedirectResponse)
			}
		case *network.EventResponseReceived:
			add(ev.Response)
		}
	})
	if err != nil {
		t.Fatalf("record responses: %v", err)
	}
	return r
}

// All returns the responses recorded so far.
func (r *Responses) All() []Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Response(nil), r.list...)
}

// Last returns the last response recorded for a URL of the given path
// (its query aside), and whether there is one.
func (r *Responses) Last(path string) (Response, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.list) - 1; i >= 0; i-- {
		if u, err := url.Parse(r.list[i].URL); err == nil && u.Path == path {
			return r.list[i], true
		}
	}
	return Response{}, false
}
