package adyenfake

import (
	"net/http"
	"time"
)

// The reasons in the ledger of a tok_capture_fail capture and a
// tok_refund_fail refund: Adyen reported each done, then failed it.
const (
	ReasonCaptureFailed = "Capture failed"
	ReasonRefundFailed  = "Refund failed"
)

// failedLaterDelay is how long after the CAPTURE (or REFUND) notification of a
// tok_capture_fail (tok_refund_fail) payment its CAPTURE_FAILED
// (REFUND_FAILED) is due.
const failedLaterDelay = 200 * time.Millisecond

type modRequest struct {
	Amount           *amount `json:"amount"`
	Reference        string  `json:"reference"`
	PaymentReference string  `json:"paymentReference"`
}

// modResponse is PaymentCaptureResponse, PaymentCancelResponse,
// PaymentRefundResponse and StandalonePaymentCancelResponse.
type modResponse struct {
	Amount              *amount `json:"amount,omitempty"`
	MerchantAccount     string  `json:"merchantAccount"`
	PaymentPSPReference string  `json:"paymentPspReference,omitempty"`
	PaymentReference    string  `json:"paymentReference,omitempty"`
	PSPReference        string  `json:"pspReference"`
	Reference           string  `json:"reference,omitempty"`
	Status              string  `json:"status"`
}

// modification is what every modification of one payment shares: the
// payment found by the path's pspReference, the request, and the random
// fault drawn for it.
type modification struct {
	p     *payment
	in    modRequest
	now   time.Time
	fault fault
	delay time.Duration
}

// beginLocked finds the payment and draws the fault; ok false means the
// answer a is final.
func (s *Server) beginLocked(req request) (m modification, a answer, ok bool) {
	decode(req.body, &m.in)
	m.p = s.byPSP[req.r.PathValue("psp")]
	if m.p == nil {
		return m, failure(http.StatusUnprocessableEntity, "167", "validation", "Original pspReference is invalid for this environment!"), false
	}
	if m.p.random {
		m.fault, m.delay, _ = s.drawLocked(false)
		if m.fault == faultFiveXXBefore {
			return m, answer{fault: faultFiveXXBefore}, false
		}
	}
	m.now = time.Now().UTC()
	s.lapseLocked(m.p, m.now)
	return m, answer{}, true
}

// received is the 201 answer to a modification.
func (m modification) received(mod Modification, withAmount bool) answer {
	out := modResponse{
		MerchantAccount: m.p.MerchantAccount, PaymentPSPReference: m.p.PSPReference,
		PSPReference: mod.PSPReference, Reference: m.in.Reference, Status: "received",
	}
	if withAmount {
		out.Amount = &amount{mod.Currency, mod.Amount}
	}
	return answer{code: http.StatusCreated, body: out, fault: m.fault, delay: m.delay}
}

// newMod starts the ledger entry of a modification of m's payment.
func (s *Server) newModLocked(m modification, kind string) Modification {
	mod := Modification{
		Kind: kind, PSPReference: s.pspLocked(), Reference: m.in.Reference,
		PaymentPSPReference: m.p.PSPReference, PaymentReference: m.p.Reference,
		Amount: m.p.Amount, Currency: m.p.Currency, Status: ModSucceeded, Created: m.now,
	}
	if m.in.Amount != nil {
		mod.Amount, mod.Currency = m.in.Amount.Value, m.in.Amount.Currency
	}
	return mod
}

// notModifiable is why p (lapsed as of now) cannot be captured or
// cancelled, or "".
func notModifiable(p *payment) string {
	switch p.Status {
	case StatusAuthorised, StatusCaptured:
		return ""
	case StatusExpired:
		return "Authorisation expired"
	case StatusCancelled:
		return "Payment cancelled"
	}
	return "Payment not authorised"
}

// notifyModLocked tells a modification's outcome.
func (s *Server) notifyModLocked(p *payment, mod Modification, eventCode string, success bool, extra time.Duration) {
	if p.silent {
		return
	}
	ref := mod.Reference
	if ref == "" {
		ref = p.Reference
	}
	it := item{
		PSPReference: mod.PSPReference, OriginalReference: p.PSPReference, MerchantReference: ref,
		EventCode: eventCode, Amount: amount{mod.Currency, mod.Amount}, Success: success, PaymentMethod: "visa",
	}
	if !success {
		it.Reason = mod.Reason
	}
	s.notifyLocked(it, mod.Created, extra)
}

