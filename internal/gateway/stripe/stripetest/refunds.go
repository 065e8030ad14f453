package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Refunds
//
// POST /v1/refunds refunds a succeeded PaymentIntent (payment_intent, and
// amount, by default what is left), under an idempotency key with the
// semantics of the PaymentIntents' keys. Like Stripe, the fake refuses a
// refund of more than is left (400 amount_too_large). GET /v1/refunds
// lists a PaymentIntent's refunds, newest first. What a refund does is
// chosen by the payment method of the PaymentIntent it refunds:
//
//	pm_card_settle_refund_timeout  refunded, then the answer is held for Options.Hold
//	pm_card_refundFail             answered "pending"; the refund fails (failure_reason
//	                               "declined") after Options.Hold, as Stripe's test card
//	                               4000000000005126 fails a refund some time later
//	anything else                  succeeded

// The payment methods that choose what a refund does; their charges
// succeed.
const (
	TokenRefundTimeout = "pm_card_settle_refund_timeout"
	TokenRefundFail    = "pm_card_refundFail"
)

// Refund is one refund in the fake's ledger.
type Refund struct {
	ID             string
	IdempotencyKey string
	PaymentIntent  string
	Amount         int64
	Currency       string
	Metadata       map[string]string
	// Status is "succeeded" or "failed", as the refund ends; failAt is
	// when a refund that fails later stops being pending.
	Status  string
	Created time.Time
	failAt  time.Time
}

// Refunds returns every refund made so far, in order.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refund(nil), s.refunds...)
}

func (s *Server) createRefund(w http.ResponseWriter, r *http.Request) {
	if key, ok := s.authorized(r); !ok {
		writeError(w, http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid API Key provided: %s", key)})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "Invalid request body."})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	params := r.PostForm.Encode()
	s.mu.Lock()
	if k, ok := s.refundKeys[key]; ok && key != "" {
		s.mu.Unlock()
		select {
		case <-k.done:
		default:
			writeError(w, http.StatusConflict, apiError{Type: "invalid_request_error", Code: "idempotency_key_in_use",
				Message: "There is currently another in-progress request using this idempotency key."})
			return
		}
		if k.request != params {
			writeError(w, http.StatusBadRequest, apiError{Type: "idempotency_error",
				Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."})
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeBody(w, k.status, k.body)
		return
	}
	k := &keyState{request: params, done: make(chan struct{})}
	if key != "" {
		s.refundKeys[key] = k
	}
	a, hold := s.executeRefund(r.PostForm, key)
	if hold {
		s.mu.Unlock()
		time.Sleep(s.opts.Hold)
		s.mu.Lock()
	}
	if a.save {
		k.status, k.body = a.status, a.body
	} else {
		delete(s.refundKeys, key)
	}
	close(k.done)
	s.mu.Unlock()
	writeBody(w, a.status, a.body)
}

// executeRefund validates a refund request and carries it out; s.mu is
// held. hold says that the answer is to be held.
func (s *Server) executeRefund(form map[string][]string, key string) (answer, bool) {
	get := func(name string) string {
		if v := form[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var pi *PaymentIntent
	for _, p := range s.ledger {
		if p.ID == get("payment_intent") {
			pi = p
		}
	}
	if pi == nil {
		return rejected(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "payment_intent",
			Message: "No such payment_intent: '" + get("payment_intent") + "'"}), false
	}
	if pi.Status != "succeeded" {
		return rejected(apiError{Type: "invalid_request_error", Code: "charge_not_refundable",
			Message: "This PaymentIntent has no succeeded charge to refund."}), false
	}
	left := pi.Amount
	for _, rf := range s.refunds {
		if rf.PaymentIntent == pi.ID && rf.Status == "succeeded" {
			left -= rf.Amount
		}
	}
	amount := left
	if v := get("amount"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount",
				Message: "Invalid positive integer"}), false
		}
		amount = n
	}
	if amount <= 0 || amount > left {
		return rejected(apiError{Type: "invalid_request_error", Code: "amount_too_large", Param: "amount",
			Message: "Refund amount is greater than the unrefunded amount on the charge."}), false
	}
	rf := Refund{
		ID: fmt.Sprintf("re_fake_%06d", len(s.refunds)+1), IdempotencyKey: key, PaymentIntent: pi.ID,
		Amount: amount, Currency: pi.Currency, Metadata: map[string]string{}, Status: "succeeded",
		Created: s.opts.Clock().UTC(),
	}
	for name, v := range form {
		if k, ok := strings.CutPrefix(name, "metadata["); ok && strings.HasSuffix(k, "]") && len(v) > 0 {
			rf.Metadata[strings.TrimSuffix(k, "]")] = v[0]
		}
	}
	if pi.PaymentMethod == TokenRefundFail {
		rf.Status, rf.failAt = "failed", rf.Created.Add(s.opts.Hold)
	}
	s.refunds = append(s.refunds, rf)
	body, _ := json.Marshal(refundJSON(rf, time.Now()))
	return answer{status: http.StatusOK, body: body, save: true}, pi.PaymentMethod == TokenRefundTimeout
}

// refundJSON is a refund as Stripe's API shows it at time now.
func refundJSON(rf Refund, now time.Time) map[string]any {
	m := map[string]any{
		"id": rf.ID, "object": "refund", "amount": rf.Amount, "currency": rf.Currency, "status": rf.Status,
		"payment_intent": rf.PaymentIntent, "metadata": rf.Metadata, "created": rf.Created.Unix(),
		"failure_reason": nil,
	}
	switch {
	case now.Before(rf.failAt):
		m["status"] = "pending"
	case rf.Status == "failed":
		m["failure_reason"] = "declined"
	}
	return m
}

func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	if key, ok := s.authorized(r); !ok {
		writeError(w, http.StatusUnauthorized, apiError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid API Key provided: %s", key)})
		return
	}
	q := r.URL.Query()
	window, err := parseList(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, *err)
		return
	}
	pi, expand := q.Get("payment_intent"), expands(q, "data.payment_intent")
	now := time.Now()
	var (
		data []map[string]any
		ids  []string
	)
	s.mu.Lock()
	for i := len(s.refunds) - 1; i >= 0; i-- {
		rf := s.refunds[i]
		if (pi != "" && rf.PaymentIntent != pi) || !window.holds(rf.Created) {
			continue
		}
		m := refundJSON(rf, now)
		if p, ok := s.byID[rf.PaymentIntent]; ok && expand {
			m["payment_intent"] = intentMap(*p, false)
		}
		data, ids = append(data, m), append(ids, rf.ID)
	}
	s.mu.Unlock()
	s.writeList(w, "/v1/refunds", window, data, ids)
}
