// Package stripetest is a stateful fake of the part of Stripe's API that
// Settle uses, for tests: PaymentIntents created unconfirmed, confirmed,
// read, canceled and captured, under idempotency keys. It is a real HTTP server (an
// http.Handler to put behind httptest.NewServer) speaking Stripe's wire
// format, with a ledger of every PaymentIntent (each with the statuses it
// took, in order, and when: PaymentIntent.Changes) and of every charge made.
// stripe-mock checks the wire format against Stripe's schema but is
// stateless; this fake has the state.
//
// The endpoints:
//
//	POST /v1/payment_intents               create (confirm=true is refused: Settle never sends it);
//	                                       a customer=cus_... exists unless it begins with
//	                                       CustomerMissing, recorded on the intent
//	GET  /v1/payment_intents/{id}          retrieve, as it stands now
//	POST /v1/payment_intents/{id}/confirm  confirm: this is where money moves
//	POST /v1/payment_intents/{id}/cancel   cancel, from any status that allows it
//	POST /v1/payment_intents/{id}/capture  capture an authorization (capture_method=manual: holds.go)
//	GET  /v1/payment_intents               list by created range, newest first (listing.go)
//	GET  /v1/disputes/{id}                 a dispute a test opened (disputes.go)
//	POST /v1/disputes/{id}/close           accept it
//
// Idempotency works as Stripe documents it, for every POST: the first
// request with a key is executed and its answer saved (a decline and a 500
// included); a repeat with the same path and parameters gets the saved
// answer back, marked Idempotent-Replayed: true, however the PaymentIntent
// has changed since; a repeat with other parameters gets 400
// idempotency_error; a repeat while the first is still being processed gets
// 409 idempotency_key_in_use. Requests refused by authentication,
// validation or rate limiting are not saved. Keys are kept for the fake's
// lifetime.
//
// What a confirm does is chosen by the payment method, with Stripe's test
// tokens where Stripe has one:
//
//	pm_card_visa                             succeeded
//	pm_card_chargeDeclined                   402 card_error card_declined, decline_code generic_decline
//	pm_card_chargeDeclinedInsufficientFunds  402 card_error card_declined, decline_code insufficient_funds
//	pm_card_threeDSecure2Required            200, status requires_action (*), with a redirect to
//	                                         GET /fake/3ds/<pi> when confirmed with a return_url:
//	                                         opening it authenticates (?fail=1 fails), as
//	                                         Authenticate does
//	pm_card_settle_timeout                   succeeded, then the answer is held for Options.Hold
//	pm_card_settle_drop                      succeeded, then the answer is cut off halfway
//	pm_card_settle_500                       succeeded, then 500 api_error (saved, as Stripe saves it)
//	pm_card_settle_429                       429 rate_limit, nothing done
//	pm_card_settle_processing                200, status processing, until Succeed or Fail settles it
//	pm_card_settle_refund_timeout            succeeded (its refunds' answers are held: refunds.go)
//	pm_card_refundFail                       succeeded (its refunds fail later: refunds.go)
//	anything else                            400 resource_missing at the create, nothing created
//
// and one token acts at the create:
//
//	pm_card_settle_drop_create               the create is executed, then its answer is cut off
//	                                         halfway (a confirm works as visa)
//
// (*) Stripe itself declines that card with authentication_required when
// off_session is set; the fake answers requires_action so that the
// adapter's handling of that status can be tested.
//
// The fake is stricter than Stripe in two ways: currency must already be
// lowercase, and a rejected API key is quoted whole in the error message
// (as stripe-mock does; Stripe masks it), so that tests can check the key
// does not leak.
package stripetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The payment methods that choose what the fake does.
const (
	TokenVisa                   = "pm_card_visa"
	TokenDeclined               = "pm_card_chargeDeclined"
	TokenInsufficientFunds      = "pm_card_chargeDeclinedInsufficientFunds"
	TokenRequiresAction         = "pm_card_threeDSecure2Required"
	TokenTimeout                = "pm_card_settle_timeout"
	TokenDropAfterCreate        = "pm_card_settle_drop"
	TokenServerErrorAfterCreate = "pm_card_settle_500"
	TokenRateLimited            = "pm_card_settle_429"
	TokenProcessing             = "pm_card_settle_processing"
	TokenCreateDropped          = "pm_card_settle_drop_create"
)

