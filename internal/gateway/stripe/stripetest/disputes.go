package stripetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Disputes
//
// A test opens a dispute of a succeeded PaymentIntent with OpenDispute, as
// a cardholder's bank would, and moves it with SetDisputeStatus, as the
// network would; the adapter reads it and accepts it through the API:
//
//	GET  /v1/disputes/{id}        retrieve, as it stands now
//	POST /v1/disputes/{id}/close  accept: an open dispute is lost; a closed one
//	                              answers 400 (Stripe's "already been closed")
//
// A chargeback (needs_response) withdraws the disputed amount and a fee of
// DisputeFee at once, in one balance transaction; winning it reinstates
// both in a second. An inquiry (warning_*) moves no money; when it turns
// into a chargeback (SetDisputeStatus to needs_response) the withdrawal
// is made then. DisputeEvent is the body of the charge.dispute.* event
// Stripe would send about a dispute as it stands, for a test to sign.

// DisputeFee is the fee, in the dispute's currency's units, that the fake
// withdraws with a chargeback (Stripe's is 15.00 in most currencies).
const DisputeFee = 1500

// Dispute is one dispute in the fake's ledger.
type Dispute struct {
	ID            string
	PaymentIntent string
	Charge        string
	Amount        int64
	Currency      string
	Reason        string
	Status        string
	DueBy         time.Time
	Created       time.Time
	// Withdrawn and Reinstated are the balance transactions made: each
	// is 0 or the amount.
	Withdrawn, Reinstated int64
	// Closes counts the closes executed (replays not included).
	Closes int
}

// OpenDispute opens a dispute of reason ("fraudulent") against the
// succeeded PaymentIntent pi, for amount (its whole amount when 0): an
// inquiry when inquiry is set (warning_needs_response), a chargeback
// otherwise (needs_response, the amount withdrawn at once), due in a
// week.
func (s *Server) OpenDispute(pi string, amount int64, reason string, inquiry bool) (Dispute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byID[pi]
	if !ok || p.Status != "succeeded" {
		return Dispute{}, fmt.Errorf("stripetest: no succeeded PaymentIntent %q to dispute", pi)
	}
	if amount == 0 {
		amount = p.AmountReceived
		if amount == 0 {
			amount = p.Amount
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	d := &Dispute{
		ID: fmt.Sprintf("dp_fake_%06d", len(s.disputes)+1), PaymentIntent: pi, Charge: p.LatestCharge,
		Amount: amount, Currency: p.Currency, Reason: reason, Status: "needs_response",
		DueBy: now.Add(7 * 24 * time.Hour), Created: now,
	}
	if inquiry {
		d.Status = "warning_needs_response"
	} else {
		d.Withdrawn = amount
	}
	s.disputes = append(s.disputes, d)
	return *d, nil
}

// SetDisputeStatus moves the dispute to status, as the network would:
// reaching needs_response from an inquiry withdraws the amount; won
// reinstates what was withdrawn. It refuses a status Stripe does not
// have only when unchecked is false, so that a test can make the fake
// answer with one Settle does not know.
func (s *Server) SetDisputeStatus(id, status string, unchecked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.disputeLocked(id)
	if d == nil {
		return fmt.Errorf("stripetest: no dispute %q", id)
	}
	switch status {
	case "warning_needs_response", "warning_under_review", "warning_closed", "under_review", "lost":
	case "needs_response":
		d.Withdrawn = d.Amount
	case "won":
		d.Reinstated = d.Withdrawn
	default:
		if !unchecked {
			return fmt.Errorf("stripetest: %q is not a Stripe dispute status", status)
		}
	}
	d.Status = status
	return nil
}

// Disputes returns every dispute opened so far, in order, as each stands.
func (s *Server) Disputes() []Dispute {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Dispute, len(s.disputes))
	for i, d := range s.disputes {
		out[i] = *d
	}
	return out
}

// DisputeEvent is the body of a Stripe event of type typ
// ("charge.dispute.created") with id eventID about the dispute id as it
// stands now.
func (s *Server) DisputeEvent(eventID, typ, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.disputeLocked(id)
	if d == nil {
		return nil, fmt.Errorf("stripetest: no dispute %q", id)
	}
	return json.Marshal(map[string]any{
		"id": eventID, "object": "event", "type": typ, "api_version": "2023-10-16", "created": time.Now().Unix(),
		"data": map[string]any{"object": disputeJSON(d)},
	})
}

func (s *Server) disputeLocked(id string) *Dispute {
	for _, d := range s.disputes {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// disputeJSON is a dispute as Stripe's API shows it.
func disputeJSON(d *Dispute) map[string]any {
	bts := []map[string]any{}
	bt := func(n int, amount, fee int64) map[string]any {
		return map[string]any{
			"id": fmt.Sprintf("txn_%s_%d", d.ID, n), "object": "balance_transaction", "amount": amount,
			"currency": d.Currency, "fee": fee, "net": amount - fee, "type": "adjustment",
			"reporting_category": map[bool]string{true: "dispute", false: "dispute_reversal"}[amount < 0],
		}
	}
	if d.Withdrawn > 0 {
		bts = append(bts, bt(1, -d.Withdrawn, DisputeFee))
	}
	if d.Reinstated > 0 {
		bts = append(bts, bt(2, d.Reinstated, -DisputeFee))
	}
	var due any
	if !d.DueBy.IsZero() {
		due = d.DueBy.Unix()
	}
	return map[string]any{
		"id": d.ID, "object": "dispute", "amount": d.Amount, "currency": d.Currency, "status": d.Status,
		"reason": d.Reason, "charge": d.Charge, "payment_intent": d.PaymentIntent, "created": d.Created.Unix(),
		"balance_transactions": bts, "network_reason_code": "10.4", "is_charge_refundable": false,
		"livemode": false, "metadata": map[string]string{},
		"evidence_details": map[string]any{"due_by": due, "has_evidence": false, "past_due": false, "submission_count": 0},
	}
}

func (s *Server) retrieveDispute(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	d := s.disputeLocked(r.PathValue("id"))
	var body []byte
	if d != nil {
		body, _ = json.Marshal(disputeJSON(d))
	}
	s.mu.Unlock()
	if d == nil {
		writeError(w, http.StatusNotFound, noSuchDispute(r.PathValue("id")))
		return
	}
	writeBody(w, http.StatusOK, body)
}

// closeDispute accepts an open dispute: it is lost.
func (s *Server) closeDispute(r *http.Request, _ url.Values) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.disputeLocked(r.PathValue("id"))
	switch {
	case d == nil:
		return answer{status: http.StatusNotFound, body: errorBody(noSuchDispute(r.PathValue("id")))}
	case d.Status != "warning_needs_response" && d.Status != "needs_response" &&
		d.Status != "warning_under_review" && d.Status != "under_review":
		return rejected(apiError{Type: "invalid_request_error",
			Message: "This dispute is already closed. You can't close a dispute that has already been closed."})
	}
	d.Status = "lost"
	d.Closes++
	body, _ := json.Marshal(disputeJSON(d))
	return answer{status: http.StatusOK, body: body, save: true}
}

func noSuchDispute(id string) apiError {
	return apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "dispute",
		Message: "No such dispute: '" + id + "'"}
}
