package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Authorizations, captures and voids
//
// A charge with "capture": false that succeeds is an authorization
// (Charge.Manual): StatusAuthorized, with capture_before its creation (or,
// after 3-D Secure, its authentication) plus Options.AuthorizationLifetime.
// POST /v1/captures and POST /v1/voids hold it to the protocol's rules
// (see package refpsp): captured plus this capture at most the amount;
// nothing captured after a void or past capture_before; no void once
// something is captured; a final capture, or one that takes all that is
// left, closes it captured. Past capture_before it lapses: expired, or
// captured when something of it was. A refused capture or void is
// answered 402 and kept, failed, in its ledger. Like its charges, the
// simulator makes every capture and void, even one that repeats a
// reference, unless Options.Dedupe is set: then a repeat with the same
// parameters is answered with the one made, and one with other
// parameters 409.
//
// Their faults are chosen by the payment method token of the
// authorization, charged like tok_ok:
//
//	tok_capture_timeout    captures, then holds the answer like tok_timeout.
//	tok_capture_lookup_fails
//	                       like tok_capture_timeout, and every lookup of the
//	                       capture answers 503.
//	tok_capture_5xx        captures, then answers 500.
//	tok_capture_drop       captures, then closes the connection.
//	tok_void_timeout, tok_void_lookup_fails, tok_void_5xx, tok_void_drop
//	                       the same for its voids.
//	tok_lapse_<ms>         an authorization that lapses <ms> milliseconds
//	                       after it is made.
//	tok_ok, tok_random     under Options.Random, the faults drawn for
//	                       charges (a decline refuses the capture or void,
//	                       "capture_declined").
//
// The ledgers (Sim.Captures, GET /v1/capture-ledger; Sim.Voids, GET
// /v1/void-ledger; and the authorizations in Sim.Ledger) are the truth that
// Settle's captures and voids are checked against.

// DefaultAuthorizationLifetime is Options.AuthorizationLifetime when it is
// zero: seven days, as card schemes allow most authorizations.
const DefaultAuthorizationLifetime = 7 * 24 * time.Hour

// The statuses of an authorization (a Charge with Manual), the protocol's.
const (
	StatusAuthorized = refpsp.StatusAuthorized
	StatusCaptured   = refpsp.StatusCaptured
	StatusVoided     = refpsp.StatusVoided
	StatusExpired    = refpsp.StatusExpired
)

// Capture is one capture the simulator made or refused, as its ledger
// lists it.
type Capture struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	Amount          int64  `json:"amount"`
	Currency        string `json:"currency"`
	Final           bool   `json:"final"`
	// Status is refpsp.OpSucceeded (money moved) or refpsp.OpFailed.
	Status      string    `json:"status"`
	FailureCode string    `json:"failure_code,omitempty"`
	Created     time.Time `json:"created"`
}

// Void is one void the simulator made or refused, as its ledger lists it.
type Void struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	// Status is refpsp.OpSucceeded (the authorization was released) or
	// refpsp.OpFailed.
	Status      string    `json:"status"`
	FailureCode string    `json:"failure_code,omitempty"`
	Created     time.Time `json:"created"`
}

// captureRecord and voidRecord are ledger entries: when lookups may see
// them, and whether lookups of them fail.
type captureRecord struct {
	Capture
	visibleAt   time.Time
	lookupFails bool
}

type voidRecord struct {
	Void
	visibleAt   time.Time
	lookupFails bool
}

// Captures returns every capture made or refused so far, oldest first,
// including those hidden from lookups.
func (s *Sim) Captures() []Capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Capture, len(s.captures))
	for i, r := range s.captures {
		out[i] = r.Capture
	}
	return out
}

// Captured sums the succeeded captures of the authorization with reference
// chargeReference: what the gateway took of it.
func (s *Sim) Captured(chargeReference string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, c := range s.captures {
		if c.ChargeReference == chargeReference && c.Status == refpsp.OpSucceeded {
			n += c.Amount
		}
	}
	return n
}

// Voids returns every void made or refused so far, oldest first,
// including those hidden from lookups.
func (s *Sim) Voids() []Void {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Void, len(s.voids))
	for i, r := range s.voids {
		out[i] = r.Void
	}
	return out
}

// lifetime is how long an authorization paid with token lasts.
func (s *Sim) lifetime(token string) time.Duration {
	if ms, ok := strings.CutPrefix(token, "tok_lapse_"); ok {
		if n, err := strconv.ParseUint(ms, 10, 31); err == nil {
			return time.Duration(n) * time.Millisecond
		}
	}
	return s.opts.AuthorizationLifetime
}

// authorize makes a succeeded charge made with "capture": false the
// authorization it is, from now.
func (r *record) authorize(now time.Time) {
	if r.Manual {
		r.Status, r.CaptureBefore = StatusAuthorized, now.Add(r.lifetime)
	}
}

