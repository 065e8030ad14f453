package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Disputes
//
// The simulator opens a dispute of a succeeded charge (or of what was
// captured of an authorization) when a test, the chaos harness or an
// operator asks, as a cardholder's bank would; the merchant may answer it
// with evidence or accept it, and the network decides it:
//
//	Go                                      HTTP (API key required)
//	Sim.OpenDispute(chargeID, amount, why)  POST /v1/sim/disputes {"charge_id", "amount", "reason"}
//	Sim.RespondDispute(id)                  POST /v1/sim/disputes/{id}/respond
//	Sim.ResolveDispute(id, won)             POST /v1/sim/disputes/{id}/resolve {"won": bool}
//	                                        GET  /v1/disputes/{id}         (the protocol's read)
//	                                        POST /v1/disputes/{id}/accept  (the protocol's accept)
//	Sim.Disputes()                          GET  /v1/dispute-ledger        (no key, like the ledgers)
//	Sim.DisputeSome(share, why)             (chaos: disputes a share of the succeeded charges)
//	Sim.ResolveOpenDisputes(wonShare)       (chaos: decides every open dispute)
//	Sim.ChargedBack(chargeReference)        (what the charge's disputes kept)
//
// A dispute opens as a chargeback needing a response, due in
// DisputeResponseWindow, and withdraws its amount and DisputeFee at once;
// responding puts it under review; won reinstates the amount and the fee,
// lost (or accepted) keeps them. Each change is told by an event signed
// like the others (dispute.opened, dispute.updated, dispute.closed), with
// the events' faults. A charge has at most one open dispute, and its
// disputes never take more than its amount. The ledger is the truth
// Settle's disputes are checked against: each dispute's status and the
// amounts withdrawn and reinstated.

// DisputeFee is the fee the simulator withdraws with a chargeback, in the
// dispute's minor units; won, it is given back.
const DisputeFee = 1500

// DisputeResponseWindow is how long the merchant has to answer a dispute.
const DisputeResponseWindow = 7 * 24 * time.Hour

// Dispute is one dispute in the simulator's ledger.
type Dispute struct {
	ID              string    `json:"id"`
	ChargeID        string    `json:"charge_id"`
	ChargeReference string    `json:"charge_reference"`
	Amount          int64     `json:"amount"`
	Currency        string    `json:"currency"`
	Reason          string    `json:"reason"`
	Status          string    `json:"status"`
	Stage           string    `json:"stage"`
	DueBy           time.Time `json:"due_by"`
	Withdrawn       int64     `json:"amount_withdrawn"`
	Reinstated      int64     `json:"amount_reinstated"`
	Fee             int64     `json:"fee"`
	Created         time.Time `json:"created"`
}

// Open says whether the dispute still waits for its outcome.
func (d Dispute) Open() bool {
	return d.Status == refpsp.DisputeNeedsResponse || d.Status == refpsp.DisputeUnderReview
}

// The errors of the dispute controls.
var (
	ErrNoCharge      = errors.New("sim: no succeeded charge with that id")
	ErrNoDispute     = errors.New("sim: no dispute with that id")
	ErrDisputeClosed = errors.New("sim: the dispute is closed")
	ErrDisputeAmount = errors.New("sim: the amount is not positive, or more than the charge has left to dispute")
	ErrDisputeOpen   = errors.New("sim: the charge has an open dispute")
)

// OpenDispute opens a dispute of reason ("fraudulent") for amount (all
// that is left to dispute when 0) of the succeeded charge chargeID, and
// sends dispute.opened.
func (s *Sim) OpenDispute(chargeID string, amount int64, reason string) (Dispute, error) {
	return s.openDispute(chargeID, amount, false, reason)
}

// openDispute is OpenDispute; with amount 0 and half, the dispute is of
// half of what is left (at least 1).
func (s *Sim) openDispute(chargeID string, amount int64, half bool, reason string) (Dispute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	i := -1
	for j := range s.records {
		s.lapseLocked(j, now)
		if r := s.records[j]; r.ID == chargeID && r.visibleAt.Before(now.Add(time.Nanosecond)) &&
			(r.Status == StatusSucceeded || r.AmountCaptured > 0) {
			i = j
		}
	}
	if i < 0 {
		return Dispute{}, ErrNoCharge
	}
	c := s.records[i].Charge
	paid := c.Amount
	if c.Manual {
		paid = c.AmountCaptured
	}
	// What the cardholder can dispute is what they paid and did not get
	// back: the refunds that succeeded, and the earlier disputes.
	paid -= s.refundedLocked(c.Reference)
	for _, d := range s.disputes {
		if d.ChargeID != chargeID {
			continue
		}
		if d.Open() {
			return Dispute{}, ErrDisputeOpen
		}
		paid -= d.Amount
	}
	switch {
	case amount == 0 && half:
		amount = max(paid/2, 1)
	case amount == 0:
		amount = paid
	}
	if amount <= 0 || amount > paid {
		return Dispute{}, ErrDisputeAmount
	}
	if reason == "" {
		reason = "general"
	}
	d := Dispute{
		ID: fmt.Sprintf("dp_sim_%06d", len(s.disputes)+1), ChargeID: c.ID, ChargeReference: c.Reference,
		Amount: amount, Currency: c.Currency, Reason: reason, Status: refpsp.DisputeNeedsResponse,
		Stage: refpsp.DisputeStageChargeback, DueBy: now.Add(DisputeResponseWindow).Truncate(time.Second),
		Withdrawn: amount, Fee: DisputeFee, Created: now,
	}
	s.disputes = append(s.disputes, d)
	s.sendDisputeLocked(refpsp.EventDisputeOpened, d, c, now)
	return d, nil
}

