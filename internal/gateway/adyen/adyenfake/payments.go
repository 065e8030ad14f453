package adyenfake

import (
	"crypto/rand"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The statuses of a Payment in the ledger.
const (
	// StatusReceived: accepted, its outcome not decided yet (tok_received).
	StatusReceived = "received"
	// StatusRedirectShopper: waiting for the shopper's 3-D Secure page.
	StatusRedirectShopper = "redirect_shopper"
	StatusAuthorised      = "authorised"
	StatusRefused         = "refused"
	StatusError           = "error"
	// StatusCancelled: released by a cancel or a technical cancel.
	StatusCancelled = "cancelled"
	// StatusCaptured: something of it was captured (AmountCaptured says
	// how much).
	StatusCaptured = "captured"
	// StatusExpired: the authorisation lapsed with nothing captured.
	StatusExpired = "expired"
)

// Payment is one payment the fake received, as its ledger lists it.
type Payment struct {
	PSPReference     string
	Reference        string // the merchant's reference
	MerchantAccount  string
	Token            string // the payment method token
	ShopperReference string
	Amount           int64 // minor units
	Currency         string
	// ManualCapture says additionalData.manualCapture was "true"; without
	// it an authorised payment is captured in full at once.
	ManualCapture bool
	Status        string
	RefusalReason string
	// AmountAuthorised is the amount held once authorised; AmountCaptured
	// what succeeded captures took of it; AmountRefunded what succeeded
	// refunds gave back.
	AmountAuthorised, AmountCaptured, AmountRefunded int64
	Created                                          time.Time
	AuthorisedAt                                     time.Time // zero if it never was
	CaptureBefore                                    time.Time // when the authorisation lapses
	// The modifications asked about it, oldest first.
	Captures, Cancels, Refunds, TechnicalCancels []Modification
}

// The kinds of a Modification.
const (
	KindCapture         = "capture"
	KindCancel          = "cancel"
	KindRefund          = "refund"
	KindTechnicalCancel = "technical_cancel"
)

// The statuses of a Modification: decided when it is received, told
// later by notification.
const (
	ModSucceeded = "succeeded"
	ModFailed    = "failed"
)

// Modification is one capture, cancel, refund or technical cancel.
type Modification struct {
	Kind         string
	PSPReference string // the modification's own
	Reference    string // the merchant's reference for it
	// PaymentPSPReference and PaymentReference name the payment; for a
	// technical cancel that found none, PaymentPSPReference is empty.
	PaymentPSPReference, PaymentReference string
	Amount                                int64
	Currency                              string
	Status                                string // ModSucceeded or ModFailed
	Reason                                string // why it failed
	Created                               time.Time
}

// payment is a ledger entry: the Payment and what the fake keeps beside.
type payment struct {
	Payment
	returnURL string
	// challenge names its 3-D Secure page; redirectResult is what the
	// page hands back to returnUrl once the shopper has acted.
	challenge, redirectResult string
	lifetime                  time.Duration
	silent                    bool // tok_silent: no notification about it
	random                    bool // tok_ok, tok_random: under RandomFaults
}

// Ledger returns every payment received so far, oldest first, as each
// now stands.
func (s *Server) Ledger() []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]Payment, len(s.payments))
	for i, p := range s.payments {
		s.lapseLocked(p, now)
		out[i] = p.Payment
		out[i].Captures = slices.Clone(p.Captures)
		out[i].Cancels = slices.Clone(p.Cancels)
		out[i].Refunds = slices.Clone(p.Refunds)
		out[i].TechnicalCancels = slices.Clone(p.TechnicalCancels)
	}
	return out
}

// TechnicalCancels returns every technical cancel received, oldest first,
// including those that found no payment.
func (s *Server) TechnicalCancels() []Modification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.techCancels)
}

// lapseLocked lets an authorisation lapse once its CaptureBefore has
// come, and tells it as Adyen does: EXPIRE ("the remaining uncaptured
// amount expired"), about the payment by its pspReference and the
// merchant's reference, for the amount that was held.
func (s *Server) lapseLocked(p *payment, now time.Time) {
	if p.Status != StatusAuthorised || now.Before(p.CaptureBefore) {
		return
	}
	p.Status = StatusExpired
	if p.silent {
		return
	}
	s.notifyLocked(item{
		PSPReference: p.PSPReference, MerchantReference: p.Reference, EventCode: "EXPIRE",
		Amount: amount{p.Currency, p.AmountAuthorised - p.AmountCaptured}, Success: true,
	}, now, 0)
}