const defaultHold = 2 * time.Second

// Options configure a Server.
type Options struct {
	// SecretKey, when set, is the only API key accepted (with
	// RestrictedKey). Otherwise any key that looks like a test key
	// (sk_test_ or rk_test_) is.
	SecretKey string
	// RestrictedKey, when set, is a restricted key (rk_...) that is
	// accepted but lacks the permission to write PaymentIntents: every
	// POST with it is answered 403, as Stripe answers such a key.
	RestrictedKey string
	// Hold is how long the answer to TokenTimeout is held after the
	// PaymentIntent is confirmed: longer than the client's timeout. The
	// request completes then whether or not the client is still waiting,
	// as at Stripe; until then its key is in flight. Default 2s. The
	// answers to the captures and cancels of a TokenHoldTimeout
	// authorization are held as long.
	Hold time.Duration
	// AuthorizationExpiry is how long a manual-capture authorization is
	// held before it lapses (capture_before); default 7 days, as for most
	// card payments at Stripe. Expire lapses one at once.
	AuthorizationExpiry time.Duration
	// Clock stamps the created time of PaymentIntents and Refunds, so
	// that a test can spread them over seconds; default time.Now.
	Clock func() time.Time
	// PageSize is the most records a list page holds, whatever its limit
	// asks (a smaller page with has_more is the protocol's too), so that
	// a test lists a few records over several pages; default 100.
	PageSize int
}

// PaymentIntent is one PaymentIntent in the ledger.
type PaymentIntent struct {
	ID string
	// IdempotencyKey is the key of the request that created it.
	IdempotencyKey string
	Amount         int64
	Currency       string
	PaymentMethod  string
	// Customer is the Customer the create named (a saved card's), or "".
	Customer string
	Status   string
	Metadata map[string]string
	// LatestCharge is the id of the last charge tried, if any; the
	// customer paid only if Status is succeeded.
	LatestCharge string
	// DeclineCode is the decline of a requires_payment_method intent.
	DeclineCode string
	// CaptureMethod is "automatic" or "manual" (holds.go); Multicapture
	// says the create asked for several captures (request_multicapture).
	CaptureMethod string
	Multicapture  bool
	// AmountCapturable is what is held and can still be captured,
	// AmountReceived what was captured (or charged) so far.
	AmountCapturable, AmountReceived int64
	// CaptureBefore is when an authorization lapses.
	CaptureBefore time.Time
	// CancellationReason is why a canceled intent was canceled:
	// "automatic" for an authorization that lapsed, what the cancel said
	// otherwise ("" when it said nothing).
	CancellationReason string
	// Captures counts the captures executed (replays not included).
	Captures int
	// CancelKey is the idempotency key of the cancel that canceled it
	// ("" when that cancel had none, or Stripe let the hold lapse).
	CancelKey string
	// Confirmations counts the confirms executed (replays not included).
	Confirmations int
	// RedirectURL is the challenge page of a requires_action intent
	// confirmed with a return_url.
	RedirectURL string
	Created     time.Time
	// Changes are the statuses the intent took, in order, each with when
	// the fake made the change: requires_confirmation, then processing and
	// succeeded for a payment that took its time (Succeed), say. A test
	// reads when Stripe had the payment from it.
	Changes []StatusChange
}

// StatusChange is one status a PaymentIntent took, and when.
type StatusChange struct {
	Status string
	At     time.Time
}

// noteLocked records pi's status in its Changes when it is new.
func noteLocked(pi *PaymentIntent) {
	if n := len(pi.Changes); n == 0 || pi.Changes[n-1].Status != pi.Status {
		pi.Changes = append(pi.Changes, StatusChange{Status: pi.Status, At: time.Now().UTC()})
	}
}