// RespondDispute answers an open dispute with evidence: it is under
// review, and dispute.updated is sent.
func (s *Sim) RespondDispute(id string) (Dispute, error) {
	return s.moveDispute(id, func(d *Dispute) string {
		if d.Status == refpsp.DisputeUnderReview {
			return ""
		}
		d.Status = refpsp.DisputeUnderReview
		return refpsp.EventDisputeUpdated
	})
}

// ResolveDispute decides an open dispute, as the network would: won gives
// the amount and the fee back; lost keeps them. dispute.closed is sent.
func (s *Sim) ResolveDispute(id string, won bool) (Dispute, error) {
	return s.moveDispute(id, func(d *Dispute) string {
		if won {
			d.Status, d.Reinstated, d.Fee = refpsp.DisputeWon, d.Withdrawn, 0
		} else {
			d.Status = refpsp.DisputeLost
		}
		return refpsp.EventDisputeClosed
	})
}

// acceptDispute is the merchant's accept: an open dispute is lost; a
// closed one stays as it is (accepting twice is not an error).
func (s *Sim) acceptDispute(id string) (Dispute, error) {
	d, err := s.moveDispute(id, func(d *Dispute) string {
		d.Status = refpsp.DisputeLost
		return refpsp.EventDisputeClosed
	})
	if errors.Is(err, ErrDisputeClosed) {
		return d, nil
	}
	return d, err
}

// moveDispute changes the open dispute id with move, which returns the
// event to send ("" for none).
func (s *Sim) moveDispute(id string, move func(*Dispute) string) (Dispute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.disputes {
		d := &s.disputes[i]
		if d.ID != id {
			continue
		}
		if !d.Open() {
			return *d, ErrDisputeClosed
		}
		if typ := move(d); typ != "" {
			now := time.Now().UTC()
			for j := range s.records {
				if s.records[j].ID == d.ChargeID {
					s.sendDisputeLocked(typ, *d, s.records[j].Charge, now)
					break
				}
			}
		}
		return *d, nil
	}
	return Dispute{}, ErrNoDispute
}

