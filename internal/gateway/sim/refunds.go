package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Refunds
//
// POST /v1/refunds refunds a succeeded charge found by its reference (404
// when there is none, 422 for another currency). Like its charges, the
// simulator refunds every request, even one that repeats a reference,
// unless Options.Dedupe is set, and it does not check that refunds stay
// within the charge: the ledger (Sim.Refunds, GET /v1/refund-ledger) is the
// truth that Settle's refund totals are checked against.
//
// A refund's fault is chosen by the payment method token of the charge it
// refunds:
//
//	tok_refund_timeout     refunds, then holds the answer like tok_timeout.
//	tok_refund_lookup_fails
//	                       like tok_refund_timeout, and every lookup of the
//	                       refund answers 503: the reconciler cannot learn
//	                       the outcome, and the refund ends in NEEDS_REVIEW.
//	tok_refund_5xx         refunds, then answers 500.
//	tok_refund_drop        refunds, then closes the connection.
//	tok_refund_decline     402, status "failed", failure_code "refund_declined".
//	tok_refund_fail_later  answers 201 "pending"; the refund fails after
//	                       Options.RefundSettleDelay, and lookups say
//	                       "pending" until then: the gateway that reports a
//	                       failure later.
//	(a charge with an open dispute)
//	                       402, status "failed", failure_code
//	                       "charge_disputed", as Stripe refuses a refund
//	                       of a disputed charge; the other faults still
//	                       apply to the answer.
//	tok_ok, tok_random     under Options.Random, the faults drawn for
//	                       charges (a decline fails the refund), and
//	                       RandomFaults.RefundFailLater.
//
// Every other token refunds at once.

// DefaultRefundSettleDelay is Options.RefundSettleDelay when it is zero.
const DefaultRefundSettleDelay = time.Second

