package adyenfake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultClientTimeout is Config.ClientTimeout when it is zero.
const DefaultClientTimeout = 30 * time.Second

// DefaultAuthorizationLifetime is Config.AuthorizationLifetime when it is
// zero: seven days, as card schemes allow most authorisations.
const DefaultAuthorizationLifetime = 7 * 24 * time.Hour

// maxBody bounds a request's body.
const maxBody = 1 << 20

// Config configures a Server. APIKey and MerchantAccount are required;
// HMACKey is required when NotifyURL is set.
type Config struct {
	// APIKey is the X-API-Key every request must carry.
	APIKey string
	// MerchantAccount is the one merchant account the key may use.
	MerchantAccount string
	// HMACKey is the notifications' HMAC key, in hex as Adyen's Customer
	// Area shows it.
	HMACKey string
	// NotifyURL receives the notifications (POST); empty sends none.
	NotifyURL string
	// NotifyUser and NotifyPassword, when set, are sent as basic auth
	// with every notification.
	NotifyUser, NotifyPassword string
	// Notify sets the notifications' faults.
	Notify NotifyFaults
	// Random sets the rates of random faults.
	Random RandomFaults
	// AuthorizationLifetime is how long an authorisation can be captured.
	// Zero means DefaultAuthorizationLifetime; tok_lapse_<ms> sets its own.
	AuthorizationLifetime time.Duration
	// ClientTimeout is how long a timeout fault holds its answer; it
	// should exceed the client's deadline. Zero means DefaultClientTimeout.
	// The wait ends early when the client hangs up.
	ClientTimeout time.Duration
	// Seed seeds the random faults and the notifications' faults.
	Seed uint64
	// ReportUser and ReportPassword, when set, are the basic
	// authentication of the report user, which the report downloads
	// accept beside X-API-Key APIKey (reports.go).
	ReportUser, ReportPassword string
	// ReportTimeZone is the account's time zone setting, in which the
	// reports' days and booking dates are; nil means UTC.
	ReportTimeZone *time.Location
	// Log receives the fake's own troubles (contract errors, failed
	// deliveries); nil discards them.
	Log *slog.Logger
}

// NotifyFaults are how the notifications misbehave. The zero value sends
// every notification once, at once.
type NotifyFaults struct {
	// MaxDelay delays each notification by a random time up to it, so that
	// notifications also arrive out of order.
	MaxDelay time.Duration
	// Reorder is the probability that a notification is held back a
	// further ReorderDelay, so that later ones overtake it.
	Reorder float64
	// ReorderDelay is how long a reordered notification is held back.
	// Zero means one second.
	ReorderDelay time.Duration
	// Duplicate is the probability that a notification is delivered twice.
	Duplicate float64
	// Loss is the probability that a notification is never sent.
	Loss float64
	// RetryMin is the first wait before a delivery is retried; each retry
	// doubles it, up to RetryMax. Zero means 100ms and 5s.
	RetryMin, RetryMax time.Duration
}

// RandomFaults are the probabilities, each from 0 to 1, that a request
// about a tok_ok or tok_random payment (the payment itself, its
// modifications, and a technical cancel by its reference or by one with
// no payment) meets a fault.
// They are drawn in this order from a source seeded with Config.Seed.
type RandomFaults struct {
	// Refuse refuses the payment (resultCode Refused); it does not apply
	// to modifications.
	Refuse float64
	// TimeoutAfter processes the request, then holds the answer like
	// tok_timeout.
	TimeoutAfter float64
	// FiveXXBefore answers 500 without processing anything.
	FiveXXBefore float64
	// FiveXXAfter processes the request, then answers 500.
	FiveXXAfter float64
	// DropAfter processes the request, then drops the connection.
	DropAfter float64
	// Slow processes the request for a random time up to SlowMax (its
	// idempotency key in flight meanwhile), then answers.
	Slow float64
	// SlowMax is the longest slow answer. Zero means two seconds.
	SlowMax time.Duration
}

