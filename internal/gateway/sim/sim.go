// Package sim is a gateway simulator: a real HTTP server speaking the
// refpsp protocol (see package refpsp), with a ledger of every charge it
// made and faults injected deterministically. It backs `settle dev`, the
// tests and the chaos harness.
//
// Like the dangerous kind of gateway, it does not deduplicate by reference
// or Idempotency-Key unless Options.Dedupe is set: a double charge by Settle
// shows up as two entries in its ledger.
//
// Faults are chosen by payment method token:
//
//	tok_ok (and any other token)  charged, 201
//	tok_decline                   declined, 402 card_declined
//	tok_timeout                   charged, then no answer until ClientTimeout has passed
//	tok_5xx_after_charge          charged, then 500
//	tok_drop_after_charge         charged, then the connection is closed without an answer
//	tok_slow_<ms>                 waits <ms>, then charged, 201
//	tok_refuse                    429, nothing charged
//	tok_reject                    422, nothing charged
//	tok_random                    a fault drawn from Options.Random (so is tok_ok when Random has rates)
//
// In random mode, a slow charge becomes visible to lookups only when it is
// made, after the wait: a lookup meanwhile says 404 although the charge is
// still coming, as at a real gateway with a request in flight.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Sim.
type Options struct {
	// Dedupe makes a repeated reference return the charge it already made.
	Dedupe bool
	// ClientTimeout is how long tok_timeout keeps a charged request waiting:
	// longer than the client's deadline. Default 30s.
	ClientTimeout time.Duration
	// Seed seeds the random faults.
	Seed uint64
	// Random is the rate of each fault for tok_random (and tok_ok when any
	// rate is set).
	Random RandomFaults
}

// RandomFaults are the probabilities of each fault, from 0 to 1.
type RandomFaults struct {
	Decline           float64
	Timeout           float64
	FiveXXAfterCharge float64
	DropAfterCharge   float64
	FiveXXNoCharge    float64
	Slow              float64
	// SlowMax bounds a slow answer (default 2s).
	SlowMax time.Duration
}

func (r RandomFaults) any() bool {
	return r.Decline+r.Timeout+r.FiveXXAfterCharge+r.DropAfterCharge+r.FiveXXNoCharge+r.Slow > 0
}

// Charge is one charge in the ledger.
type Charge struct {
	ID            string    `json:"id"`
	Reference     string    `json:"reference"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	PaymentMethod string    `json:"payment_method"`
	Description   string    `json:"description,omitempty"`
	Status        string    `json:"status"`
	DeclineCode   string    `json:"decline_code,omitempty"`
	Created       time.Time `json:"created"`
}

// Sim is the simulator; it is an http.Handler.
type Sim struct {
	opts Options
	mux  *http.ServeMux

	mu     sync.Mutex
	rng    *rand.Rand
	ledger []Charge
	byRef  map[string]int // reference → index of its latest charge
}

// New returns a simulator.
func New(opts Options) *Sim {
	if opts.ClientTimeout <= 0 {
		opts.ClientTimeout = 30 * time.Second
	}
	if opts.Random.SlowMax <= 0 {
		opts.Random.SlowMax = 2 * time.Second
	}
	s := &Sim{opts: opts, mux: http.NewServeMux(), rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed)), byRef: map[string]int{}}
	s.mux.HandleFunc("POST /v1/charges", s.charge)
	s.mux.HandleFunc("GET /v1/charges", s.lookup)
	s.mux.HandleFunc("GET /v1/ledger", s.serveLedger)
	return s
}

func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Ledger returns every charge made so far, in order.
func (s *Sim) Ledger() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Charge(nil), s.ledger...)
}

type chargeRequest struct {
	Reference     string `json:"reference"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Description   string `json:"description"`
}

// fault is what happens to one charge request.
type fault struct {
	kind string // ok, decline, timeout, 5xx_after, drop_after, 5xx, refuse, reject
	slow time.Duration
}