// lapseLocked lets the authorization of record i lapse if its
// capture_before has come, and reports whether it lapsed now.
func (s *Sim) lapseLocked(i int, now time.Time) bool {
	r := &s.records[i]
	if r.Status != StatusAuthorized || now.Before(r.CaptureBefore) {
		return false
	}
	r.lapsed, r.Status = true, StatusExpired
	if r.AmountCaptured > 0 {
		r.Status = StatusCaptured
	}
	return true
}

// lapseLaterLocked sends the event of c's lapse, if c is an authorization
// still open at its capture_before, when that comes.
func (s *Sim) lapseLaterLocked(c Charge) {
	if c.Status != StatusAuthorized || s.opts.Events.URL == "" {
		return
	}
	s.senders.Add(1)
	go func() {
		defer s.senders.Done()
		t := time.NewTimer(time.Until(c.CaptureBefore))
		defer t.Stop()
		select {
		case <-s.stopping:
			return
		case <-t.C:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range s.records {
			if s.records[i].ID == c.ID && s.lapseLocked(i, time.Now()) {
				e := refpsp.Event{Type: refpsp.EventAuthorizationExpired, Created: time.Now().Unix()}
				e.Data.Object = wireCharge(s.records[i].Charge)
				s.sendLocked(e, time.Now())
			}
		}
	}()
}

// holdToken reports whether token names a fault of captures or voids.
func holdToken(token string) bool {
	switch token {
	case "tok_capture_timeout", "tok_capture_lookup_fails", "tok_capture_5xx", "tok_capture_drop",
		"tok_void_timeout", "tok_void_lookup_fails", "tok_void_5xx", "tok_void_drop":
		return true
	}
	return false
}

// holdPlanLocked chooses the fault of a capture or a void (op) by its
// authorization's token, and whether lookups of it fail.
func (s *Sim) holdPlanLocked(op, token string) (plan, bool) {
	if rest, ok := strings.CutPrefix(token, "tok_"+op+"_"); ok && holdToken(token) {
		switch rest {
		case "timeout":
			return plan{fault: faultHold, delay: s.opts.ClientTimeout}, false
		case "lookup_fails":
			return plan{fault: faultHold, delay: s.opts.ClientTimeout, silent: true}, true
		case "5xx":
			return plan{fault: faultError}, false
		case "drop":
			return plan{fault: faultDrop}, false
		}
	}
	if (token == "tok_ok" || token == "tok_random") && s.opts.Random.enabled() {
		return s.drawLocked(), false
	}
	return plan{}, false
}

// authorizationLocked returns the index of the latest charge with the
// reference, lapsed if its time has come, or -1.
func (s *Sim) authorizationLocked(reference string, now time.Time) int {
	for i := len(s.records) - 1; i >= 0; i-- {
		if s.records[i].Reference == reference {
			s.lapseLocked(i, now)
			return i
		}
	}
	return -1
}

// refusal is why the authorization r cannot be captured (capture) or
// voided, or "" if it can be.
func (r record) refusal(capture bool, amount int64) string {
	switch {
	case !r.Manual || (r.Status != StatusAuthorized && r.Status != StatusCaptured && r.Status != StatusVoided && r.Status != StatusExpired):
		return refpsp.FailureNotAuthorization
	case r.lapsed:
		return refpsp.FailureExpired
	case r.Status == StatusVoided:
		return refpsp.FailureVoided
	case r.Status == StatusCaptured || (!capture && r.AmountCaptured > 0):
		return refpsp.FailureCaptured
	case capture && r.AmountCaptured+amount > r.Amount:
		return refpsp.FailureTooLarge
	}
	return ""
}

// holdPlan is how one capture or void request is handled: a charge's
// plan, and what the client is to be told.
type holdPlan struct {
	plan
	object any
	failed bool
}

func (s *Sim) handleCapture(w http.ResponseWriter, r *http.Request) {
	var in refpsp.CaptureBody
	if !s.readHoldRequest(w, r, &in, "captured") {
		return
	}
	if in.Reference == "" || in.ChargeReference == "" || in.Amount <= 0 || in.Currency == "" {
		writeError(w, http.StatusUnprocessableEntity, "reference, charge_reference, amount and currency are required; nothing captured")
		return
	}
	p, code, msg := s.acceptCapture(in)
	if code != 0 {
		writeError(w, code, msg+"; nothing captured")
		return
	}
	p.answer(w, r, "capture rejected", "captured", func() { p.write(w) })
}

func (s *Sim) handleVoid(w http.ResponseWriter, r *http.Request) {
	var in refpsp.VoidBody
	if !s.readHoldRequest(w, r, &in, "voided") {
		return
	}
	if in.Reference == "" || in.ChargeReference == "" {
		writeError(w, http.StatusUnprocessableEntity, "reference and charge_reference are required; nothing voided")
		return
	}
	p, code, msg := s.acceptVoid(in)
	if code != 0 {
		writeError(w, code, msg+"; nothing voided")
		return
	}
	p.answer(w, r, "void rejected", "voided", func() { p.write(w) })
}

// readHoldRequest checks the key and reads a capture's or a void's body
// into in, answering the request itself when it cannot.
func (s *Sim) readHoldRequest(w http.ResponseWriter, r *http.Request, in any, undone string) bool {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key; nothing "+undone)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable body; nothing "+undone)
		return false
	}
	if err := json.Unmarshal(body, in); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON; nothing "+undone)
		return false
	}
	return true
}