// Server is the fake Adyen, an http.Handler. It is safe for concurrent
// use. Close it when done.
type Server struct {
	cfg      Config
	hmacKey  []byte
	contract *contract
	mux      *http.ServeMux
	log      *slog.Logger

	mu           sync.Mutex
	rng          *rand.Rand // the random faults; guarded by mu
	notifyRng    *rand.Rand // the notifications' faults; guarded by mu
	seq          int        // numbers pspReferences; guarded by mu
	payments     []*payment // the ledger, oldest first; guarded by mu
	byPSP        map[string]*payment
	techCancels  []Modification        // technical cancels, oldest first; guarded by mu
	disputes     []DisputeNotification // disputes.go; guarded by mu
	keys         map[string]*keyed
	redirects    map[string]*payment // by redirectResult; guarded by mu
	withheldDays map[string]bool     // reports not available, by file name; guarded by mu
	contractErrs []string
	sent         []Notification // notifications accepted by the receiver; guarded by mu
	planned      int            // deliveries planned; guarded by mu

	client   *http.Client
	senders  sync.WaitGroup
	stopping chan struct{}
	stopOnce sync.Once
}

// keyed is what an idempotency key has seen: a request in flight (done
// false), or the answer to the processed one.
type keyed struct {
	done   bool
	code   int
	header http.Header
	body   []byte
}

// New returns a fake Adyen configured by cfg. The first call in a process
// builds the contract checker from the embedded definitions, which takes
// a moment; later calls share it.
func New(cfg Config) (*Server, error) {
	if cfg.APIKey == "" || cfg.MerchantAccount == "" {
		return nil, errors.New("adyenfake: Config.APIKey and Config.MerchantAccount are required")
	}
	var key []byte
	if cfg.NotifyURL != "" || cfg.HMACKey != "" {
		var err error
		key, err = hex.DecodeString(cfg.HMACKey)
		if err != nil || len(key) == 0 {
			return nil, errors.New("adyenfake: Config.HMACKey must be a non-empty hex string when NotifyURL is set")
		}
	}
	c, err := loadContract()
	if err != nil {
		return nil, err
	}
	if cfg.ClientTimeout <= 0 {
		cfg.ClientTimeout = DefaultClientTimeout
	}
	if cfg.AuthorizationLifetime <= 0 {
		cfg.AuthorizationLifetime = DefaultAuthorizationLifetime
	}
	if cfg.Random.SlowMax <= 0 {
		cfg.Random.SlowMax = 2 * time.Second
	}
	if cfg.Notify.ReorderDelay <= 0 {
		cfg.Notify.ReorderDelay = time.Second
	}
	if cfg.Notify.RetryMin <= 0 {
		cfg.Notify.RetryMin = 100 * time.Millisecond
	}
	if cfg.Notify.RetryMax <= 0 {
		cfg.Notify.RetryMax = 5 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:          cfg,
		hmacKey:      key,
		contract:     c,
		log:          log,
		rng:          rand.New(rand.NewPCG(cfg.Seed, 0xad7e4)),
		notifyRng:    rand.New(rand.NewPCG(cfg.Seed, 0x40717f)),
		byPSP:        map[string]*payment{},
		keys:         map[string]*keyed{},
		redirects:    map[string]*payment{},
		withheldDays: map[string]bool{},
		// Its own transport, so that Close drops only its connections.
		client:   &http.Client{Timeout: 10 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()},
		stopping: make(chan struct{}),
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v71/payments", s.write(s.handlePayment))
	s.mux.HandleFunc("POST /v71/payments/details", s.write(s.handleDetails))
	s.mux.HandleFunc("POST /v71/payments/{psp}/captures", s.write(s.handleCapture))
	s.mux.HandleFunc("POST /v71/payments/{psp}/cancels", s.write(s.handleCancel))
	s.mux.HandleFunc("POST /v71/payments/{psp}/refunds", s.write(s.handleRefund))
	s.mux.HandleFunc("POST /v71/cancels", s.write(s.handleTechnicalCancel))
	s.mux.HandleFunc("GET /challenge/{id}", s.handleChallenge)
	s.mux.HandleFunc("GET /reports/download/MerchantAccount/{account}/{file}", s.handleReport)
	return s, nil
}

// ServeHTTP serves the Checkout API under /v71, the 3-D Secure page and
// the reports.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the deliveries of notifications and waits for those in
// progress. A held answer (tok_timeout) ends when its client hangs up or
// its http.Server closes.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.senders.Wait()
	s.client.CloseIdleConnections()
}