// authoriseLocked authorises p from now (payment.authorise) and, for a
// hold, lets it lapse when its CaptureBefore comes, whether or not
// anything asks about it then, so that its EXPIRE is sent on time.
func (s *Server) authoriseLocked(p *payment, now time.Time) {
	p.authorise(now)
	if p.Status != StatusAuthorised {
		return
	}
	time.AfterFunc(p.CaptureBefore.Sub(now), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-s.stopping:
		default:
			s.lapseLocked(p, time.Now().UTC())
		}
	})
}

// authorise makes p authorised from now: held, or captured in full
// without manual capture.
func (p *payment) authorise(now time.Time) {
	p.Status, p.AuthorisedAt, p.AmountAuthorised = StatusAuthorised, now, p.Amount
	p.CaptureBefore = now.Add(p.lifetime)
	if !p.ManualCapture {
		p.Status, p.AmountCaptured = StatusCaptured, p.Amount
	}
}

type amount struct {
	Currency string `json:"currency"`
	Value    int64  `json:"value"`
}

type paymentRequest struct {
	Amount           amount `json:"amount"`
	Reference        string `json:"reference"`
	ReturnURL        string `json:"returnUrl"`
	ShopperReference string `json:"shopperReference"`
	PaymentMethod    struct {
		Type                  string `json:"type"`
		StoredPaymentMethodID string `json:"storedPaymentMethodId"`
		EncryptedCardNumber   string `json:"encryptedCardNumber"`
	} `json:"paymentMethod"`
	AdditionalData map[string]any `json:"additionalData"`
}

// paymentResponse is a PaymentResponse and PaymentDetailsResponse.
type paymentResponse struct {
	PSPReference      string          `json:"pspReference,omitempty"`
	ResultCode        string          `json:"resultCode"`
	MerchantReference string          `json:"merchantReference,omitempty"`
	Amount            *amount         `json:"amount,omitempty"`
	RefusalReason     string          `json:"refusalReason,omitempty"`
	RefusalReasonCode string          `json:"refusalReasonCode,omitempty"`
	Action            *redirectAction `json:"action,omitempty"`
}

type redirectAction struct {
	Type              string `json:"type"`
	Method            string `json:"method"`
	URL               string `json:"url"`
	PaymentMethodType string `json:"paymentMethodType"`
}

// refusals maps the ledger's refusals to Adyen's refusalReason and
// refusalReasonCode.
var refusals = map[string]string{
	"Refused":              "2",
	"Acquirer Error":       "4",
	"Invalid Card Number":  "8",
	"3D Not Authenticated": "11",
}