// snapshot is pi as it stands, sharing nothing with the ledger.
func snapshot(pi *PaymentIntent) PaymentIntent {
	c := *pi
	c.Changes = slices.Clone(pi.Changes)
	c.Metadata = maps.Clone(pi.Metadata)
	return c
}

// Request is one request the fake received.
type Request struct {
	Method, Path, IdempotencyKey string
}

// Server is the fake; it is an http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	ledger   []*PaymentIntent
	byID     map[string]*PaymentIntent
	keys     map[string]*keyState
	requests []Request
	charges  int
	// refunds and refundKeys are the refunds' ledger and idempotency
	// keys (refunds.go).
	refunds    []Refund
	refundKeys map[string]*keyState
	// captures is the captures' ledger (holds.go).
	captures []Capture
	// disputes is the disputes' ledger (disputes.go).
	disputes []*Dispute
}

// keyState is what the fake remembers of an idempotency key.
type keyState struct {
	request string        // the first request's path and form, canonically encoded
	done    chan struct{} // closed when the first request has been answered
	status  int
	body    []byte
}

// New returns a fake.
func New(opts Options) *Server {
	if opts.Hold <= 0 {
		opts.Hold = defaultHold
	}
	if opts.AuthorizationExpiry <= 0 {
		opts.AuthorizationExpiry = defaultAuthorizationExpiry
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.PageSize <= 0 || opts.PageSize > 100 {
		opts.PageSize = 100
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), byID: map[string]*PaymentIntent{}, keys: map[string]*keyState{},
		refundKeys: map[string]*keyState{}}
	s.mux.HandleFunc("POST /v1/payment_intents", s.post(s.create))
	s.mux.HandleFunc("GET /v1/payment_intents", s.listIntents)
	s.mux.HandleFunc("GET /v1/payment_intents/{id}", s.retrieve)
	s.mux.HandleFunc("POST /v1/payment_intents/{id}/confirm", s.post(s.confirm))
	s.mux.HandleFunc("POST /v1/payment_intents/{id}/cancel", s.post(s.cancel))
	s.mux.HandleFunc("POST /v1/payment_intents/{id}/capture", s.post(s.capture))
	s.mux.HandleFunc("GET /fake/3ds/{id}", s.challenge)
	s.mux.HandleFunc("POST /v1/refunds", s.createRefund)
	s.mux.HandleFunc("GET /v1/refunds", s.listRefunds)
	s.mux.HandleFunc("GET /v1/disputes/{id}", s.retrieveDispute)
	s.mux.HandleFunc("POST /v1/disputes/{id}/close", s.post(s.closeDispute))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
			Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ")."})
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	reqID := fmt.Sprintf("req_fake_%06d", len(s.requests))
	s.mu.Unlock()
	w.Header().Set("Request-Id", reqID)
	// The challenge page is the customer's, opened without an API key.
	key, ok := s.authorized(r)
	if !ok && !strings.HasPrefix(r.URL.Path, "/fake/3ds/") {
		writeError(w, http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid API Key provided: %s", key)})
		return
	}
	if ok && key == s.opts.RestrictedKey && r.Method == http.MethodPost {
		writeError(w, http.StatusForbidden, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("The provided key '%s' does not have the required permissions for this endpoint on account 'acct_fake'.", key)})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Ledger returns every PaymentIntent created so far, in order, as each
// stands now.
func (s *Server) Ledger() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PaymentIntent, len(s.ledger))
	for i, pi := range s.ledger {
		out[i] = snapshot(pi)
	}
	return out
}

// Intents returns the PaymentIntents created for an attempt (by their
// metadata[attempt_id]), as each stands now.
func (s *Server) Intents(attemptID string) []PaymentIntent {
	var out []PaymentIntent
	for _, pi := range s.Ledger() {
		if pi.Metadata["attempt_id"] == attemptID {
			out = append(out, pi)
		}
	}
	return out
}

// Intent returns the PaymentIntent with the id, as it stands now.
func (s *Server) Intent(id string) (PaymentIntent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pi, ok := s.byID[id]; ok {
		return snapshot(pi), true
	}
	return PaymentIntent{}, false
}

