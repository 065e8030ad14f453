package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Discrepancies
//
// An audit matches the gateway's records with Settle's; its tests need a
// gateway whose records disagree. These methods make the disagreements a
// real gateway shows, each in the ledgers as well as in the protocol's
// lookups and listings, and none with an event (nothing tells Settle):
//
//	Foreign(amount, currency)    a succeeded charge made elsewhere: no reference
//	Duplicate(reference)         a second succeeded charge with a used reference
//	AlterAmount(reference, n)    the charge's amount becomes n
//	Hide(reference)              the charge disappears from lookups and listings
//	ExtraRefund(reference, n)    a succeeded refund of the charge made elsewhere:
//	                             no refund reference

// ErrNoReference means that no charge has the reference.
var ErrNoReference = errors.New("sim: no charge with that reference")

// Foreign makes a succeeded charge of amount in currency that Settle did
// not make: its reference is empty, as a charge taken at the gateway's
// dashboard has none.
func (s *Sim) Foreign(amount int64, currency string) Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.stampLocked()
	rec := record{
		Charge: Charge{
			ID: fmt.Sprintf("ch_sim_%06d", len(s.records)+1), Amount: amount, Currency: currency,
			PaymentMethod: "tok_ok", Description: "foreign", Status: StatusSucceeded, Created: now,
		},
		visibleAt: now,
	}
	s.records = append(s.records, rec)
	return rec.Charge
}

// Duplicate makes a second succeeded charge like the latest one with the
// reference (amount, currency, payment method): what a gateway that
// ignores a repeated reference does with a replayed request. Lookups of
// the reference then find the duplicate.
func (s *Sim) Duplicate(reference string) (Charge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.authorizationLocked(reference, time.Now())
	if i < 0 {
		return Charge{}, ErrNoReference
	}
	orig := s.records[i].Charge
	now := s.stampLocked()
	rec := record{
		Charge: Charge{
			ID: fmt.Sprintf("ch_sim_%06d", len(s.records)+1), Reference: reference, Amount: orig.Amount,
			Currency: orig.Currency, PaymentMethod: orig.PaymentMethod, Description: orig.Description,
			Status: StatusSucceeded, Created: now,
		},
		visibleAt: now,
	}
	s.records = append(s.records, rec)
	return rec.Charge, nil
}

// AlterAmount sets the amount of the latest charge with the reference to
// amount, as a gateway that charged another amount than it was asked for
// would have it, and returns the charge as it now stands.
func (s *Sim) AlterAmount(reference string, amount int64) (Charge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.authorizationLocked(reference, time.Now())
	if i < 0 {
		return Charge{}, ErrNoReference
	}
	s.records[i].Amount = amount
	return s.records[i].Charge, nil
}

// Hide makes every charge with the reference disappear from lookups (404)
// and listings; the ledger still lists them, the money having moved.
func (s *Sim) Hide(reference string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for i := range s.records {
		if s.records[i].Reference == reference {
			s.records[i].hidden, found = true, true
		}
	}
	if !found {
		return ErrNoReference
	}
	return nil
}

// ExtraRefund makes a succeeded refund of amount of the latest charge with
// the reference that Settle did not ask for: its reference is empty.
func (s *Sim) ExtraRefund(reference string, amount int64) (Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.authorizationLocked(reference, time.Now())
	if i < 0 {
		return Refund{}, ErrNoReference
	}
	c := s.records[i].Charge
	now := s.stampLocked()
	rec := refundRecord{
		Refund: Refund{
			ID: fmt.Sprintf("re_sim_%06d", len(s.refunds)+1), ChargeReference: reference, ChargeID: c.ID,
			Amount: amount, Currency: c.Currency, Status: refpsp.RefundSucceeded, Created: now,
		},
		visibleAt: now,
	}
	s.refunds = append(s.refunds, rec)
	return rec.Refund, nil
}
