// Package sim is a payment gateway simulator: a real HTTP server that speaks
// the protocol of package refpsp (POST /v1/charges, GET /v1/charges?reference=,
// and the same for /v1/refunds: see refunds.go; listings of both by created
// window: see list.go; authorizations, /v1/captures and /v1/voids: see
// holds.go; disputes, /v1/disputes: see disputes.go)
// and misbehaves on request, so that tests and local runs can see what a
// gateway's faults do to Settle. It keeps a ledger of every charge it made,
// which is the truth to check "charged exactly once" against.
//
// # Faults by payment method token
//
//	tok_ok                 succeeds: 201.
//	tok_decline            declines: 402, decline_code "card_declined"; the
//	                       ledger records the declined charge.
//	tok_decline_<code>     declines the same way with decline_code <code>
//	                       (lower-case letters, digits and underscores, at
//	                       most 64): "tok_decline_processing_error" is a
//	                       technical decline, "tok_decline_stolen_card" a
//	                       stolen card (see order.CascadeAfter).
//	tok_timeout            charges, then holds the answer for
//	                       Options.ClientTimeout (or until the client hangs up)
//	                       before a 201: to the client, a timeout after charging.
//	tok_timeout_silent     like tok_timeout, and no event is sent for the
//	                       charge: only a lookup (the reconciler) learns it.
//	tok_lookup_fails       like tok_timeout_silent, and every lookup of the
//	                       charge answers 503: the reconciler cannot learn the
//	                       outcome, and the order ends in NEEDS_REVIEW.
//	tok_5xx_after_charge   charges, then answers 500.
//	tok_drop_after_charge  charges, then closes the connection without answering.
//	tok_slow_<ms>          charges, and answers 201 after <ms> milliseconds
//	                       unless the client hangs up first. Until then the
//	                       charge is in flight: lookups say 404 even though it
//	                       happened. A <ms> that is not a number is rejected (422).
//	tok_refuse             429 rate limited; nothing charged.
//	tok_reject             422 rejected; nothing charged.
//	tok_random             like tok_ok, under the random faults below.
//	tok_3ds                asks for 3-D Secure: with customer_present, 202 with
//	                       status requires_action and a next_action_url served
//	                       here (GET /v1/challenges/<id>/<secret>, no API key;
//	                       the id and the secret are random, and the URL is
//	                       only in the answer to the charge, so only who holds
//	                       it can end the challenge): opening it charges,
//	                       ?fail=1 declines it "authentication_failed";
//	                       POST /v1/charges/cancel cancels it while it waits.
//	                       Without customer_present, 402 declined
//	                       "authentication_required".
//	tok_refund_*           charge like tok_ok; their refunds meet a fault
//	                       (see refunds.go).
//	tok_capture_*, tok_void_*, tok_lapse_<ms>
//	                       charge like tok_ok; their captures or voids meet
//	                       a fault, or their authorization lapses early
//	                       (see holds.go).
//
// Any other token is declined: 402, decline_code "unknown_token" (a
// mistyped token is not silently charged).
//
// A refused connection cannot be simulated by a handler: to test it, point
// the client at a port nothing listens on.
//
// # Random faults
//
// When any rate in Options.Random is above zero, tok_ok and tok_random
// charges draw their fault from a PCG source seeded with Options.Seed: the
// same seed and the same sequence of requests give the same faults. The
// rates are checked in the order Decline, Timeout, FiveXXAfterCharge,
// DropAfterCharge, FiveXXNoCharge, Slow, so rates that sum past 1 starve the
// later faults.
//
// A slow charge, random or tok_slow_<ms>, is in flight until its answer is
// due: lookups say 404 although the charge happened, even after the client
// has given up. A random timeout is in flight the same way with probability
// LookupNotFoundWhileInFlight. That is the gateway that tells a reconciler
// "no such charge" while the charge is still landing; the ledger lists such
// charges from the start, because the money has moved.
//
// # Idempotency
//
// Like many gateways, the simulator ignores Idempotency-Key and charges every
// request, even one that repeats a reference, unless Options.Dedupe is set:
// then a repeated reference is answered with the stored charge (201 or 402)
// and nothing more is charged.
//
// # Ledger
//
// Sim.Ledger and GET /v1/ledger (a JSON array of Charge, no authorization)
// list every charge made, succeeded or declined, in the order made, in flight
// or not; an authorization as it stands (captured, voided, lapsed).
// Sim.Disputes and GET /v1/dispute-ledger list the disputes opened, each
// with its status and the amounts withdrawn and reinstated (disputes.go).
// The audit's discrepancies (a foreign charge, a duplicate, an altered
// amount, a hidden charge, an extra refund) are made by the methods of
// discrepancy.go.
package sim

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// DefaultClientTimeout is Options.ClientTimeout when it is zero.
const DefaultClientTimeout = 30 * time.Second