// Requests returns every request received so far, replays included.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count counts the requests received whose path ends with suffix ("" for
// all, "/confirm" for confirms).
func (s *Server) Count(method, suffix string) int {
	n := 0
	for _, r := range s.Requests() {
		if (method == "" || r.Method == method) && strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

// InFlight counts the idempotency keys whose first request is still being
// processed.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.keys {
		select {
		case <-k.done:
		default:
			n++
		}
	}
	return n
}

// Succeed ends the processing of a processing PaymentIntent: the payment
// went through. It reports false when the intent is not processing.
func (s *Server) Succeed(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[id]
	if !ok || pi.Status != "processing" {
		return false
	}
	s.authorizeLocked(pi)
	noteLocked(pi)
	return true
}

// Fail ends the processing of a processing PaymentIntent with a decline.
func (s *Server) Fail(id, declineCode string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[id]
	if !ok || pi.Status != "processing" {
		return false
	}
	pi.Status, pi.DeclineCode = "requires_payment_method", declineCode
	noteLocked(pi)
	return true
}

// answer is what the fake will say to one executed request.
type answer struct {
	status int
	body   []byte
	// save keeps the answer for the key's replays.
	save bool
	hold bool
	drop bool
}

// post wraps a POST endpoint with Stripe's idempotency layer.
func (s *Server) post(execute func(r *http.Request, form url.Values) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Invalid request body."})
			return
		}
		form := r.PostForm
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			s.respond(w, execute(r, form))
			return
		}
		w.Header().Set("Idempotency-Key", key)
		request := r.URL.Path + "?" + form.Encode() // sorted by parameter name

		s.mu.Lock()
		if k, ok := s.keys[key]; ok {
			s.mu.Unlock()
			select {
			case <-k.done:
			default:
				writeError(w, http.StatusConflict, apiError{Type: "invalid_request_error", Code: "idempotency_key_in_use",
					Message: "There is currently another in-progress request using this idempotency key (that probably means you submitted twice, and the other request is still going through): " + key + ". Please try again later."})
				return
			}
			if k.request != request {
				writeError(w, http.StatusBadRequest, apiError{Type: "idempotency_error",
					Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."})
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			writeBody(w, k.status, k.body)
			return
		}
		k := &keyState{request: request, done: make(chan struct{})}
		s.keys[key] = k
		s.mu.Unlock()

		a := execute(r, form)
		if a.hold {
			// Stripe finishes what it started whether or not the client waits.
			time.Sleep(s.opts.Hold)
		}
		s.mu.Lock()
		if a.save {
			k.status, k.body = a.status, a.body
		} else {
			delete(s.keys, key)
		}
		close(k.done)
		s.mu.Unlock()
		s.respond(w, a)
	}
}

// respond writes a, or drops the connection when a says so.
func (s *Server) respond(w http.ResponseWriter, a answer) {
	if a.drop {
		// The answer starts and is cut off: the client has read part of it,
		// so neither it nor Go's transport (which resends a request with an
		// Idempotency-Key on its own when a reused connection closes before
		// any answer) can take the request for unsent.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, buf, err := hj.Hijack(); err == nil {
				fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
					a.status, http.StatusText(a.status), len(a.body), a.body[:len(a.body)/2])
				buf.Flush()
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeBody(w, a.status, a.body)
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// CustomerMissing begins every Customer id the fake does not know (400
// resource_missing, quoting the id as Stripe does); it knows every other
// id of a Customer's shape.
const CustomerMissing = "cus_missing"

// customerRE is the shape of a Customer id.
var customerRE = regexp.MustCompile(`^cus_[A-Za-z0-9]+$`)

// knownMethods are the payment methods the create accepts.
var knownMethods = map[string]bool{
	TokenVisa: true, TokenDeclined: true, TokenInsufficientFunds: true, TokenRequiresAction: true,
	TokenTimeout: true, TokenDropAfterCreate: true, TokenServerErrorAfterCreate: true, TokenRateLimited: true,
	TokenProcessing: true, TokenCreateDropped: true, TokenRefundTimeout: true, TokenRefundFail: true,
	TokenHoldTimeout: true, TokenHold500: true,
}

// create validates a create request and creates an unconfirmed intent.
func (s *Server) create(r *http.Request, form url.Values) answer {
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	pm := form.Get("payment_method")
	switch {
	case form.Get("amount") == "":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "amount", Message: "Missing required param: amount."})
	case err != nil || amount <= 0:
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount", Message: "Invalid positive integer"})
	case !currencyRE.MatchString(form.Get("currency")):
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_empty", Param: "currency", Message: "Invalid currency: " + form.Get("currency")})
	case pm == "":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "payment_method", Message: "Missing required param: payment_method."})
	case form.Get("confirm") == "true":
		return rejected(apiError{Type: "invalid_request_error", Param: "confirm",
			Message: "This fake creates PaymentIntents unconfirmed only: Settle confirms in a second request."})
	case form.Has("customer") && (!customerRE.MatchString(form.Get("customer")) || strings.HasPrefix(form.Get("customer"), CustomerMissing)):
		return rejected(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "customer",
			Message: fmt.Sprintf("No such customer: '%s'", form.Get("customer"))})
	case !knownMethods[pm]:
		return rejected(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "payment_method",
			Message: fmt.Sprintf("No such PaymentMethod: '%s'", pm)})
	case form.Has("capture_method") && form.Get("capture_method") != "automatic" && form.Get("capture_method") != "manual":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_empty", Param: "capture_method",
			Message: "Invalid capture_method: must be one of automatic, automatic_async, or manual"})
	}
	pi := &PaymentIntent{
		IdempotencyKey: r.Header.Get("Idempotency-Key"), Amount: amount, Currency: form.Get("currency"),
		PaymentMethod: pm, Customer: form.Get("customer"), Status: "requires_confirmation", Metadata: map[string]string{}, Created: s.opts.Clock().UTC(),
		CaptureMethod: "automatic",
	}
	if form.Get("capture_method") == "manual" {
		pi.CaptureMethod = "manual"
		pi.Multicapture = form.Get("payment_method_options[card][request_multicapture]") == "if_available"
	}
	for name, v := range form {
		if k, ok := strings.CutPrefix(name, "metadata["); ok && strings.HasSuffix(k, "]") && len(v) > 0 {
			pi.Metadata[strings.TrimSuffix(k, "]")] = v[0]
		}
	}
	s.mu.Lock()
	noteLocked(pi)
	pi.ID = fmt.Sprintf("pi_fake_%06d", len(s.ledger)+1)
	s.ledger = append(s.ledger, pi)
	s.byID[pi.ID] = pi
	body := intentJSON(*pi, expandsCharge(form))
	s.mu.Unlock()
	return answer{status: http.StatusOK, body: body, save: true, drop: pm == TokenCreateDropped}
}

