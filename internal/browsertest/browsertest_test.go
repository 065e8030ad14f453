package browsertest_test

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"

	"github.com/settlepay/settle/internal/browsertest"
)

// page is a form of the console's kind: no script, a policy that forbids
// one, a hidden CSRF token, a select and a textarea.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><title>form</title></head>
<body><main id="main">
{{with .Flash}}<div id="flash">{{.}}</div>{{end}}
<form id="greet" method="post" action="/greet">
  <input type="hidden" name="csrf" value="{{.CSRF}}">
  <input name="name">
  <select name="decision"><option value="">choose</option><option value="charged">Charged</option><option value="not_charged">Not charged</option></select>
  <textarea name="note"></textarea>
  <button id="greet-submit" type="submit">Greet</button>
</form>
</main></body></html>`))

// server answers GET / with the form and POST /greet like the console: a
// 403 without the token, else a cookie and a 303 back to / with a flash.
func server(t *testing.T) *httptest.Server {
	const token = "tok-123"
	mux := http.NewServeMux()
	render := func(w http.ResponseWriter, flash string) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := page.Execute(w, map[string]string{"Flash": flash, "CSRF": token}); err != nil {
			t.Error(err)
		}
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		render(w, r.URL.Query().Get("flash"))
	})
	mux.HandleFunc("POST /greet", func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("csrf") != token {
			http.Error(w, "CSRF token missing or wrong", http.StatusForbidden)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		// The flash holds what was typed; the page must show it as text.
		flash := fmt.Sprintf("%s: %s (%s)", r.PostFormValue("decision"), r.PostFormValue("name"), r.PostFormValue("note"))
		http.Redirect(w, r, "/?flash="+url.QueryEscape(flash), http.StatusSeeOther)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestBrowserSubmitsAForm proves the harness on a page of the test's own:
// Chromium fills a form, submits it, follows the 303 and shows the flash;
// typed markup is text; the recorder saw the redirect and the page's
// policy; the cookie is HttpOnly and SameSite=Strict; a screenshot is a
// PNG.
func TestBrowserSubmitsAForm(t *testing.T) {
	t.Parallel()
	ts := server(t)
	ctx := browsertest.New(t)
	responses := browsertest.Record(ctx, t)

	if status := browsertest.Navigate(ctx, t, ts.URL+"/"); status != http.StatusOK {
		t.Fatalf("GET /: %d", status)
	}
	if n := browsertest.Count(ctx, t, "div#flash"); n != 0 {
		t.Fatalf("a flash before anything was done: %d", n)
	}
	if got := browsertest.Attrs(ctx, t, "form#greet input, form#greet select, form#greet textarea", "name"); strings.Join(got, " ") != "csrf name decision note" {
		t.Fatalf("the form's fields: %q, want csrf name decision note", got)
	}
	// The selector cmd/settle's console test counts POST forms with.
	if n := browsertest.Count(ctx, t, "form[method=POST i] input[type=hidden][name=csrf]"); n != 1 {
		t.Fatalf("%d POST forms with a csrf input, want 1", n)
	}
	browsertest.Fill(ctx, t, "input[name=name]", "<b>x</b><script>alert(1)</script>")
	browsertest.Fill(ctx, t, "select[name=decision]", "not_charged")
	browsertest.Fill(ctx, t, "textarea[name=note]", "looked at the ledger")
	if status := browsertest.Submit(ctx, t, "button#greet-submit"); status != http.StatusOK {
		t.Fatalf("after the POST: %d, want the 200 of the page redirected to", status)
	}
	flash := browsertest.Text(ctx, t, "div#flash")
	if want := "not_charged: <b>x</b><script>alert(1)</script> (looked at the ledger)"; flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	if got := browsertest.Location(ctx, t); !strings.HasPrefix(got, ts.URL+"/?flash=") {
		t.Errorf("location after the POST = %s, want %s/?flash=…", got, ts.URL)
	}
	if n := browsertest.Count(ctx, t, "div#flash b, script"); n != 0 {
		t.Errorf("%d elements made of typed markup", n)
	}
	if v, ok := browsertest.Attr(ctx, t, "input[name=csrf]", "value"); !ok || v != "tok-123" {
		t.Errorf("csrf input's value = %q, %v", v, ok)
	}

	post, ok := responses.Last("/greet")
	if !ok || post.Status != http.StatusSeeOther || !strings.HasPrefix(post.Headers["location"], "/?flash=") {
		t.Errorf("the POST's response = %+v, %v; want a 303 to /?flash=…\nall: %+v", post, ok, responses.All())
	}
	if got, ok := responses.Last("/"); !ok || !strings.Contains(got.Headers["content-security-policy"], "default-src 'none'") {
		t.Errorf("the page's response = %+v, want its Content-Security-Policy", got)
	}
	var session *network.Cookie
	for _, c := range browsertest.Cookies(ctx, t, ts.URL) {
		if c.Name == "session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Errorf("session cookie = %+v, want HttpOnly and SameSite=Strict", session)
	}

	shot := filepath.Join(t.TempDir(), "page.png")
	browsertest.Screenshot(ctx, t, shot)
	if b, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot: %v, not a PNG", err)
	}
}