// DefaultSlowMax is RandomFaults.SlowMax when it is zero.
const DefaultSlowMax = 2 * time.Second

// The statuses of a Charge, which are the protocol's.
const (
	StatusSucceeded = refpsp.StatusSucceeded
	StatusDeclined  = refpsp.StatusDeclined
	// StatusRequiresAction: waiting for the customer to authenticate.
	StatusRequiresAction = refpsp.StatusRequiresAction
)

// maxBody bounds a charge request's body.
const maxBody = 1 << 20

// Options configures a Sim. The zero value is an honest gateway that ignores
// idempotency keys.
type Options struct {
	// Dedupe answers a repeated reference with the stored charge instead
	// of charging again.
	Dedupe bool
	// APIKey, when set, must be the bearer token of every charge and
	// lookup; when empty, any bearer token will do. Requests without one
	// get 401.
	APIKey string
	// ClientTimeout is how long a timeout fault holds its answer. It should
	// exceed the client's deadline. Zero means DefaultClientTimeout. The
	// wait ends early when the client hangs up or the server shuts down.
	ClientTimeout time.Duration
	// Seed seeds the random faults.
	Seed uint64
	// Random sets the rates of random faults.
	Random RandomFaults
	// Events, when its URL is set, pushes an event for every charge.
	Events Events
	// RefundSettleDelay is how long a refund that fails later stays
	// pending. Zero means DefaultRefundSettleDelay.
	RefundSettleDelay time.Duration
	// AuthorizationLifetime is how long an authorization (a charge with
	// "capture": false) can be captured: its capture_before is its
	// creation plus this. Zero means DefaultAuthorizationLifetime. The
	// tok_lapse_<ms> tokens set their own.
	AuthorizationLifetime time.Duration
}

// RandomFaults are the probabilities, each from 0 to 1, that a tok_ok or
// tok_random charge meets a fault.
type RandomFaults struct {
	// Decline declines the charge (402).
	Decline float64
	// Timeout charges and holds the answer like tok_timeout.
	Timeout float64
	// FiveXXAfterCharge charges and answers 500.
	FiveXXAfterCharge float64
	// DropAfterCharge charges and drops the connection.
	DropAfterCharge float64
	// FiveXXNoCharge answers 503 without charging.
	FiveXXNoCharge float64
	// Slow charges and answers after a delay drawn up to SlowMax; lookups
	// do not see the charge until then.
	Slow float64
	// LookupNotFoundWhileInFlight hides a Timeout charge from lookups until
	// its answer is due (Options.ClientTimeout after the charge).
	LookupNotFoundWhileInFlight float64
	// SlowMax is the longest slow delay. Zero means DefaultSlowMax.
	SlowMax time.Duration
	// RefundFailLater answers a refund "pending" and fails it after
	// Options.RefundSettleDelay.
	RefundFailLater float64
}

func (rf RandomFaults) enabled() bool {
	return rf.Decline > 0 || rf.Timeout > 0 || rf.FiveXXAfterCharge > 0 ||
		rf.DropAfterCharge > 0 || rf.FiveXXNoCharge > 0 || rf.Slow > 0 ||
		rf.LookupNotFoundWhileInFlight > 0 || rf.RefundFailLater > 0
}