// retrieve answers an intent as it stands now.
func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	pi, ok := s.byID[r.PathValue("id")]
	var body []byte
	if ok {
		s.lapseLocked(pi)
		body = intentJSON(*pi, expandsCharge(r.URL.Query()))
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, noSuchIntent(r.PathValue("id")))
		return
	}
	writeBody(w, http.StatusOK, body)
}

// confirm confirms an intent: the one request that moves money.
func (s *Server) confirm(r *http.Request, form url.Values) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[r.PathValue("id")]
	if !ok {
		return answer{status: http.StatusNotFound, body: errorBody(noSuchIntent(r.PathValue("id")))}
	}
	if pi.Status != "requires_confirmation" && pi.Status != "requires_payment_method" {
		return s.unexpectedState(pi, "confirm")
	}
	defer noteLocked(pi)
	a := answer{status: http.StatusOK, save: true}
	switch pi.PaymentMethod {
	case TokenRateLimited:
		return answer{status: http.StatusTooManyRequests, body: errorBody(apiError{Type: "invalid_request_error", Code: "rate_limit",
			Message: "Request rate limit exceeded."})}
	case TokenRequiresAction:
		pi.Status = "requires_action"
		pi.Confirmations++
		if ret := form.Get("return_url"); ret != "" {
			// Stripe's hosted challenge page; here, the fake's own.
			pi.RedirectURL = "http://" + r.Host + "/fake/3ds/" + pi.ID
		}
		a.body = intentJSON(*pi, expandsCharge(form))
		return a
	case TokenProcessing:
		pi.Status = "processing"
	case TokenDeclined, TokenInsufficientFunds:
		pi.Status, pi.DeclineCode = "requires_payment_method", "generic_decline"
		if pi.PaymentMethod == TokenInsufficientFunds {
			pi.DeclineCode = "insufficient_funds"
		}
	default:
		s.authorizeLocked(pi)
	}
	pi.Confirmations++
	s.charges++
	pi.LatestCharge = fmt.Sprintf("ch_fake_%06d", s.charges)
	switch pi.PaymentMethod {
	case TokenTimeout:
		a.hold = true
	case TokenDropAfterCreate:
		a.drop = true
	case TokenServerErrorAfterCreate:
		a.status = http.StatusInternalServerError
		a.body = errorBody(apiError{Type: "api_error", Message: "An unknown error occurred"})
		return a
	}
	if pi.Status == "requires_payment_method" {
		a.status = http.StatusPaymentRequired
		a.body = errorBody(apiError{Type: "card_error", Code: "card_declined", DeclineCode: pi.DeclineCode,
			Message: "Your card was declined.", Charge: pi.LatestCharge, PaymentIntent: intentMap(*pi, false)})
		return a
	}
	a.body = intentJSON(*pi, expandsCharge(form))
	return a
}