func (s *Server) handlePayment(req request) answer {
	var in paymentRequest
	decode(req.body, &in)
	token := in.PaymentMethod.StoredPaymentMethodID
	if token != "" && in.ShopperReference == "" {
		// A stored payment method belongs to a shopper: Adyen needs to
		// know whose.
		return failure(http.StatusUnprocessableEntity, "702", "validation",
			"shopperReference: required with paymentMethod.storedPaymentMethodId; nothing was processed")
	}
	if token == "" {
		token, _ = strings.CutPrefix(in.PaymentMethod.EncryptedCardNumber, "test_")
	}
	if token == "" {
		return failure(http.StatusUnprocessableEntity, "702", "validation",
			"paymentMethod: give storedPaymentMethodId (a tok_ token) or encryptedCardNumber \"test_<token>\"; nothing was processed")
	}
	lifetime := s.cfg.AuthorizationLifetime
	if ms, ok := strings.CutPrefix(token, "tok_lapse_"); ok {
		n, err := strconv.ParseUint(ms, 10, 31)
		if err != nil {
			return failure(http.StatusUnprocessableEntity, "702", "validation", "paymentMethod: tok_lapse_<ms> needs a number of milliseconds; nothing was processed")
		}
		lifetime = time.Duration(n) * time.Millisecond
	}
	var slow time.Duration
	if ms, ok := strings.CutPrefix(token, "tok_slow_"); ok {
		n, err := strconv.ParseUint(ms, 10, 31)
		if err != nil {
			return failure(http.StatusUnprocessableEntity, "702", "validation", "paymentMethod: tok_slow_<ms> needs a number of milliseconds; nothing was processed")
		}
		slow = time.Duration(n) * time.Millisecond
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	p := &payment{
		Payment: Payment{
			Reference:        in.Reference,
			MerchantAccount:  s.cfg.MerchantAccount,
			Token:            token,
			ShopperReference: in.ShopperReference,
			Amount:           in.Amount.Value,
			Currency:         in.Amount.Currency,
			ManualCapture:    fmt.Sprint(in.AdditionalData["manualCapture"]) == "true",
			Created:          time.Now().UTC(),
		},
		returnURL: in.ReturnURL,
		lifetime:  lifetime,
		silent:    token == "tok_silent",
		random:    token == "tok_ok" || token == "tok_random",
	}
	var f fault
	var delay time.Duration
	outcome := StatusAuthorised
	switch {
	case token == "tok_decline":
		outcome, p.RefusalReason = StatusRefused, "Refused"
	case token == "tok_error":
		outcome, p.RefusalReason = StatusError, "Acquirer Error"
	case token == "tok_3ds":
		outcome = StatusRedirectShopper
	case token == "tok_received":
		outcome = StatusReceived
	case token == "tok_timeout":
		f = faultTimeout
	case token == "tok_5xx_after":
		f = faultFiveXXAfter
	case token == "tok_drop":
		f = faultDrop
	case token == "tok_5xx":
		return answer{fault: faultFiveXXBefore}
	case slow > 0:
		f, delay = faultSlow, slow
	case p.random:
		var refuse bool
		f, delay, refuse = s.drawLocked(true)
		if f == faultFiveXXBefore {
			return answer{fault: f}
		}
		if refuse {
			outcome, p.RefusalReason = StatusRefused, "Refused"
		}
	case strings.HasPrefix(token, "tok_lapse_"), token == "tok_capture_fail", token == "tok_refund_fail", token == "tok_silent":
	default:
		outcome, p.RefusalReason = StatusRefused, "Invalid Card Number"
	}

	p.PSPReference = s.pspLocked()
	s.payments = append(s.payments, p)
	s.byPSP[p.PSPReference] = p
	now := time.Now().UTC()
	out := paymentResponse{PSPReference: p.PSPReference, MerchantReference: p.Reference}
	switch outcome {
	case StatusAuthorised:
		s.authoriseLocked(p, now)
		out.ResultCode, out.Amount = "Authorised", &amount{p.Currency, p.Amount}
		s.notifyPaymentLocked(p, now, 0)
	case StatusRefused, StatusError:
		p.Status = outcome
		out.ResultCode, out.RefusalReason, out.RefusalReasonCode = "Refused", p.RefusalReason, refusals[p.RefusalReason]
		if outcome == StatusError {
			out.ResultCode = "Error"
		}
		s.notifyPaymentLocked(p, now, 0)
	case StatusReceived:
		// The outcome comes later, and only by notification: it is
		// authorised once the notification is due.
		p.Status = StatusReceived
		out.ResultCode = "Received"
		s.receiveLaterLocked(p)
	case StatusRedirectShopper:
		p.Status = StatusRedirectShopper
		p.challenge = strings.ToLower(rand.Text())
		out.ResultCode = "RedirectShopper"
		out.Action = &redirectAction{Type: "redirect", Method: http.MethodGet, URL: req.base + "/challenge/" + p.challenge, PaymentMethodType: "scheme"}
	}
	return answer{code: http.StatusOK, body: out, fault: f, delay: delay}
}

// receiveLaterLocked decides a tok_received payment shortly after it was
// received: it is authorised, and told by notification.
func (s *Server) receiveLaterLocked(p *payment) {
	s.senders.Add(1)
	go func() {
		defer s.senders.Done()
		select {
		case <-s.stopping:
			return
		case <-time.After(50 * time.Millisecond):
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.Status == StatusReceived {
			now := time.Now().UTC()
			s.authoriseLocked(p, now)
			s.notifyPaymentLocked(p, now, 0)
		}
	}()
}

// drawLocked draws a random fault for a request about a tok_ok or
// tok_random payment; refuse is drawn only for a payment.
func (s *Server) drawLocked(payment bool) (f fault, delay time.Duration, refuse bool) {
	rf := s.cfg.Random
	if rf.Refuse <= 0 && rf.TimeoutAfter <= 0 && rf.FiveXXBefore <= 0 && rf.FiveXXAfter <= 0 && rf.DropAfter <= 0 && rf.Slow <= 0 {
		return faultNone, 0, false
	}
	u := s.rng.Float64()
	for _, c := range []struct {
		rate  float64
		fault fault
	}{
		{rf.Refuse, faultNone},
		{rf.TimeoutAfter, faultTimeout},
		{rf.FiveXXBefore, faultFiveXXBefore},
		{rf.FiveXXAfter, faultFiveXXAfter},
		{rf.DropAfter, faultDrop},
		{rf.Slow, faultSlow},
	} {
		if u < c.rate {
			switch c.fault {
			case faultNone:
				return faultNone, 0, payment
			case faultSlow:
				return faultSlow, time.Duration(s.rng.Int64N(int64(rf.SlowMax) + 1)), false
			default: // the others need no more draws
				return c.fault, 0, false
			}
		}
		u -= max(c.rate, 0)
	}
	return faultNone, 0, false
}

// notifyPaymentLocked tells p's outcome: AUTHORISATION.
func (s *Server) notifyPaymentLocked(p *payment, now time.Time, extra time.Duration) {
	if p.silent {
		return
	}
	it := item{
		PSPReference:      p.PSPReference,
		MerchantReference: p.Reference,
		EventCode:         "AUTHORISATION",
		Amount:            amount{p.Currency, p.Amount},
		Success:           p.Status == StatusAuthorised || p.Status == StatusCaptured,
		PaymentMethod:     "visa",
	}
	if it.Success {
		it.Reason = "012345:1111:03/2030"
	} else {
		it.Reason = p.RefusalReason
	}
	s.notifyLocked(it, now, extra)
}

type detailsRequest struct {
	Details struct {
		RedirectResult string `json:"redirectResult"`
	} `json:"details"`
}

func (s *Server) handleDetails(req request) answer {
	var in detailsRequest
	decode(req.body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.redirects[in.Details.RedirectResult]
	if in.Details.RedirectResult == "" || !ok {
		return failure(http.StatusUnprocessableEntity, "702", "validation", "details.redirectResult: not a redirectResult this fake gave; nothing was processed")
	}
	out := paymentResponse{PSPReference: p.PSPReference, MerchantReference: p.Reference, Amount: &amount{p.Currency, p.Amount}}
	if p.AuthorisedAt.IsZero() {
		out.ResultCode, out.RefusalReason, out.RefusalReasonCode = "Refused", p.RefusalReason, refusals[p.RefusalReason]
	} else {
		out.ResultCode = "Authorised"
	}
	return answer{code: http.StatusOK, body: out}
}

// handleChallenge is the 3-D Secure page of a tok_3ds payment, which the
// shopper opens without any key (its id is random). Without ?result it
// shows two links; ?result=authorised or ?result=refused ends the
// payment, sends its AUTHORISATION notification, and redirects to the
// payment's returnUrl with a redirectResult for /payments/details.
func (s *Server) handleChallenge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	var p *payment
	for _, q := range s.payments {
		if q.challenge != "" && q.challenge == id {
			p = q
		}
	}
	if p == nil {
		s.mu.Unlock()
		http.Error(w, "no such 3-D Secure challenge", http.StatusNotFound)
		return
	}
	result := r.URL.Query().Get("result")
	if result == "" {
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>3-D Secure</title><p>Payment %s of %d %s.</p>
<p><a href="?result=authorised">Authenticate</a> or <a href="?result=refused">fail</a>.</p>`,
			html.EscapeString(p.Reference), p.Amount, html.EscapeString(p.Currency))
		return
	}
	if p.Status == StatusRedirectShopper {
		now := time.Now().UTC()
		if result == "authorised" {
			s.authoriseLocked(p, now)
		} else {
			p.Status, p.RefusalReason = StatusRefused, "3D Not Authenticated"
		}
		p.redirectResult = strings.ToLower(rand.Text())
		s.redirects[p.redirectResult] = p
		s.notifyPaymentLocked(p, now, 0)
	}
	rr, back := p.redirectResult, p.returnURL
	s.mu.Unlock()
	if rr == "" {
		http.Error(w, "this payment is no longer waiting for the shopper", http.StatusConflict)
		return
	}
	u, err := url.Parse(back)
	if err != nil {
		http.Error(w, "the payment's returnUrl is not a URL", http.StatusBadRequest)
		return
	}
	q := u.Query()
	q.Set("redirectResult", rr)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}