// Charge is one charge the simulator made, as its ledger lists it.
type Charge struct {
	ID            string `json:"id"`
	Reference     string `json:"reference"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Description   string `json:"description"`
	// Status is StatusSucceeded (money moved), StatusDeclined,
	// StatusRequiresAction, or one of an authorization's (see Manual).
	Status      string `json:"status"`
	DeclineCode string `json:"decline_code,omitempty"`
	// NextActionURL is the authentication page of a charge waiting for
	// the customer (StatusRequiresAction). The ledger endpoint, which
	// needs no key, leaves it out: it holds the challenge's secret.
	NextActionURL string `json:"-"`
	// Created is when the simulator made the charge, in UTC.
	Created time.Time `json:"created"`
	// Manual says the charge was made with "capture": false: an
	// authorization, whose Status is then StatusAuthorized,
	// StatusCaptured, StatusVoided or StatusExpired once it succeeded,
	// AmountCaptured what its captures took, and CaptureBefore when it
	// lapses (see holds.go).
	Manual         bool      `json:"manual,omitempty"`
	AmountCaptured int64     `json:"amount_captured,omitempty"`
	CaptureBefore  time.Time `json:"capture_before,omitzero"`
}

// record is a ledger entry: a charge, when lookups may see it, and the
// id and secret of its 3-D Secure challenge, if any.
type record struct {
	Charge
	visibleAt time.Time
	// challenge and secret name the challenge page of a charge waiting for
	// the customer: /v1/challenges/<challenge>/<secret>.
	challenge, secret string
	// lifetime is how long the authorization lasts once it succeeds, and
	// lapsed says it has lapsed (holds.go).
	lifetime time.Duration
	lapsed   bool
	// hidden keeps the charge from lookups and listings for good
	// (Sim.Hide), though the ledger lists it.
	hidden bool
}

// Sim is the simulator, an http.Handler. It is safe for concurrent use.
type Sim struct {
	opts Options
	mux  *http.ServeMux

	mu       sync.Mutex
	rng      *rand.Rand      // draws random faults; guarded by mu
	records  []record        // the ledger, oldest first; guarded by mu
	refunds  []refundRecord  // the refund ledger, oldest first; guarded by mu
	captures []captureRecord // the capture ledger, oldest first; guarded by mu
	voids    []voidRecord    // the void ledger, oldest first; guarded by mu
	disputes []Dispute       // the dispute ledger, oldest first; guarded by mu
	eventSeq int             // numbers the events; guarded by mu
	eventRng *rand.Rand      // draws the events' faults; guarded by mu
	// disputeRng draws which charges DisputeSome disputes and how
	// ResolveOpenDisputes decides them; guarded by mu.
	disputeRng *rand.Rand
	// created is the latest creation time given a charge or a refund
	// (stampLocked); guarded by mu.
	created time.Time

	// Event deliveries run until the simulator stops (Close, or the end
	// of Serve), which waits for them.
	client   *http.Client
	senders  sync.WaitGroup
	stopping chan struct{}
	stopOnce sync.Once

	// requests counts the protocol requests served (charges, lookups,
	// cancels, refunds, captures, voids, disputes' reads and accepts),
	// lookups the charge lookups among them.
	requests, lookups atomic.Int64
}

// eventSenders bounds the event deliveries in flight to one listener, as
// a real gateway bounds its senders: more wait for a connection. It stays
// under the webhook listener's connections per address, the simulator's
// deliveries all coming from one.
const eventSenders = 16

func eventTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost = eventSenders, eventSenders
	return t
}

// New returns a simulator configured by opts.
func New(opts Options) *Sim {
	if opts.ClientTimeout <= 0 {
		opts.ClientTimeout = DefaultClientTimeout
	}
	if opts.RefundSettleDelay <= 0 {
		opts.RefundSettleDelay = DefaultRefundSettleDelay
	}
	if opts.AuthorizationLifetime <= 0 {
		opts.AuthorizationLifetime = DefaultAuthorizationLifetime
	}
	if opts.Random.SlowMax <= 0 {
		opts.Random.SlowMax = DefaultSlowMax
	}
	s := &Sim{
		opts: opts,
		// The stream constant is arbitrary; only Seed varies the sequence.
		rng:      rand.New(rand.NewPCG(opts.Seed, 0x5e771e)),
		eventRng: rand.New(rand.NewPCG(opts.Seed, 0xe7e47)),
		// Disputes draw from a source of their own, so that the charges'
		// and the events' faults are the same with disputes or without.
		disputeRng: rand.New(rand.NewPCG(opts.Seed, 0xd15e)),
		client:     &http.Client{Timeout: 10 * time.Second, Transport: eventTransport()},
		stopping:   make(chan struct{}),
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/charges", s.handleCharge)
	s.mux.HandleFunc("GET /v1/charges", s.handleLookup)
	s.mux.HandleFunc("GET /v1/challenges/{id}/{secret}", s.handleAuthenticate)
	s.mux.HandleFunc("POST /v1/charges/cancel", s.handleCancel)
	s.mux.HandleFunc("GET /v1/ledger", s.handleLedger)
	s.mux.HandleFunc("POST /v1/refunds", s.handleRefund)
	s.mux.HandleFunc("GET /v1/refunds", s.handleRefundLookup)
	s.mux.HandleFunc("GET /v1/refund-ledger", s.handleRefundLedger)
	s.mux.HandleFunc("POST /v1/captures", s.handleCapture)
	s.mux.HandleFunc("GET /v1/captures", s.handleCaptureLookup)
	s.mux.HandleFunc("GET /v1/capture-ledger", s.handleCaptureLedger)
	s.mux.HandleFunc("POST /v1/voids", s.handleVoid)
	s.mux.HandleFunc("GET /v1/voids", s.handleVoidLookup)
	s.mux.HandleFunc("GET /v1/void-ledger", s.handleVoidLedger)
	s.mux.HandleFunc("GET /v1/disputes/{id}", s.handleDisputeRead)
	s.mux.HandleFunc("POST /v1/disputes/{id}/accept", s.handleDisputeAccept)
	s.mux.HandleFunc("POST /v1/sim/disputes", s.handleDisputeControl)
	s.mux.HandleFunc("POST /v1/sim/disputes/{id}/{verb}", s.handleDisputeControl)
	s.mux.HandleFunc("GET /v1/dispute-ledger", s.handleDisputeLedger)
	return s
}

// ServeHTTP serves the protocol and the ledger.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasSuffix(r.URL.Path, "ledger") && !strings.HasSuffix(r.URL.Path, "/authenticate") {
		s.requests.Add(1)
	}
	s.mux.ServeHTTP(w, r)
}

// Requests counts the protocol requests the simulator has served, as a
// gateway account's rate limit counts them: every charge, lookup,
// cancel, refund, capture, void and page of a listing, but not the
// ledgers (a test's) nor
// the customers' authentication pages.
func (s *Sim) Requests() int { return int(s.requests.Load()) }

// Lookups counts the charge lookups (GET /v1/charges) the simulator has
// served.
func (s *Sim) Lookups() int { return int(s.lookups.Load()) }

// Ledger returns every charge made so far, oldest first, including those
// still hidden from lookups; an authorization as it now stands.
func (s *Sim) Ledger() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]Charge, len(s.records))
	for i := range s.records {
		s.lapseLocked(i, now)
		out[i] = s.records[i].Charge
	}
	return out
}

// Succeeded counts the ledger's succeeded charges whose reference is one of
// references: for a test, the times the customer was charged for the
// attempts (the references) of one order. Authorizations are not counted:
// their captures are (Captures).
func (s *Sim) Succeeded(references ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if r.Status == StatusSucceeded && slices.Contains(references, r.Reference) {
			n++
		}
	}
	return n
}

// Close stops the deliveries of events and waits for those in progress.
// Serve calls it when it ends; a Sim served by other means (httptest)
// should be closed by its owner.
func (s *Sim) Close() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.senders.Wait()
	s.client.CloseIdleConnections()
}

// ListenAndServe serves the simulator on the TCP address addr until ctx
// ends, then shuts down.
func (s *Sim) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves the simulator on ln until ctx ends, then shuts down and
// returns nil. It closes ln. Requests in progress see their context end with
// ctx, so held answers (timeouts, slow charges) are cut short rather than
// keeping the shutdown waiting.
func (s *Sim) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("sim: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	s.Close()
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr // once Shutdown has begun, Serve returns ErrServerClosed
	}
	if err != nil {
		return fmt.Errorf("sim: shutdown: %w", err)
	}
	return nil
}

// problem says what is wrong with the request, or "" if nothing is.
func problem(in refpsp.ChargeBody) string {
	switch {
	case in.Reference == "":
		return "reference is required"
	case in.Amount <= 0:
		return "amount must be positive"
	case in.Currency == "":
		return "currency is required"
	case in.PaymentMethod == "":
		return "payment_method is required"
	}
	return ""
}

// fault is what the simulator does with one charge request.
type fault int

const (
	faultNone fault = iota
	faultReplay
	faultDecline
	faultRateLimit
	faultReject
	faultUnavailable // 5xx before charging
	faultHold        // tok_timeout, tok_slow_<ms>: charge, answer late
	faultError       // 5xx after charging
	faultDrop
	faultAction // tok_3ds: the customer must authenticate
	faultUnknownToken
)

// plan is how one charge request is handled.
type plan struct {
	fault fault
	// delay is how long faultHold holds the answer.
	delay time.Duration
	// hidden keeps the charge from lookups for delay.
	hidden bool
	// silent sends no event for the charge.
	silent bool
	// declineCode is faultDecline's code; empty is "card_declined".
	declineCode string
	// charge is the charge made (or, for faultReplay, found), if any.
	charge Charge
}

func (s *Sim) handleCharge(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key; nothing charged")
		return
	}
	// Reading the body to its end also lets the server notice a client
	// that hangs up, which is what ends r.Context() during a held answer.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable body; nothing charged")
		return
	}
	var in refpsp.ChargeBody
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON; nothing charged")
		return
	}
	if msg := problem(in); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg+"; nothing charged")
		return
	}

	p := s.accept(in, "http://"+r.Host)
	p.answer(w, r, "payment method rejected", "charged", func() { writeCharge(w, p.charge) })
}

// answer writes what the plan's fault makes of a request (a charge or a
// refund): ok writes the object made or found; rejected and undone word the
// refusals ("… rejected; nothing <undone>").
func (p plan) answer(w http.ResponseWriter, r *http.Request, rejected, undone string, ok func()) {
	switch p.fault {
	case faultNone, faultReplay, faultDecline, faultAction, faultUnknownToken:
		ok()
	case faultRateLimit:
		writeError(w, http.StatusTooManyRequests, "rate limited; nothing "+undone)
	case faultReject:
		writeError(w, http.StatusUnprocessableEntity, rejected+"; nothing "+undone)
	case faultUnavailable:
		writeError(w, http.StatusServiceUnavailable, "unavailable; nothing "+undone)
	case faultHold:
		if !sleep(r.Context(), p.delay) {
			// The client hung up or the server is shutting down. Abort
			// rather than return, which would send an empty 200.
			panic(http.ErrAbortHandler)
		}
		ok()
	case faultError:
		writeError(w, http.StatusInternalServerError, "internal error")
	case faultDrop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// HTTP/2 cannot hijack; aborting resets the stream instead.
			panic(http.ErrAbortHandler)
		}
		conn.Close()
	}
}

// accept decides what to do with a valid charge request and makes the
// charge, if any, in one critical section: a Dedupe check and the charge it
// guards cannot interleave with another request's.
func (s *Sim) accept(in refpsp.ChargeBody, base string) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Dedupe {
		if c, ok := s.latestLocked(in.Reference, false); ok {
			return plan{fault: faultReplay, charge: c}
		}
	}

	p := s.planLocked(in.PaymentMethod)
	switch p.fault {
	case faultRateLimit, faultReject, faultUnavailable:
		return p
	default: // the charge is made, and answered as its fault says
	}
	now := s.stampLocked()
	rec := record{
		Charge: Charge{
			ID:            fmt.Sprintf("ch_sim_%06d", len(s.records)+1),
			Reference:     in.Reference,
			Amount:        in.Amount,
			Currency:      in.Currency,
			PaymentMethod: in.PaymentMethod,
			Description:   in.Description,
			Status:        StatusSucceeded,
			Created:       now,
		},
		visibleAt: now,
	}
	rec.Manual = in.Capture != nil && !*in.Capture
	rec.lifetime = s.lifetime(in.PaymentMethod)
	switch p.fault {
	case faultDecline:
		rec.Status, rec.DeclineCode = StatusDeclined, cmp.Or(p.declineCode, "card_declined")
	case faultUnknownToken:
		rec.Status, rec.DeclineCode = StatusDeclined, "unknown_token"
	case faultAction:
		rec.Status, rec.DeclineCode = StatusDeclined, "authentication_required"
		if in.CustomerPresent {
			rec.Status, rec.DeclineCode = StatusRequiresAction, ""
			rec.challenge, rec.secret = "chl_"+strings.ToLower(crand.Text()), strings.ToLower(crand.Text())
			rec.NextActionURL = base + "/v1/challenges/" + rec.challenge + "/" + rec.secret
		}
	default: // succeeded
		rec.authorize(now)
	}
	if p.hidden {
		rec.visibleAt = now.Add(p.delay)
	}
	s.records = append(s.records, rec)
	p.charge = rec.Charge
	if rec.Status == StatusRequiresAction || p.silent {
		// A challenge's event comes when the customer ends it; a silent
		// charge has none.
		return p
	}
	s.sendLocked(chargeEvent(rec.Charge, now), rec.visibleAt)
	s.lapseLaterLocked(rec.Charge)
	return p
}

// planLocked chooses the fault for a payment method token.
func (s *Sim) planLocked(token string) plan {
	switch token {
	case "tok_decline":
		return plan{fault: faultDecline}
	case "tok_3ds":
		return plan{fault: faultAction}
	case "tok_timeout":
		return plan{fault: faultHold, delay: s.opts.ClientTimeout}
	case tokTimeoutSilent, tokLookupFails:
		return plan{fault: faultHold, delay: s.opts.ClientTimeout, silent: true}
	case "tok_5xx_after_charge":
		return plan{fault: faultError}
	case "tok_drop_after_charge":
		return plan{fault: faultDrop}
	case "tok_refuse":
		return plan{fault: faultRateLimit}
	case "tok_reject":
		return plan{fault: faultReject}
	case "tok_ok", "tok_random":
		if s.opts.Random.enabled() {
			return s.drawLocked()
		}
		return plan{}
	case "tok_refund_timeout", tokRefundLookupFails, "tok_refund_5xx", "tok_refund_drop", "tok_refund_decline", "tok_refund_fail_later":
		return plan{} // their refunds meet the fault (refundPlanLocked)
	}
	if holdToken(token) {
		return plan{} // their captures and voids meet the fault (holdPlanLocked)
	}
	if ms, ok := strings.CutPrefix(token, "tok_lapse_"); ok {
		if _, err := strconv.ParseUint(ms, 10, 31); err != nil {
			return plan{fault: faultReject}
		}
		return plan{}
	}
	if code, ok := strings.CutPrefix(token, "tok_decline_"); ok && declineCodeRE.MatchString(code) {
		return plan{fault: faultDecline, declineCode: code}
	}
	if ms, ok := strings.CutPrefix(token, "tok_slow_"); ok {
		n, err := strconv.ParseUint(ms, 10, 31)
		if err != nil {
			return plan{fault: faultReject}
		}
		return plan{fault: faultHold, delay: time.Duration(n) * time.Millisecond, hidden: true}
	}
	return plan{fault: faultUnknownToken}
}

// declineCodeRE is what tok_decline_<code> takes as its code.
var declineCodeRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// The tokens whose charge only a lookup can learn.
const (
	tokTimeoutSilent = "tok_timeout_silent"
	tokLookupFails   = "tok_lookup_fails"
)

// tokRefundLookupFails charges like tok_ok; its refunds answer late and
// cannot be looked up.
const tokRefundLookupFails = "tok_refund_lookup_fails"

// drawLocked draws a random fault. Every call makes the same draws for the
// same fault, so the sequence depends only on the seed and the requests.
func (s *Sim) drawLocked() plan {
	rf := s.opts.Random
	u := s.rng.Float64()
	for _, f := range []struct {
		rate float64
		plan func() plan
	}{
		{rf.Decline, func() plan { return plan{fault: faultDecline} }},
		{rf.Timeout, func() plan {
			inFlight := s.rng.Float64() < rf.LookupNotFoundWhileInFlight
			return plan{fault: faultHold, delay: s.opts.ClientTimeout, hidden: inFlight}
		}},
		{rf.FiveXXAfterCharge, func() plan { return plan{fault: faultError} }},
		{rf.DropAfterCharge, func() plan { return plan{fault: faultDrop} }},
		{rf.FiveXXNoCharge, func() plan { return plan{fault: faultUnavailable} }},
		{rf.Slow, func() plan {
			delay := time.Duration(s.rng.Int64N(int64(rf.SlowMax) + 1))
			return plan{fault: faultHold, delay: delay, hidden: true}
		}},
	} {
		if u < f.rate {
			return f.plan()
		}
		u -= max(f.rate, 0)
	}
	return plan{}
}

// latestLocked returns the latest charge with the reference, an
// authorization as it stands now. With visible it skips charges that
// lookups may not see yet.
func (s *Sim) latestLocked(reference string, visible bool) (Charge, bool) {
	now := time.Now()
	for i := len(s.records) - 1; i >= 0; i-- {
		r := s.records[i]
		if r.Reference != reference || (visible && (r.visibleAt.After(now) || r.hidden)) {
			continue
		}
		s.lapseLocked(i, now)
		return s.records[i].Charge, true
	}
	return Charge{}, false
}

func (s *Sim) handleLookup(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("reference") {
		s.handleChargeList(w, r)
		return
	}
	s.lookups.Add(1)
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		writeError(w, http.StatusBadRequest, "reference is required")
		return
	}
	s.mu.Lock()
	c, ok := s.latestLocked(ref, true)
	s.mu.Unlock()
	if ok && c.PaymentMethod == tokLookupFails {
		writeError(w, http.StatusServiceUnavailable, "lookups of this charge fail (tok_lookup_fails)")
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no charge with that reference")
		return
	}
	writeJSON(w, http.StatusOK, wireCharge(c))
}

func (s *Sim) handleLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Ledger())
}

// authorized reports whether r carries a bearer token: Options.APIKey if it
// is set, any token otherwise.
func (s *Sim) authorized(r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		return false
	}
	return s.opts.APIKey == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.opts.APIKey)) == 1
}

// wireCharge is c as the protocol answers it.
func wireCharge(c Charge) refpsp.ChargeObject {
	o := refpsp.ChargeObject{
		ID: c.ID, Reference: c.Reference, Status: c.Status,
		Amount: c.Amount, Currency: c.Currency, DeclineCode: c.DeclineCode, NextActionURL: c.NextActionURL,
		AmountCaptured: c.AmountCaptured, CaptureBefore: c.CaptureBefore,
	}
	if c.Status == StatusAuthorized {
		o.AmountCapturable = c.Amount - c.AmountCaptured
	}
	return o
}

// writeCharge answers a charge request with c: 201 if it succeeded (or
// authorized), 402 if it was declined, 202 if it waits for the customer.
func writeCharge(w http.ResponseWriter, c Charge) {
	code := http.StatusCreated
	switch c.Status {
	case StatusDeclined:
		code = http.StatusPaymentRequired
	case StatusRequiresAction:
		code = http.StatusAccepted
	}
	writeJSON(w, code, wireCharge(c))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only the simulator's own types get here; they always marshal.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// sleep waits for d, or until ctx ends. It reports whether the full d passed.
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

// endAction ends the charge with the id that waits for the customer: to
// status, with declineCode. It reports false, changing nothing, when no
// charge with the id waits.
func (s *Sim) endAction(match func(record) bool, status, declineCode string) (Charge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.records) - 1; i >= 0; i-- {
		r := &s.records[i]
		if !match(*r) {
			continue
		}
		if r.Status != StatusRequiresAction {
			return r.Charge, false
		}
		now := time.Now().UTC()
		r.Status, r.DeclineCode, r.NextActionURL = status, declineCode, ""
		if status == StatusSucceeded {
			r.authorize(now)
		}
		s.sendLocked(chargeEvent(r.Charge, now), now)
		s.lapseLaterLocked(r.Charge)
		return r.Charge, true
	}
	return Charge{}, false
}

// handleAuthenticate is the authentication page of a tok_3ds charge, which
// the customer opens without any API key: it charges, or with ?fail=1
// declines. The page's id and secret are both random; a wrong secret is
// answered like an unknown id, and changes nothing.
func (s *Sim) handleAuthenticate(w http.ResponseWriter, r *http.Request) {
	status, code := StatusSucceeded, ""
	if r.URL.Query().Get("fail") != "" {
		status, code = StatusDeclined, "authentication_failed"
	}
	id, secret := r.PathValue("id"), r.PathValue("secret")
	c, ok := s.endAction(func(r record) bool {
		return r.challenge != "" && r.challenge == id && subtle.ConstantTimeCompare([]byte(r.secret), []byte(secret)) == 1
	}, status, code)
	if !ok && c.ID == "" {
		writeError(w, http.StatusNotFound, "no such challenge")
		return
	}
	if !ok {
		writeError(w, http.StatusConflict, "this charge is not waiting for authentication")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "authentication %s; return to the checkout\n", c.Status)
}

// handleCancel cancels a charge that waits for the customer (see
// refpsp.CancelBody).
func (s *Sim) handleCancel(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	var in refpsp.CancelBody
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil || json.Unmarshal(body, &in) != nil || in.Reference == "" {
		writeError(w, http.StatusBadRequest, "malformed cancel")
		return
	}
	c, ok := s.endAction(func(r record) bool { return r.Reference == in.Reference }, StatusDeclined, "canceled")
	switch {
	case ok:
		writeJSON(w, http.StatusOK, wireCharge(c))
	case c.ID != "":
		writeJSON(w, http.StatusConflict, wireCharge(c))
	default:
		writeError(w, http.StatusNotFound, "no charge with this reference")
	}
}