// cancel cancels an intent that has not succeeded.
func (s *Server) cancel(r *http.Request, form url.Values) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[r.PathValue("id")]
	if !ok {
		return answer{status: http.StatusNotFound, body: errorBody(noSuchIntent(r.PathValue("id")))}
	}
	s.lapseLocked(pi)
	switch pi.Status {
	case "requires_payment_method", "requires_confirmation", "requires_action", "requires_capture":
	default:
		return s.unexpectedState(pi, "cancel")
	}
	authorized := pi.Status == "requires_capture"
	pi.Status, pi.CancellationReason, pi.AmountCapturable = "canceled", form.Get("cancellation_reason"), 0
	pi.CancelKey = r.Header.Get("Idempotency-Key")
	noteLocked(pi)
	a := answer{status: http.StatusOK, body: intentJSON(*pi, expandsCharge(form)), save: true}
	if authorized {
		a = holdFault(pi, a)
	}
	return a
}

// unexpectedState is Stripe's refusal of a move the intent's status does
// not allow; like Stripe, it carries the intent.
func (s *Server) unexpectedState(pi *PaymentIntent, verb string) answer {
	return answer{status: http.StatusBadRequest, save: true, body: errorBody(apiError{Type: "invalid_request_error",
		Code: "payment_intent_unexpected_state", PaymentIntent: intentMap(*pi, false),
		Message: fmt.Sprintf("You cannot %s this PaymentIntent because it has a status of %s.", verb, pi.Status)})}
}

func noSuchIntent(id string) apiError {
	return apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "intent",
		Message: fmt.Sprintf("No such payment_intent: '%s'", id)}
}