// DisputeSome opens a dispute of reason for all, or half, of what is left
// to dispute of each succeeded charge that has none yet, with probability
// share, for chaos: which charges, and how much of each, is drawn from a
// source seeded with Options.Seed, so that the same seed and the same
// charges give the same disputes. It returns those opened.
func (s *Sim) DisputeSome(share float64, reason string) []Dispute {
	s.mu.Lock()
	disputed := map[string]bool{}
	for _, d := range s.disputes {
		disputed[d.ChargeID] = true
	}
	var (
		pick []string
		half []bool
	)
	for _, r := range s.records {
		if (r.Status == StatusSucceeded || r.AmountCaptured > 0) && !disputed[r.ID] && s.disputeRng.Float64() < share {
			pick, half = append(pick, r.ID), append(half, s.disputeRng.IntN(2) == 0)
		}
	}
	s.mu.Unlock()
	var out []Dispute
	for i, id := range pick {
		// A charge still in flight (not visible yet) is left alone.
		if d, err := s.openDispute(id, 0, half[i], reason); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// ResolveOpenDisputes decides every open dispute, each won with
// probability wonShare (drawn like DisputeSome's), and returns them as
// decided.
func (s *Sim) ResolveOpenDisputes(wonShare float64) []Dispute {
	s.mu.Lock()
	var (
		ids []string
		won []bool
	)
	for _, d := range s.disputes {
		if d.Open() {
			ids, won = append(ids, d.ID), append(won, s.disputeRng.Float64() < wonShare)
		}
	}
	s.mu.Unlock()
	var out []Dispute
	for i, id := range ids {
		if d, err := s.ResolveDispute(id, won[i]); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// ChargedBack sums what the disputes of the charge with reference
// chargeReference took and kept (withdrawn less reinstated): what a lost
// dispute took from the merchant, which Settle's refundable amount
// excludes.
func (s *Sim) ChargedBack(chargeReference string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, d := range s.disputes {
		if d.ChargeReference == chargeReference {
			n += d.Withdrawn - d.Reinstated
		}
	}
	return n
}

// ResendDisputes tells of every dispute again as it stands
// (dispute.updated while open, dispute.closed once decided), as a
// gateway's dashboard resends events: these are never lost, though they
// are delayed, duplicated and reordered like the others. The chaos harness
// calls it once its checkouts stop, so that Settle has heard of a dispute
// whose every event was lost before Settle's disputes are checked against
// the ledger. It returns how many it sent.
func (s *Sim) ResendDisputes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	n := 0
	for _, d := range s.disputes {
		typ := refpsp.EventDisputeUpdated
		if !d.Open() {
			typ = refpsp.EventDisputeClosed
		}
		for j := range s.records {
			if s.records[j].ID == d.ChargeID {
				s.startLocked(s.plannedLocked(disputeEvent(typ, d, s.records[j].Charge, now), now, false))
				n++
				break
			}
		}
	}
	return n
}

// openDisputeLocked says whether the charge with reference chargeReference
// has an open dispute.
func (s *Sim) openDisputeLocked(chargeReference string) bool {
	for _, d := range s.disputes {
		if d.ChargeReference == chargeReference && d.Open() {
			return true
		}
	}
	return false
}

// Disputes returns every dispute opened so far, oldest first, as each
// stands.
func (s *Sim) Disputes() []Dispute {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dispute(nil), s.disputes...)
}

// sendDisputeLocked sends the event typ about d, of the charge c.
func (s *Sim) sendDisputeLocked(typ string, d Dispute, c Charge, now time.Time) {
	s.sendLocked(disputeEvent(typ, d, c, now), now)
}

// disputeEvent is the event typ about d, of the charge c, made at now.
func disputeEvent(typ string, d Dispute, c Charge, now time.Time) refpsp.Event {
	e := refpsp.Event{Type: typ, Created: now.Unix()}
	e.Data.Object = wireCharge(c)
	w := wireDispute(d)
	e.Data.Dispute = &w
	return e
}

// wireDispute is d as the protocol carries it.
func wireDispute(d Dispute) refpsp.DisputeObject {
	return refpsp.DisputeObject{
		ID: d.ID, ChargeID: d.ChargeID, ChargeReference: d.ChargeReference, Status: d.Status, Stage: d.Stage,
		Amount: d.Amount, Currency: d.Currency, Reason: d.Reason, NetworkReasonCode: "10.4", DueBy: d.DueBy,
		AmountWithdrawn: d.Withdrawn, AmountReinstated: d.Reinstated, Fee: d.Fee,
	}
}

func (s *Sim) handleDisputeRead(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	for _, d := range s.Disputes() {
		if d.ID == r.PathValue("id") {
			writeJSON(w, http.StatusOK, wireDispute(d))
			return
		}
	}
	writeError(w, http.StatusNotFound, "no dispute with that id")
}

func (s *Sim) handleDisputeAccept(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key; nothing accepted")
		return
	}
	d, err := s.acceptDispute(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusNotFound, "no dispute with that id")
		return
	}
	writeJSON(w, http.StatusOK, wireDispute(d))
}

// handleDisputeControl serves the controls that open, answer and decide
// disputes.
func (s *Sim) handleDisputeControl(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	var in struct {
		ChargeID string `json:"charge_id"`
		Amount   int64  `json:"amount"`
		Reason   string `json:"reason"`
		Won      bool   `json:"won"`
	}
	if body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody)); err != nil ||
		(len(body) > 0 && json.Unmarshal(body, &in) != nil) {
		writeError(w, http.StatusBadRequest, "malformed JSON")
		return
	}
	var (
		d   Dispute
		err error
	)
	switch r.PathValue("verb") {
	case "":
		d, err = s.OpenDispute(in.ChargeID, in.Amount, in.Reason)
	case "respond":
		d, err = s.RespondDispute(r.PathValue("id"))
	case "resolve":
		d, err = s.ResolveDispute(r.PathValue("id"), in.Won)
	default:
		writeError(w, http.StatusNotFound, "no such control")
		return
	}
	switch {
	case errors.Is(err, ErrNoCharge), errors.Is(err, ErrNoDispute):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrDisputeClosed), errors.Is(err, ErrDisputeOpen):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case r.PathValue("verb") == "":
		writeJSON(w, http.StatusCreated, d)
	default:
		writeJSON(w, http.StatusOK, d)
	}
}

func (s *Sim) handleDisputeLedger(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Disputes())
}