// Refund is one refund the simulator made, as its ledger lists it.
type Refund struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	// ChargeID is the refunded charge's id.
	ChargeID string `json:"charge_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Status is refpsp.RefundSucceeded or refpsp.RefundFailed, as it
	// ends; a refund that fails later is listed failed from the start.
	Status      string    `json:"status"`
	FailureCode string    `json:"failure_code,omitempty"`
	Created     time.Time `json:"created"`
}

// refundRecord is a refund ledger entry: when lookups may see it, and until
// when it is pending.
type refundRecord struct {
	Refund
	visibleAt    time.Time
	pendingUntil time.Time
	// lookupFails makes every lookup of the refund answer 503
	// (tok_refund_lookup_fails).
	lookupFails bool
}

// Refunds returns every refund made so far, oldest first, including those
// hidden from lookups.
func (s *Sim) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refunds))
	for i, r := range s.refunds {
		out[i] = r.Refund
	}
	return out
}

// Refunded sums the succeeded refunds of the charge with reference
// chargeReference.
func (s *Sim) Refunded(chargeReference string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refundedLocked(chargeReference)
}

func (s *Sim) refundedLocked(chargeReference string) int64 {
	var n int64
	for _, r := range s.refunds {
		if r.ChargeReference == chargeReference && r.Status == refpsp.RefundSucceeded {
			n += r.Amount
		}
	}
	return n
}

func (s *Sim) handleRefund(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key; nothing refunded")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable body; nothing refunded")
		return
	}
	var in refpsp.RefundBody
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON; nothing refunded")
		return
	}
	if in.Reference == "" || in.ChargeReference == "" || in.Amount <= 0 || in.Currency == "" {
		writeError(w, http.StatusUnprocessableEntity, "reference, charge_reference, amount and currency are required; nothing refunded")
		return
	}
	p, code, msg := s.acceptRefund(in)
	if code != 0 {
		writeError(w, code, msg+"; nothing refunded")
		return
	}
	p.answer(w, r, "refund rejected", "refunded", func() { writeRefund(w, p.refund) })
}

// refundPlan is how one refund request is handled: a charge's plan, with
// the refund made, as the client is to be told it.
type refundPlan struct {
	plan
	refund refpsp.RefundObject
}

// acceptRefund decides what to do with a refund request and makes the
// refund, if any, in one critical section. A non-zero code refuses it.
func (s *Sim) acceptRefund(in refpsp.RefundBody) (refundPlan, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	if s.opts.Dedupe {
		for i := len(s.refunds) - 1; i >= 0; i-- {
			if s.refunds[i].Reference == in.Reference {
				return refundPlan{plan: plan{fault: faultReplay}, refund: s.refunds[i].wire(now)}, 0, ""
			}
		}
	}
	var charge *record
	for i := len(s.records) - 1; i >= 0; i-- {
		if s.records[i].Reference == in.ChargeReference && (s.records[i].Status == StatusSucceeded || s.records[i].AmountCaptured > 0) {
			charge = &s.records[i]
			break
		}
	}
	switch {
	case charge == nil:
		return refundPlan{}, http.StatusNotFound, "no succeeded (or captured) charge with that charge_reference"
	case !strings.EqualFold(charge.Currency, in.Currency):
		return refundPlan{}, http.StatusUnprocessableEntity, "currency is not the charge's"
	}

	p := s.refundPlanLocked(charge.PaymentMethod)
	switch p.fault {
	case faultRateLimit, faultReject, faultUnavailable:
		return refundPlan{plan: p.plan}, 0, ""
	default: // the refund is made, and answered as its fault says
	}
	now = s.stampLocked()
	rec := refundRecord{
		Refund: Refund{
			ID: fmt.Sprintf("re_sim_%06d", len(s.refunds)+1), Reference: in.Reference, ChargeReference: in.ChargeReference,
			ChargeID: charge.ID, Amount: in.Amount, Currency: in.Currency, Status: refpsp.RefundSucceeded, Created: now,
		},
		visibleAt:   now,
		lookupFails: charge.PaymentMethod == tokRefundLookupFails,
	}
	switch {
	case s.openDisputeLocked(charge.Reference):
		// As Stripe's charge_disputed: the network is deciding what
		// becomes of the money.
		rec.Status, rec.FailureCode = refpsp.RefundFailed, "charge_disputed"
	case p.fault == faultDecline:
		rec.Status, rec.FailureCode = refpsp.RefundFailed, "refund_declined"
	case p.failLater:
		rec.Status, rec.FailureCode = refpsp.RefundFailed, "refund_failed_later"
		rec.pendingUntil = now.Add(s.opts.RefundSettleDelay)
	}
	if p.hidden {
		rec.visibleAt = now.Add(p.delay)
	}
	s.refunds = append(s.refunds, rec)
	return refundPlan{plan: p.plan, refund: rec.wire(now)}, 0, ""
}

// refundFault is a charge's plan, and whether the refund fails later.
type refundFault struct {
	plan
	failLater bool
}

// refundPlanLocked chooses the fault of a refund by its charge's token.
func (s *Sim) refundPlanLocked(token string) refundFault {
	switch token {
	case "tok_refund_timeout", tokRefundLookupFails:
		return refundFault{plan: plan{fault: faultHold, delay: s.opts.ClientTimeout}}
	case "tok_refund_5xx":
		return refundFault{plan: plan{fault: faultError}}
	case "tok_refund_drop":
		return refundFault{plan: plan{fault: faultDrop}}
	case "tok_refund_decline":
		return refundFault{plan: plan{fault: faultDecline}}
	case "tok_refund_fail_later":
		return refundFault{failLater: true}
	case "tok_ok", "tok_random":
		if s.opts.Random.enabled() {
			if s.rng.Float64() < s.opts.Random.RefundFailLater {
				return refundFault{failLater: true}
			}
			return refundFault{plan: s.drawLocked()}
		}
	}
	return refundFault{}
}

// wire is the refund as the protocol answers it at time now: pending until
// its outcome is due.
func (r refundRecord) wire(now time.Time) refpsp.RefundObject {
	o := refpsp.RefundObject{ID: r.ID, Reference: r.Reference, ChargeReference: r.ChargeReference, Status: r.Status,
		Amount: r.Amount, Currency: r.Currency, FailureCode: r.FailureCode}
	if now.Before(r.pendingUntil) {
		o.Status, o.FailureCode = refpsp.RefundPending, ""
	}
	return o
}

func (s *Sim) handleRefundLookup(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("reference") {
		s.handleRefundList(w, r)
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		writeError(w, http.StatusBadRequest, "reference is required")
		return
	}
	now := time.Now()
	s.mu.Lock()
	var (
		found       refpsp.RefundObject
		ok, failing bool
	)
	for i := len(s.refunds) - 1; i >= 0; i-- {
		if rec := s.refunds[i]; rec.Reference == ref && !rec.visibleAt.After(now) {
			found, ok, failing = rec.wire(now), true, rec.lookupFails
			break
		}
	}
	s.mu.Unlock()
	if failing {
		writeError(w, http.StatusServiceUnavailable, "lookups of this refund fail (tok_refund_lookup_fails)")
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no refund with that reference")
		return
	}
	writeJSON(w, http.StatusOK, found)
}

func (s *Sim) handleRefundLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Refunds())
}

// writeRefund answers a refund request with rf: 402 if it failed at once,
// 201 otherwise (succeeded or pending).
func writeRefund(w http.ResponseWriter, rf refpsp.RefundObject) {
	code := http.StatusCreated
	if rf.Status == refpsp.RefundFailed {
		code = http.StatusPaymentRequired
	}
	writeJSON(w, code, rf)
}
