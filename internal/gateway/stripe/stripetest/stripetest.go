// Package stripetest is a stateful fake of the part of Stripe's API that
// Settle uses, creating and confirming PaymentIntents under idempotency
// keys, for tests. It is a real HTTP server (an http.Handler to put behind
// httptest.NewServer) speaking Stripe's wire format, with a ledger of every
// PaymentIntent it created. stripe-mock checks the wire format against
// Stripe's schema but is stateless; this fake has the state.
//
// Idempotency works as Stripe documents it: the first request with a key is
// executed and its answer saved (a decline and a 500 included); a repeat
// with the same parameters gets the saved answer back, marked
// Idempotent-Replayed: true; a repeat with other parameters gets 400
// idempotency_error; a repeat while the first is still being processed gets
// 409 idempotency_key_in_use. Requests refused by authentication,
// validation or rate limiting are not saved. Keys are kept for the fake's
// lifetime.
//
// What happens is chosen by payment method, with Stripe's test tokens where
// Stripe has one:
//
//	pm_card_visa                             succeeded
//	pm_card_chargeDeclined                   402 card_error card_declined, decline_code generic_decline
//	pm_card_chargeDeclinedInsufficientFunds  402 card_error card_declined, decline_code insufficient_funds
//	pm_card_threeDSecure2Required            200, status requires_action (*)
//	pm_card_settle_timeout                   succeeded, then the answer is held for Options.Hold
//	pm_card_settle_drop                      succeeded, then the connection is closed without an answer
//	pm_card_settle_500                       succeeded, then 500 api_error (saved, as Stripe saves it)
//	pm_card_settle_429                       429 rate_limit, nothing created
//	pm_card_settle_refund_timeout            succeeded (its refunds' answers are held: refunds.go)
//	pm_card_refundFail                       succeeded (its refunds fail later: refunds.go)
//	anything else                            400 resource_missing, nothing created
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
	"net/http"
	"regexp"
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
)

const defaultHold = 2 * time.Second

// Options configure a Server.
type Options struct {
	// SecretKey, when set, is the only API key accepted. Otherwise any key
	// that looks like a test key (sk_test_ or rk_test_) is.
	SecretKey string
	// Hold is how long the answer to TokenTimeout is held after the
	// PaymentIntent is created: longer than the client's timeout. The
	// request completes then whether or not the client is still waiting,
	// as at Stripe; until then its key is in flight. Default 2s.
	Hold time.Duration
}

// PaymentIntent is one PaymentIntent in the ledger.
type PaymentIntent struct {
	ID             string
	IdempotencyKey string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Status         string
	Metadata       map[string]string
	// LatestCharge is the id of the charge made, if any.
	LatestCharge string
	// DeclineCode is the decline of a requires_payment_method intent.
	DeclineCode string
	Created     time.Time
}

// Server is the fake; it is an http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	ledger   []PaymentIntent
	keys     map[string]*keyState
	requests int
	charges  int
	// refunds and refundKeys are the refunds' ledger and idempotency
	// keys (refunds.go).
	refunds    []Refund
	refundKeys map[string]*keyState
}

// keyState is what the fake remembers of an idempotency key.
type keyState struct {
	params string        // the first request's form, canonically encoded
	done   chan struct{} // closed when the first request has been answered
	status int
	body   []byte
}

// New returns a fake.
func New(opts Options) *Server {
	if opts.Hold <= 0 {
		opts.Hold = defaultHold
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), keys: map[string]*keyState{}, refundKeys: map[string]*keyState{}}
	s.mux.HandleFunc("POST /v1/payment_intents", s.createIntent)
	s.mux.HandleFunc("POST /v1/refunds", s.createRefund)
	s.mux.HandleFunc("GET /v1/refunds", s.listRefunds)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Type: "invalid_request_error",
			Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ")."})
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Ledger returns every PaymentIntent created so far, in order.
func (s *Server) Ledger() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PaymentIntent(nil), s.ledger...)
}

// Intents returns the PaymentIntents created under an idempotency key.
func (s *Server) Intents(key string) []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PaymentIntent
	for _, pi := range s.ledger {
		if pi.IdempotencyKey == key {
			out = append(out, pi)
		}
	}
	return out
}

// Requests counts the create requests received, replays included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
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

// answer is what the fake will say to one executed request.
type answer struct {
	status int
	body   []byte
	// save keeps the answer for the key's replays.
	save bool
	hold bool
	drop bool
}