// write answers with the object: 201 when it succeeded, 402 when refused.
func (p holdPlan) write(w http.ResponseWriter) {
	code := http.StatusCreated
	if p.failed {
		code = http.StatusPaymentRequired
	}
	writeJSON(w, code, p.object)
}

// acceptCapture decides what to do with a capture request and makes the
// capture, if any, in one critical section, so that the rules and the
// capture they allow cannot interleave with another request's. A non-zero
// code refuses it.
func (s *Sim) acceptCapture(in refpsp.CaptureBody) (holdPlan, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	i := s.authorizationLocked(in.ChargeReference, now)
	if s.opts.Dedupe {
		for j := len(s.captures) - 1; j >= 0; j-- {
			c := s.captures[j].Capture
			if c.Reference != in.Reference {
				continue
			}
			if c.ChargeReference != in.ChargeReference || c.Amount != in.Amount || !strings.EqualFold(c.Currency, in.Currency) || c.Final != in.Final {
				return holdPlan{}, http.StatusConflict, "reference already used for a capture with other parameters"
			}
			return holdPlan{plan: plan{fault: faultReplay}, object: s.wireCaptureLocked(c, i), failed: c.Status == refpsp.OpFailed}, 0, ""
		}
	}
	switch {
	case i < 0:
		return holdPlan{}, http.StatusNotFound, "no charge with that charge_reference"
	case !strings.EqualFold(s.records[i].Currency, in.Currency):
		return holdPlan{}, http.StatusUnprocessableEntity, "currency is not the authorization's"
	}
	rec := &s.records[i]
	p, lookupFails := s.holdPlanLocked("capture", rec.PaymentMethod)
	switch p.fault {
	case faultRateLimit, faultReject, faultUnavailable:
		return holdPlan{plan: p}, 0, ""
	default: // the capture is made (or refused), and answered as its fault says
	}
	c := Capture{
		ID: fmt.Sprintf("cp_sim_%06d", len(s.captures)+1), Reference: in.Reference, ChargeReference: in.ChargeReference,
		Amount: in.Amount, Currency: in.Currency, Final: in.Final, Status: refpsp.OpSucceeded, Created: now,
	}
	if c.FailureCode = rec.refusal(true, in.Amount); c.FailureCode == "" && p.fault == faultDecline {
		c.FailureCode = refpsp.FailureDeclined
	}
	if c.FailureCode != "" {
		c.Status = refpsp.OpFailed
	} else {
		rec.AmountCaptured += in.Amount
		if in.Final || rec.AmountCaptured == rec.Amount {
			rec.Status = StatusCaptured
		}
	}
	visibleAt := now
	if p.hidden {
		visibleAt = now.Add(p.delay)
	}
	s.captures = append(s.captures, captureRecord{Capture: c, visibleAt: visibleAt, lookupFails: lookupFails})
	wire := s.wireCaptureLocked(c, i)
	if !p.silent {
		e := refpsp.Event{Type: refpsp.EventCaptureSucceeded, Created: now.Unix()}
		if c.Status == refpsp.OpFailed {
			e.Type = refpsp.EventCaptureFailed
		}
		e.Data.Object, e.Data.Capture = wire.Charge, &wire
		s.sendLocked(e, visibleAt)
	}
	return holdPlan{plan: p, object: wire, failed: c.Status == refpsp.OpFailed}, 0, ""
}

