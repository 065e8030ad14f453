// Package console is the operator's console: server-rendered HTML pages
// (the review queue, search, an order's whole story and its actions,
// gateway health) on a listener of their own, behind an ops key, a
// session and CSRF tokens, with no JavaScript at all. Every read and
// action is a call of Settle's own API, made in process with the
// session's key (see api.go).
package console

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/console.css
var staticFS embed.FS

// CookieName is the session cookie's name; it holds a random session id
// and nothing else.
const CookieName = "settle_console"

// loginCookie holds the login form's CSRF token, before any session.
const loginCookie = "settle_console_login"

// Defaults of Options.
const (
	DefaultIdleTimeout    = 30 * time.Minute
	DefaultSessionTimeout = 8 * time.Hour
	// DefaultLoginFailures is how many failed logins a client address may
	// make in a minute; past it, logins are refused 429.
	DefaultLoginFailures = 5
)

// contentSecurityPolicy allows the console's own stylesheet, inline SVG
// images, and forms to itself; no script of any kind.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configure the console.
type Options struct {
	// API serves the API's calls in process (grpcapi.Server.InProcess).
	API http.Handler
	// Metrics, when set, is read for the gateways' outcomes, latency and
	// breakers on the health page.
	Metrics prometheus.Gatherer
	// SecureCookies marks the session cookie Secure: for every listener
	// but a loopback one.
	SecureCookies bool
	// IdleTimeout and SessionTimeout end a session after that long
	// without a request, or since login. Zero is the default.
	IdleTimeout, SessionTimeout time.Duration
	// LoginFailures bounds failed logins per client address per minute.
	// Zero is DefaultLoginFailures.
	LoginFailures int
	// Log receives the console's own lines (logins, logouts, actions).
	Log *slog.Logger
}

// Console is the console's HTTP handler and its sessions.
type Console struct {
	api      http.Handler
	metrics  prometheus.Gatherer
	secure   bool
	log      *slog.Logger
	pages    map[string]*template.Template
	mux      *http.ServeMux
	sessions *sessions
	logins   *loginLimiter
	chart    *throughput
}

// New returns the console.
func New(opts Options) (*Console, error) {
	idle, life := opts.IdleTimeout, opts.SessionTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	if life <= 0 {
		life = DefaultSessionTimeout
	}
	fails := opts.LoginFailures
	if fails <= 0 {
		fails = DefaultLoginFailures
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{api: opts.API, metrics: opts.Metrics, secure: opts.SecureCookies, log: log, pages: pages,
		sessions: &sessions{byID: map[string]*session{}, idle: idle, life: life},
		logins:   &loginLimiter{max: fails, byAddr: map[string]*loginWindow{}},
		chart:    &throughput{}}
	c.routes()
	return c, nil
}

// ServeHTTP sets the headers every answer carries and serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", c.loginPage)
	m.HandleFunc("POST /login", c.login)
	m.HandleFunc("POST /logout", c.authed(c.logout))
	m.HandleFunc("GET /{$}", c.authed(func(w http.ResponseWriter, r *http.Request, _ *session) {
		http.Redirect(w, r, "/review", http.StatusSeeOther)
	}))
	m.HandleFunc("GET /review", c.authed(c.reviewPage))
	m.HandleFunc("POST /review/{item}/resolve", c.authed(c.resolveItem))
	m.HandleFunc("GET /search", c.authed(c.searchPage))
	m.HandleFunc("GET /orders/{id}", c.authed(c.orderPage))
	m.HandleFunc("POST /orders/{id}/{action}", c.authed(c.orderAction))
	m.HandleFunc("POST /orders/{id}/events/{event}/resend", c.authed(c.resendEvent))
	m.HandleFunc("GET /health", c.authed(c.healthPage))
	c.mux = m
}

// authed serves h to a request with a live session, and checks the CSRF
// token of every POST; without a session, a GET goes to the login page.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		var s *session
		if ck, err := r.Cookie(CookieName); err == nil {
			s = c.sessions.get(ck.Value, time.Now())
		}
		if s == nil {
			if r.Method == http.MethodPost {
				c.refuse(w, http.StatusForbidden, "Your session has ended: log in again.")
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
			if !sameToken(r.PostFormValue("csrf"), s.csrf) {
				c.refuse(w, http.StatusForbidden, "This form's CSRF token is missing or not this session's: reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// refuse answers a refused request with a short page.
func (c *Console) refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, code, "error", page{Title: http.StatusText(code), Error: msg})
}

// sameToken compares a form's token with the expected one in constant
// time; an empty token is never the same.
func sameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// newToken returns 32 random bytes, URL-safe.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// session is a logged-in operator. The ops key stays here, on the server;
// the browser holds the session's id alone.
type session struct {
	id, key, csrf string
	created       time.Time

	mu    sync.Mutex
	seen  time.Time
	flash string
}

// takeFlash returns the message to show once, and forgets it.
func (s *session) takeFlash() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flash
	s.flash = ""
	return f
}

func (s *session) setFlash(msg string) {
	s.mu.Lock()
	s.flash = msg
	s.mu.Unlock()
}

// sessions are the live sessions, in memory: a restart logs everyone out.
type sessions struct {
	mu         sync.Mutex
	byID       map[string]*session
	idle, life time.Duration
}

func (ss *sessions) create(key string, now time.Time) *session {
	s := &session{id: newToken(), key: key, csrf: newToken(), created: now, seen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// Expired sessions go when a new one comes: the map stays as small
	// as the number of operators logged in.
	for id, old := range ss.byID {
		if ss.expired(old, now) {
			delete(ss.byID, id)
		}
	}
	ss.byID[s.id] = s
	return s
}

func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	if ss.expired(s, now) {
		delete(ss.byID, id)
		return nil
	}
	s.mu.Lock()
	s.seen = now
	s.mu.Unlock()
	return s
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.seen) > ss.idle || now.Sub(s.created) > ss.life
}

func (ss *sessions) end(id string) {
	ss.mu.Lock()
	delete(ss.byID, id)
	ss.mu.Unlock()
}

// loginLimiter counts failed logins per client address over a minute.
type loginLimiter struct {
	mu     sync.Mutex
	max    int
	byAddr map[string]*loginWindow
}

type loginWindow struct {
	start time.Time
	fails int
}

// allowed reports whether addr may try to log in now.
func (l *loginLimiter) allowed(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.byAddr[addr]
	return w == nil || now.Sub(w.start) >= time.Minute || w.fails < l.max
}

// failed counts a failed login of addr.
func (l *loginLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, w := range l.byAddr {
		if now.Sub(w.start) >= time.Minute {
			delete(l.byAddr, a)
		}
	}
	w := l.byAddr[addr]
	if w == nil {
		w = &loginWindow{start: now}
		l.byAddr[addr] = w
	}
	w.fails++
}

// clientAddr is the request's client address without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