// Serve serves the fake on ln until ctx ends, then shuts down, closes
// the fake (Close) and returns nil. Requests in progress see their
// context end with ctx, so held answers are cut short.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		s.Close()
		return fmt.Errorf("adyenfake: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	s.Close()
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	if err != nil {
		return fmt.Errorf("adyenfake: shutdown: %w", err)
	}
	return nil
}

// ContractErrors lists every answer and notification the fake made that
// Adyen's definitions reject: the fake's own bugs. Tests assert it is
// empty.
func (s *Server) ContractErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.contractErrs...)
}

func (s *Server) contractError(what string, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contractErrorLocked(what, problems)
}

func (s *Server) contractErrorLocked(what string, problems []string) {
	msg := what + ": " + strings.Join(problems, "; ")
	s.log.Error("adyenfake: contract error", "error", msg)
	s.contractErrs = append(s.contractErrs, msg)
}

// ServiceError is Adyen's error answer.
type serviceError struct {
	Status       int    `json:"status"`
	ErrorCode    string `json:"errorCode"`
	Message      string `json:"message"`
	ErrorType    string `json:"errorType"`
	PSPReference string `json:"pspReference,omitempty"`
}

// answer is what a handler decided: a status and a JSON body, and the
// fault that delivers it.
type answer struct {
	code   int
	body   any
	header http.Header
	// fault, if any, is how the answer is (not) delivered; the request
	// has been processed unless it is faultFiveXXBefore.
	fault fault
	delay time.Duration
}

// fault is how an answer is delivered.
type fault int

const (
	faultNone         fault = iota
	faultFiveXXBefore       // 500, nothing processed
	faultTimeout            // processed; the answer held past the client's patience
	faultFiveXXAfter        // processed; 500
	faultDrop               // processed; the connection dropped
	faultSlow               // processed for delay (the key in flight), then answered
)

func failure(code int, errorCode, errorType, msg string) answer {
	return answer{code: code, body: serviceError{Status: code, ErrorCode: errorCode, Message: msg, ErrorType: errorType}}
}

// request is one write request as the handlers see it, checked.
type request struct {
	r    *http.Request
	body []byte
	base string // the fake's own URL, for the 3-D Secure page
}