// intentMap is a PaymentIntent as Stripe's API shows it.
// With expandCharge, latest_charge is the Charge object (expand[]=latest_charge),
// otherwise its id.
func intentMap(pi PaymentIntent, expandCharge bool) map[string]any {
	m := map[string]any{
		"id": pi.ID, "object": "payment_intent", "amount": pi.Amount, "currency": pi.Currency,
		"status": pi.Status, "payment_method": pi.PaymentMethod, "payment_method_types": []string{"card"},
		"capture_method": pi.CaptureMethod, "confirmation_method": "automatic", "metadata": pi.Metadata,
		"created": pi.Created.Unix(), "livemode": false, "client_secret": pi.ID + "_secret_fake",
		"amount_received": pi.AmountReceived, "amount_capturable": pi.AmountCapturable,
		"latest_charge": nil, "last_payment_error": nil, "next_action": nil,
		"customer": nil, "cancellation_reason": nil,
	}
	if pi.Customer != "" {
		m["customer"] = pi.Customer
	}
	if pi.LatestCharge != "" {
		m["latest_charge"] = pi.LatestCharge
		if expandCharge {
			m["latest_charge"] = chargeMap(pi)
		}
	}
	switch pi.Status {
	case "requires_action":
		m["next_action"] = map[string]any{"type": "use_stripe_sdk"}
		if pi.RedirectURL != "" {
			m["next_action"] = map[string]any{"type": "redirect_to_url",
				"redirect_to_url": map[string]any{"url": pi.RedirectURL, "return_url": "https://checkout.example/return"}}
		}
	case "requires_payment_method":
		switch {
		case pi.DeclineCode == authenticationFailure:
			m["last_payment_error"] = map[string]any{"type": "invalid_request_error", "code": authenticationFailure,
				"message": "The provided PaymentMethod has failed authentication."}
		case pi.DeclineCode != "":
			m["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined",
				"decline_code": pi.DeclineCode, "message": "Your card was declined.", "charge": pi.LatestCharge}
		}
	case "canceled":
		if pi.CancellationReason != "" {
			m["cancellation_reason"] = pi.CancellationReason
		}
	}
	return m
}

func intentJSON(pi PaymentIntent, expandCharge bool) []byte {
	b, _ := json.Marshal(intentMap(pi, expandCharge))
	return b
}

// authorized checks the request's API key and returns what was presented.
func (s *Server) authorized(r *http.Request) (string, bool) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		if user, _, basic := r.BasicAuth(); basic {
			key, ok = user, true
		}
	}
	if !ok || key == "" {
		return key, false
	}
	if s.opts.RestrictedKey != "" && key == s.opts.RestrictedKey {
		return key, true
	}
	if s.opts.SecretKey != "" {
		return key, key == s.opts.SecretKey
	}
	return key, strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_")
}

// apiError is the error object of Stripe's API.
type apiError struct {
	Type          string         `json:"type"`
	Code          string         `json:"code,omitempty"`
	DeclineCode   string         `json:"decline_code,omitempty"`
	Message       string         `json:"message,omitempty"`
	Param         string         `json:"param,omitempty"`
	Charge        string         `json:"charge,omitempty"`
	PaymentIntent map[string]any `json:"payment_intent,omitempty"`
}

func rejected(e apiError) answer {
	return answer{status: http.StatusBadRequest, body: errorBody(e)}
}

func errorBody(e apiError) []byte {
	b, _ := json.Marshal(map[string]apiError{"error": e})
	return b
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeBody(w, status, errorBody(e))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// authenticationFailure is Stripe's error code for a failed 3-D Secure
// challenge.
const authenticationFailure = "payment_intent_authentication_failure"

// Authenticate ends the customer's 3-D Secure challenge of a requires_action
// intent: ok charges it, otherwise it fails authentication and needs a new
// payment method. It reports false when the intent is not waiting for the
// customer (canceled meanwhile, say), and then changes nothing.
func (s *Server) Authenticate(id string, ok bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, found := s.byID[id]
	if !found || pi.Status != "requires_action" {
		return false
	}
	if ok {
		s.charges++
		pi.LatestCharge = fmt.Sprintf("ch_fake_%06d", s.charges)
		s.authorizeLocked(pi)
	} else {
		pi.Status, pi.DeclineCode = "requires_payment_method", authenticationFailure
	}
	noteLocked(pi)
	return true
}

// challenge is the challenge page a redirect sends the customer to:
// opening it completes the authentication, or fails it with ?fail=1.
func (s *Server) challenge(w http.ResponseWriter, r *http.Request) {
	if !s.Authenticate(r.PathValue("id"), r.URL.Query().Get("fail") == "") {
		http.Error(w, "this PaymentIntent is not waiting for authentication", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("authentication done; return to the checkout\n"))
}