func (s *Server) createIntent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	reqID := fmt.Sprintf("req_fake_%06d", s.requests)
	s.mu.Unlock()
	w.Header().Set("Request-Id", reqID)

	if key, ok := s.authorized(r); !ok {
		writeError(w, http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid API Key provided: %s", key)})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error",
			Message: "Invalid request body."})
		return
	}
	form := r.PostForm
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		a := s.execute(form, "")
		s.respond(w, a)
		return
	}
	w.Header().Set("Idempotency-Key", key)
	params := form.Encode() // sorted by parameter name

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
		if k.params != params {
			writeError(w, http.StatusBadRequest, apiError{Type: "idempotency_error",
				Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."})
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeBody(w, k.status, k.body)
		return
	}
	k := &keyState{params: params, done: make(chan struct{})}
	s.keys[key] = k
	s.mu.Unlock()

	a := s.execute(form, key)
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

// respond writes a, or drops the connection when a says so.
func (s *Server) respond(w http.ResponseWriter, a answer) {
	if a.drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeBody(w, a.status, a.body)
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

// execute validates a create request and carries it out.
func (s *Server) execute(form map[string][]string, key string) answer {
	get := func(name string) string {
		if v := form[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	amount, err := strconv.ParseInt(get("amount"), 10, 64)
	switch {
	case get("amount") == "":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "amount", Message: "Missing required param: amount."})
	case err != nil || amount <= 0:
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount", Message: "Invalid positive integer"})
	case !currencyRE.MatchString(get("currency")):
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_empty", Param: "currency", Message: "Invalid currency: " + get("currency")})
	case get("payment_method") == "":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "payment_method", Message: "Missing required param: payment_method."})
	case get("confirm") != "true":
		return rejected(apiError{Type: "invalid_request_error", Param: "confirm", Message: "This fake only creates and confirms in one call: confirm must be true."})
	}
	pm := get("payment_method")

	pi := PaymentIntent{
		IdempotencyKey: key, Amount: amount, Currency: get("currency"), PaymentMethod: pm,
		Metadata: map[string]string{}, Created: time.Now().UTC(),
	}
	for name, v := range form {
		if k, ok := strings.CutPrefix(name, "metadata["); ok && strings.HasSuffix(k, "]") && len(v) > 0 {
			pi.Metadata[strings.TrimSuffix(k, "]")] = v[0]
		}
	}

	a := answer{status: http.StatusOK, save: true}
	var decline string
	switch pm {
	case TokenVisa, TokenRefundTimeout, TokenRefundFail:
	case TokenDeclined:
		decline = "generic_decline"
	case TokenInsufficientFunds:
		decline = "insufficient_funds"
	case TokenRequiresAction:
		pi.Status = "requires_action"
	case TokenTimeout:
		a.hold = true
	case TokenDropAfterCreate:
		a.drop = true
	case TokenServerErrorAfterCreate:
		a.status = http.StatusInternalServerError
	case TokenRateLimited:
		return answer{status: http.StatusTooManyRequests, body: errorBody(apiError{Type: "invalid_request_error", Code: "rate_limit",
			Message: "Request rate limit exceeded."})}
	default:
		return rejected(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "payment_method",
			Message: fmt.Sprintf("No such PaymentMethod: '%s'", pm)})
	}

	s.mu.Lock()
	pi.ID = fmt.Sprintf("pi_fake_%06d", len(s.ledger)+1)
	if pi.Status == "" {
		s.charges++
		pi.LatestCharge = fmt.Sprintf("ch_fake_%06d", s.charges)
		pi.Status = "succeeded"
		if decline != "" {
			pi.Status, pi.DeclineCode = "requires_payment_method", decline
		}
	}
	s.ledger = append(s.ledger, pi)
	s.mu.Unlock()

	switch {
	case a.status == http.StatusInternalServerError:
		a.body = errorBody(apiError{Type: "api_error", Message: "An unknown error occurred"})
	case decline != "":
		a.status = http.StatusPaymentRequired
		a.body = errorBody(apiError{Type: "card_error", Code: "card_declined", DeclineCode: decline,
			Message: "Your card was declined.", Charge: pi.LatestCharge, PaymentIntent: intentJSON(pi)})
	default:
		a.body, _ = json.Marshal(intentJSON(pi))
	}
	return a
}

// intentJSON is a PaymentIntent as Stripe's API shows it.
func intentJSON(pi PaymentIntent) map[string]any {
	m := map[string]any{
		"id": pi.ID, "object": "payment_intent", "amount": pi.Amount, "currency": pi.Currency,
		"status": pi.Status, "payment_method": pi.PaymentMethod, "payment_method_types": []string{"card"},
		"capture_method": "automatic", "confirmation_method": "automatic", "metadata": pi.Metadata,
		"created": pi.Created.Unix(), "livemode": false, "client_secret": pi.ID + "_secret_fake",
		"amount_received": 0, "latest_charge": nil, "last_payment_error": nil, "next_action": nil,
	}
	if pi.LatestCharge != "" {
		m["latest_charge"] = pi.LatestCharge
	}
	switch pi.Status {
	case "succeeded":
		m["amount_received"] = pi.Amount
	case "requires_action":
		m["next_action"] = map[string]any{"type": "use_stripe_sdk"}
	case "requires_payment_method":
		m["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined",
			"decline_code": pi.DeclineCode, "message": "Your card was declined.", "charge": pi.LatestCharge}
	}
	return m
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