func (s *Sim) faultFor(token string) fault {
	switch {
	case token == "tok_decline":
		return fault{kind: "decline"}
	case token == "tok_timeout":
		return fault{kind: "timeout"}
	case token == "tok_5xx_after_charge":
		return fault{kind: "5xx_after"}
	case token == "tok_drop_after_charge":
		return fault{kind: "drop_after"}
	case token == "tok_refuse":
		return fault{kind: "refuse"}
	case token == "tok_reject":
		return fault{kind: "reject"}
	case strings.HasPrefix(token, "tok_slow_"):
		ms, _ := strconv.Atoi(strings.TrimPrefix(token, "tok_slow_"))
		return fault{kind: "ok", slow: time.Duration(ms) * time.Millisecond}
	case token == "tok_random" || (token == "tok_ok" && s.opts.Random.any()):
		return s.randomFault()
	}
	return fault{kind: "ok"}
}

func (s *Sim) randomFault() fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, x := s.opts.Random, s.rng.Float64()
	for _, f := range []struct {
		p    float64
		kind string
	}{
		{r.Decline, "decline"}, {r.Timeout, "timeout"}, {r.FiveXXAfterCharge, "5xx_after"},
		{r.DropAfterCharge, "drop_after"}, {r.FiveXXNoCharge, "5xx"}, {r.Slow, "slow"},
	} {
		if x < f.p {
			if f.kind == "slow" {
				return fault{kind: "ok", slow: time.Duration(s.rng.Int64N(int64(r.SlowMax)))}
			}
			return fault{kind: f.kind}
		}
		x -= f.p
	}
	return fault{kind: "ok"}
}

func (s *Sim) charge(w http.ResponseWriter, r *http.Request) {
	var req chargeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Reference == "" ||
		req.Amount <= 0 || req.Currency == "" || req.PaymentMethod == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid charge request"})
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing API key"})
		return
	}
	f := s.faultFor(req.PaymentMethod)
	switch f.kind {
	case "refuse":
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "rate limited"})
		return
	case "reject":
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "payment method not usable"})
		return
	case "5xx":
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "try later"})
		return
	}
	if f.slow > 0 {
		// Should the client give up meanwhile, the charge goes ahead all
		// the same, as at a real gateway.
		sleep(r.Context(), f.slow)
	}
	status := "succeeded"
	if f.kind == "decline" {
		status = "declined"
	}
	c, replay := s.record(req, status)
	code := http.StatusCreated
	if c.Status == "declined" {
		code = http.StatusPaymentRequired
	}
	if replay {
		writeJSON(w, code, c)
		return
	}
	switch f.kind {
	case "timeout":
		sleep(r.Context(), s.opts.ClientTimeout)
	case "5xx_after":
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
		return
	case "drop_after":
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, code, c)
}

// record adds a charge to the ledger; with Dedupe, a known reference returns
// its charge instead.
func (s *Sim) record(req chargeRequest, status string) (Charge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.byRef[req.Reference]; ok && s.opts.Dedupe {
		return s.ledger[i], true
	}
	c := Charge{
		ID: fmt.Sprintf("ch_sim_%06d", len(s.ledger)+1), Reference: req.Reference, Amount: req.Amount,
		Currency: req.Currency, PaymentMethod: req.PaymentMethod, Description: req.Description,
		Status: status, Created: time.Now().UTC(),
	}
	if status == "declined" {
		c.DeclineCode = "card_declined"
	}
	s.ledger = append(s.ledger, c)
	s.byRef[req.Reference] = len(s.ledger) - 1
	return c, false
}

func (s *Sim) lookup(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reference is required"})
		return
	}
	s.mu.Lock()
	i, ok := s.byRef[ref]
	var c Charge
	if ok {
		c = s.ledger[i]
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no charge with that reference"})
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Sim) serveLedger(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Ledger())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
