package adyenfake

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Disputes
//
// Adyen tells of a dispute only by notification: Server.Dispute sends one
// about a captured payment, as the card network's step would make Adyen
// send it, signed like the others and checked against its event's schema
// in Webhooks-v1.json. Its pspReference is new, originalReference the
// payment's, merchantReference the payment's reference, amount the
// disputed amount, and additionalData carries chargebackReasonCode,
// chargebackSchemeCode, modificationMerchantReferences, defendable,
// defensePeriodEndsAt and disputeStatus as a DisputeNotice says. The
// fake keeps what it sent (Disputes) for a test to compare; it decides
// nothing of a dispute itself.

// The dispute notifications Server.Dispute sends.
var disputeCodes = []string{
	"REQUEST_FOR_INFORMATION", "NOTIFICATION_OF_CHARGEBACK", "CHARGEBACK", "CHARGEBACK_REVERSED",
	"PREARBITRATION_WON", "PREARBITRATION_LOST", "SECOND_CHARGEBACK",
}

// DisputeNotice is what one dispute notification says beside its
// eventCode.
type DisputeNotice struct {
	// Amount is the disputed amount; 0 means what was captured.
	Amount int64
	// ReasonCode is the network's reason code (chargebackReasonCode);
	// empty means "10.4". Reason is the notification's reason.
	ReasonCode, Reason string
	// Defendable is additionalData.defendable.
	Defendable bool
	// DefenseEnds is defensePeriodEndsAt; zero leaves it out.
	DefenseEnds time.Time
	// DisputeStatus is additionalData.disputeStatus (Unresponded,
	// Responded, Pending, Won, Lost, Accepted, Expired, Undefended); empty
	// leaves it out, as Adyen does for some regions.
	DisputeStatus string
}

// DisputeNotification is one dispute notification the fake sent.
type DisputeNotification struct {
	EventCode    string
	PSPReference string // the notification's own
	// PaymentPSPReference and PaymentReference name the disputed payment.
	PaymentPSPReference, PaymentReference string
	Amount                                int64
	Currency                              string
	Notice                                DisputeNotice
	Sent                                  time.Time
}

// Dispute sends the dispute notification eventCode about the captured
// payment pspReference and returns it. The notification is delivered like
// every other (Config.Notify's faults included).
func (s *Server) Dispute(pspReference, eventCode string, n DisputeNotice) (DisputeNotification, error) {
	if !slices.Contains(disputeCodes, eventCode) {
		return DisputeNotification{}, fmt.Errorf("adyenfake: %q is not a dispute notification", eventCode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byPSP[pspReference]
	if !ok || p.AmountCaptured <= 0 {
		return DisputeNotification{}, fmt.Errorf("adyenfake: no captured payment %q to dispute", pspReference)
	}
	if n.Amount == 0 {
		n.Amount = p.AmountCaptured
	}
	if n.ReasonCode == "" {
		n.ReasonCode = "10.4"
	}
	now := time.Now()
	add := map[string]string{
		"chargebackReasonCode": n.ReasonCode, "chargebackSchemeCode": "visa",
		"modificationMerchantReferences": "", "defendable": strconv.FormatBool(n.Defendable),
	}
	if !n.DefenseEnds.IsZero() {
		add["defensePeriodEndsAt"] = n.DefenseEnds.Format(time.RFC3339)
	}
	if n.DisputeStatus != "" {
		add["disputeStatus"] = n.DisputeStatus
	}
	d := DisputeNotification{
		EventCode: eventCode, PSPReference: s.pspLocked(), PaymentPSPReference: p.PSPReference, PaymentReference: p.Reference,
		Amount: n.Amount, Currency: p.Currency, Notice: n, Sent: now,
	}
	s.disputes = append(s.disputes, d)
	s.notifyLocked(item{
		PSPReference: d.PSPReference, OriginalReference: p.PSPReference, MerchantReference: p.Reference,
		EventCode: eventCode, Amount: amount{p.Currency, n.Amount}, Success: true, Reason: n.Reason,
		Additional: add,
	}, now, 0)
	return d, nil
}

// Disputes returns the dispute notifications sent, oldest first.
func (s *Server) Disputes() []DisputeNotification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.disputes)
}