// acceptVoid is acceptCapture's twin for a void.
func (s *Sim) acceptVoid(in refpsp.VoidBody) (holdPlan, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	i := s.authorizationLocked(in.ChargeReference, now)
	if s.opts.Dedupe {
		for j := len(s.voids) - 1; j >= 0; j-- {
			v := s.voids[j].Void
			if v.Reference != in.Reference {
				continue
			}
			if v.ChargeReference != in.ChargeReference {
				return holdPlan{}, http.StatusConflict, "reference already used for a void of another charge"
			}
			return holdPlan{plan: plan{fault: faultReplay}, object: s.wireVoidLocked(v, i), failed: v.Status == refpsp.OpFailed}, 0, ""
		}
	}
	if i < 0 {
		return holdPlan{}, http.StatusNotFound, "no charge with that charge_reference"
	}
	rec := &s.records[i]
	p, lookupFails := s.holdPlanLocked("void", rec.PaymentMethod)
	switch p.fault {
	case faultRateLimit, faultReject, faultUnavailable:
		return holdPlan{plan: p}, 0, ""
	default:
	}
	v := Void{
		ID: fmt.Sprintf("vd_sim_%06d", len(s.voids)+1), Reference: in.Reference, ChargeReference: in.ChargeReference,
		Status: refpsp.OpSucceeded, Created: now,
	}
	if v.FailureCode = rec.refusal(false, 0); v.FailureCode == "" && p.fault == faultDecline {
		v.FailureCode = refpsp.FailureDeclined
	}
	if v.FailureCode != "" {
		v.Status = refpsp.OpFailed
	} else {
		rec.Status = StatusVoided
	}
	visibleAt := now
	if p.hidden {
		visibleAt = now.Add(p.delay)
	}
	s.voids = append(s.voids, voidRecord{Void: v, visibleAt: visibleAt, lookupFails: lookupFails})
	wire := s.wireVoidLocked(v, i)
	if !p.silent {
		e := refpsp.Event{Type: refpsp.EventVoidSucceeded, Created: now.Unix()}
		if v.Status == refpsp.OpFailed {
			e.Type = refpsp.EventVoidFailed
		}
		e.Data.Object, e.Data.Void = wire.Charge, &wire
		s.sendLocked(e, visibleAt)
	}
	return holdPlan{plan: p, object: wire, failed: v.Status == refpsp.OpFailed}, 0, ""
}

// wireCaptureLocked is c as the protocol answers it, with the charge of
// record i (-1: none) as it now stands.
func (s *Sim) wireCaptureLocked(c Capture, i int) refpsp.CaptureObject {
	o := refpsp.CaptureObject{ID: c.ID, Reference: c.Reference, ChargeReference: c.ChargeReference, Status: c.Status,
		Amount: c.Amount, Currency: c.Currency, Final: c.Final, FailureCode: c.FailureCode}
	if i >= 0 {
		o.Charge = wireCharge(s.records[i].Charge)
	}
	return o
}

// wireVoidLocked is v as the protocol answers it, with the charge of
// record i (-1: none) as it now stands.
func (s *Sim) wireVoidLocked(v Void, i int) refpsp.VoidObject {
	o := refpsp.VoidObject{ID: v.ID, Reference: v.Reference, ChargeReference: v.ChargeReference, Status: v.Status,
		FailureCode: v.FailureCode}
	if i >= 0 {
		o.Charge = wireCharge(s.records[i].Charge)
	}
	return o
}

func (s *Sim) handleCaptureLookup(w http.ResponseWriter, r *http.Request) {
	s.lookupHold(w, r, "capture", func(ref string, now time.Time) (any, bool, bool) {
		for j := len(s.captures) - 1; j >= 0; j-- {
			if c := s.captures[j]; c.Reference == ref && !c.visibleAt.After(now) {
				return s.wireCaptureLocked(c.Capture, s.authorizationLocked(c.ChargeReference, now)), true, c.lookupFails
			}
		}
		return nil, false, false
	})
}

func (s *Sim) handleVoidLookup(w http.ResponseWriter, r *http.Request) {
	s.lookupHold(w, r, "void", func(ref string, now time.Time) (any, bool, bool) {
		for j := len(s.voids) - 1; j >= 0; j-- {
			if v := s.voids[j]; v.Reference == ref && !v.visibleAt.After(now) {
				return s.wireVoidLocked(v.Void, s.authorizationLocked(v.ChargeReference, now)), true, v.lookupFails
			}
		}
		return nil, false, false
	})
}

// lookupHold answers a lookup of a capture or a void (what) by reference;
// find, called with the lock held, returns the object lookups may see, and
// whether it was found and whether its lookups fail.
func (s *Sim) lookupHold(w http.ResponseWriter, r *http.Request, what string, find func(ref string, now time.Time) (any, bool, bool)) {
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
	o, ok, failing := find(ref, time.Now())
	s.mu.Unlock()
	switch {
	case failing:
		writeError(w, http.StatusServiceUnavailable, "lookups of this "+what+" fail (tok_"+what+"_lookup_fails)")
	case !ok:
		writeError(w, http.StatusNotFound, "no "+what+" with that reference")
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func (s *Sim) handleCaptureLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Captures())
}

func (s *Sim) handleVoidLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Voids())
}