func (s *Server) handleCapture(req request) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, ok := s.beginLocked(req)
	if !ok {
		return a
	}
	p := m.p
	mod := s.newModLocked(m, KindCapture)
	failedLater := false
	switch {
	case notModifiable(p) != "":
		mod.Status, mod.Reason = ModFailed, notModifiable(p)
	case mod.Currency != p.Currency:
		mod.Status, mod.Reason = ModFailed, "Currency mismatch"
	case p.AmountCaptured+mod.Amount > p.AmountAuthorised:
		mod.Status, mod.Reason = ModFailed, "Insufficient balance on payment"
	case p.Token == "tok_capture_fail":
		// Adyen accepts it (CAPTURE success), then the scheme fails it.
		mod.Status, mod.Reason, failedLater = ModFailed, ReasonCaptureFailed, true
	default:
		p.AmountCaptured += mod.Amount
		p.Status = StatusCaptured
	}
	p.Captures = append(p.Captures, mod)
	s.notifyModLocked(p, mod, "CAPTURE", mod.Status == ModSucceeded || failedLater, 0)
	if failedLater {
		s.notifyModLocked(p, mod, "CAPTURE_FAILED", true, failedLaterDelay)
	}
	return m.received(mod, true)
}

func (s *Server) handleCancel(req request) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, ok := s.beginLocked(req)
	if !ok {
		return a
	}
	p := m.p
	mod := s.newModLocked(m, KindCancel)
	switch {
	case p.Status == StatusReceived || p.Status == StatusRedirectShopper:
		p.Status = StatusCancelled
	case notModifiable(p) != "":
		mod.Status, mod.Reason = ModFailed, notModifiable(p)
	case p.AmountCaptured > 0:
		mod.Status, mod.Reason = ModFailed, "Payment already captured"
	default:
		p.Status = StatusCancelled
	}
	p.Cancels = append(p.Cancels, mod)
	s.notifyModLocked(p, mod, "CANCELLATION", mod.Status == ModSucceeded, 0)
	return m.received(mod, false)
}

func (s *Server) handleRefund(req request) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, a, ok := s.beginLocked(req)
	if !ok {
		return a
	}
	p := m.p
	mod := s.newModLocked(m, KindRefund)
	failedLater := false
	switch {
	case mod.Currency != p.Currency:
		mod.Status, mod.Reason = ModFailed, "Currency mismatch"
	case p.AmountRefunded+mod.Amount > p.AmountCaptured:
		mod.Status, mod.Reason = ModFailed, "Insufficient balance on payment"
	case p.Token == "tok_refund_fail":
		mod.Status, mod.Reason, failedLater = ModFailed, ReasonRefundFailed, true
	default:
		p.AmountRefunded += mod.Amount
	}
	p.Refunds = append(p.Refunds, mod)
	s.notifyModLocked(p, mod, "REFUND", mod.Status == ModSucceeded || failedLater, 0)
	if failedLater {
		s.notifyModLocked(p, mod, "REFUND_FAILED", true, failedLaterDelay)
	}
	return m.received(mod, true)
}

// handleTechnicalCancel cancels, by the merchant's reference, every
// payment with that reference that holds money and is not captured.
func (s *Server) handleTechnicalCancel(req request) answer {
	var in modRequest
	decode(req.body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	var latest *payment
	var found []*payment
	for _, p := range s.payments {
		if p.Reference == in.PaymentReference {
			found = append(found, p)
			latest = p
		}
	}
	var f fault
	var delay time.Duration
	if latest == nil || latest.random {
		f, delay, _ = s.drawLocked(false)
		if f == faultFiveXXBefore {
			return answer{fault: f}
		}
	}
	mod := Modification{
		Kind: KindTechnicalCancel, PSPReference: s.pspLocked(), Reference: in.Reference,
		PaymentReference: in.PaymentReference, Status: ModSucceeded, Created: now,
		Currency: "EUR", // Adyen's notification needs an amount, even with no payment
	}
	for _, p := range found {
		s.lapseLocked(p, now)
		switch p.Status {
		case StatusCaptured:
			mod.Status, mod.Reason = ModFailed, "Payment already captured"
		case StatusAuthorised, StatusReceived, StatusRedirectShopper:
			p.Status = StatusCancelled
		}
	}
	silent := false
	if latest != nil {
		mod.PaymentPSPReference, mod.Amount, mod.Currency = latest.PSPReference, latest.Amount, latest.Currency
		silent = latest.silent
	}
	for _, p := range found {
		p.TechnicalCancels = append(p.TechnicalCancels, mod)
	}
	s.techCancels = append(s.techCancels, mod)
	if !silent {
		it := item{
			PSPReference: mod.PSPReference, OriginalReference: mod.PaymentPSPReference,
			// The notification names the payment by the merchant's
			// reference for it, the one the cancel was asked by.
			MerchantReference: in.PaymentReference,
			EventCode:         "TECHNICAL_CANCEL", Amount: amount{mod.Currency, mod.Amount},
			Success: mod.Status == ModSucceeded, Reason: mod.Reason,
		}
		s.notifyLocked(it, now, 0)
	}
	out := modResponse{
		MerchantAccount: s.cfg.MerchantAccount, PaymentReference: in.PaymentReference,
		PSPReference: mod.PSPReference, Reference: in.Reference, Status: "received",
	}
	return answer{code: http.StatusCreated, body: out, fault: f, delay: delay}
}