// write wraps a write handler: API key, the contract check of the
// request, the merchant account, the idempotency key, then the handler,
// whose answer is checked against the contract before it is sent and kept
// for replays.
func (s *Server) write(h func(request) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			s.send(w, r, body, failure(http.StatusBadRequest, "702", "validation", "Unreadable request body"))
			return
		}
		key := r.Header.Get("X-API-Key")
		switch {
		case key == "":
			s.send(w, r, body, failure(http.StatusUnauthorized, "000", "security", "HTTP Status Response - Unauthorized"))
			return
		case subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1:
			s.send(w, r, body, failure(http.StatusForbidden, "010", "security", "Not allowed"))
			return
		}
		if problems := s.contract.checkRequest(r, body); len(problems) > 0 {
			s.send(w, r, body, failure(http.StatusUnprocessableEntity, "702", "validation",
				"Invalid request: "+strings.Join(problems, "; ")+"; nothing was processed"))
			return
		}
		var ma struct {
			MerchantAccount *string `json:"merchantAccount"`
		}
		// The contract check has parsed the body already, and requires
		// merchantAccount wherever the endpoint has one (all but
		// /payments/details).
		_ = json.Unmarshal(body, &ma)
		if ma.MerchantAccount != nil && *ma.MerchantAccount != s.cfg.MerchantAccount {
			s.send(w, r, body, failure(http.StatusForbidden, "901", "security", "Invalid Merchant Account"))
			return
		}

		idem := r.Header.Get("Idempotency-Key")
		if idem != "" {
			// Adyen keeps keys per company account, whatever the endpoint.
			scoped := idem
			s.mu.Lock()
			var k keyed
			p, seen := s.keys[scoped]
			if seen {
				k = *p
			} else {
				s.keys[scoped] = &keyed{}
			}
			s.mu.Unlock()
			switch {
			case seen && k.done:
				writeRaw(w, k.code, k.header, k.body)
				return
			case seen:
				a := failure(http.StatusUnprocessableEntity, "704", "validation", "request already processed or in progress")
				a.header = http.Header{"Transient-Error": {"true"}}
				s.send(w, r, body, a)
				return
			}
			idem = scoped
		}

		a := h(request{r: r, body: body, base: baseURL(r)})
		if a.fault == faultSlow && !sleep(r, a.delay) {
			a.fault = faultTimeout // the client gave up; the answer is kept
		}
		if a.fault == faultFiveXXBefore {
			if idem != "" {
				s.mu.Lock()
				delete(s.keys, idem) // nothing was processed: the key is free
				s.mu.Unlock()
			}
			s.send(w, r, body, failure(http.StatusInternalServerError, "905", "internal", "Internal error"))
			return
		}
		out, header := s.render(r, body, a)
		if idem != "" {
			s.mu.Lock()
			*s.keys[idem] = keyed{done: true, code: a.code, header: header, body: out}
			s.mu.Unlock()
		}
		switch a.fault {
		case faultFiveXXAfter:
			f := failure(http.StatusInternalServerError, "905", "internal", "Internal error")
			s.send(w, r, body, f)
		case faultDrop:
			drop(w)
		case faultTimeout:
			if !sleep(r, s.cfg.ClientTimeout) {
				panic(http.ErrAbortHandler)
			}
			writeRaw(w, a.code, header, out)
		default:
			writeRaw(w, a.code, header, out)
		}
	}
}

// baseURL is the fake's own URL as the client reached it.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// render marshals a's body and checks it against the contract, recording
// a mismatch. It returns the body and the headers to send.
func (s *Server) render(r *http.Request, reqBody []byte, a answer) ([]byte, http.Header) {
	out, err := json.Marshal(a.body)
	if err != nil {
		panic(err) // the fake's own types always marshal
	}
	header := http.Header{"Content-Type": {"application/json"}}
	for k, v := range a.header {
		header[k] = v
	}
	if idem := r.Header.Get("Idempotency-Key"); idem != "" {
		header.Set("Idempotency-Key", idem)
	}
	if problems := s.contract.checkResponse(r, reqBody, a.code, header, out); len(problems) > 0 {
		s.contractError(fmt.Sprintf("answer %d to %s %s", a.code, r.Method, r.URL.Path), problems)
	}
	return out, header
}

// send renders a and writes it.
func (s *Server) send(w http.ResponseWriter, r *http.Request, reqBody []byte, a answer) {
	out, header := s.render(r, reqBody, a)
	writeRaw(w, a.code, header, out)
}

func writeRaw(w http.ResponseWriter, code int, header http.Header, body []byte) {
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	w.Write(body)
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2 cannot hijack; abort resets the stream
	}
	conn.Close()
}

// sleep waits for d, or until the client hangs up; it reports whether d
// passed.
func sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// pspLocked returns a new 16-character pspReference.
func (s *Server) pspLocked() string {
	s.seq++
	return fmt.Sprintf("%s%010d", hashPrefix(s.cfg.Seed), s.seq)
}

// hashPrefix is a 6-digit prefix from the seed, so that two fakes with
// different seeds make different pspReferences.
func hashPrefix(seed uint64) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d", seed))
	n := (uint64(h[0])<<16 | uint64(h[1])<<8 | uint64(h[2])) % 900000
	return fmt.Sprintf("%06d", 100000+n)
}

// decode unmarshals a checked request body into v.
func decode(body []byte, v any) {
	d := json.NewDecoder(bytes.NewReader(body))
	// The contract check has accepted the body; what it allows, v reads.
	_ = d.Decode(v)
}
