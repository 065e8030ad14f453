package adyen

import (
	"fmt"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Disputes
//
// Adyen tells of a dispute only by notification, signed like every other
// (events.go), about the disputed payment: originalReference is the
// payment's pspReference, merchantReference its reference (the attempt
// id), amount the disputed amount. Each becomes an order.GatewayEvent
// with Dispute set, AttemptID and ChargeID naming the payment as for a
// modification's notification, and ID eventCode:pspReference:success for
// dedupe. Adyen numbers each notification of a dispute with a
// pspReference of its own, and a payment has at most one dispute at a
// time, which moves through the stages below: the dispute's ID is
// therefore the payment's pspReference (originalReference), so that every
// notification of one dispute is about one dispute record.
//
//	eventCode                   stage               status                withdrawn / reinstated
//	REQUEST_FOR_INFORMATION     INQUIRY             NEEDS_RESPONSE        0 / 0
//	NOTIFICATION_OF_CHARGEBACK  INQUIRY             NEEDS_RESPONSE        0 / 0
//	CHARGEBACK                  CHARGEBACK          see disputeStatus     amount / 0
//	CHARGEBACK_REVERSED         CHARGEBACK          WON                   amount / amount
//	PREARBITRATION_WON          PRE_ARBITRATION     WON                   amount / amount
//	PREARBITRATION_LOST         PRE_ARBITRATION     LOST                  2×amount / amount
//	SECOND_CHARGEBACK           SECOND_CHARGEBACK   LOST                  2×amount / amount
//
// Withdrawn and reinstated are the totals the stage implies on Adyen's
// usual path (a pre-arbitration and a second chargeback come after a
// reversal, and debit the amount again): what stays charged back,
// withdrawn less reinstated, is the amount for a lost dispute and 0 for a
// won one. A CHARGEBACK's status is additionalData.disputeStatus:
// Unresponded NEEDS_RESPONSE, Responded and Pending UNDER_REVIEW, Won WON,
// Lost, Accepted, Expired and Undefended LOST; without it (Adyen does not
// send it for every region), NEEDS_RESPONSE while additionalData.defendable
// is "true" and LOST otherwise. A disputeStatus Settle does not know
// refuses the batch with an error naming it. DueBy is
// additionalData.defensePeriodEndsAt; NetworkReasonCode
// additionalData.chargebackReasonCode; Reason the notification's reason,
// reduced to letters, digits and underscores.
//
// The Checkout API this adapter uses has no read of a dispute, and
// accepting one is a call of the separate Disputes API (another key and
// base URL): the adapter is not an order.DisputeGateway, and Settle
// believes its verified notifications, forward only (order.DisputeRank).

// The dispute eventCodes the adapter reads.
const (
	EventRequestForInformation    = "REQUEST_FOR_INFORMATION"
	EventNotificationOfChargeback = "NOTIFICATION_OF_CHARGEBACK"
	EventChargeback               = "CHARGEBACK"
	EventChargebackReversed       = "CHARGEBACK_REVERSED"
	EventPrearbitrationWon        = "PREARBITRATION_WON"
	EventPrearbitrationLost       = "PREARBITRATION_LOST"
	EventSecondChargeback         = "SECOND_CHARGEBACK"
)

// disputeStages says, for each dispute eventCode, its stage and how many
// times the amount was withdrawn and reinstated by then.
var disputeStages = map[string]struct {
	stage                 order.DisputeStage
	withdrawn, reinstated int64
}{
	EventRequestForInformation:    {order.DisputeInquiry, 0, 0},
	EventNotificationOfChargeback: {order.DisputeInquiry, 0, 0},
	EventChargeback:               {order.DisputeChargeback, 1, 0},
	EventChargebackReversed:       {order.DisputeChargeback, 1, 1},
	EventPrearbitrationWon:        {order.DisputePreArbitration, 1, 1},
	EventPrearbitrationLost:       {order.DisputePreArbitration, 2, 1},
	EventSecondChargeback:         {order.DisputeSecondChargeback, 2, 1},
}

// disputeEvent is the domain's event of a verified dispute notification.
func (g *Gateway) disputeEvent(it *notificationItem) (order.GatewayEvent, error) {
	if it.PSPReference == "" || it.OriginalReference == "" {
		return order.GatewayEvent{}, fmt.Errorf("adyen: a %s notification has no pspReference or originalReference", it.EventCode)
	}
	st := disputeStages[it.EventCode]
	status, err := disputeStatus(it)
	if err != nil {
		return order.GatewayEvent{}, fmt.Errorf("adyen: %s %s: %w", it.EventCode, clip(it.PSPReference), err)
	}
	amount := minorAmount(it.Amount.Currency, it.Amount.Value)
	d := order.GatewayDispute{
		ID: it.OriginalReference, Status: status, Stage: st.stage,
		Amount:            order.Money{Currency: it.Amount.Currency, AmountMinor: amount},
		Reason:            declineCode(it.Reason),
		NetworkReasonCode: clip(strings.TrimSpace(additional(it, "chargebackReasonCode"))),
		Withdrawn:         st.withdrawn * amount,
		Reinstated:        st.reinstated * amount,
	}
	if s := additional(it, "defensePeriodEndsAt"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return order.GatewayEvent{}, fmt.Errorf("adyen: %s %s: defensePeriodEndsAt %q is not a time", it.EventCode, clip(it.PSPReference), clip(s))
		}
		d.DueBy = t.UTC()
	}
	e := g.event(it, order.EventAboutAttempt)
	// A dispute's notification says nothing of the payment's outcome: the
	// attempt's Lookup, which reads the notifications recorded about it,
	// must not take it for one.
	e.Outcome, e.DeclineCode, e.Succeeded = "", "", false
	e.ChargeID = it.OriginalReference
	e.Dispute = &d
	return e, nil
}

// disputeStatus is the status a dispute notification reports.
func disputeStatus(it *notificationItem) (order.DisputeStatus, error) {
	switch it.EventCode {
	case EventRequestForInformation, EventNotificationOfChargeback:
		return order.DisputeNeedsResponse, nil
	case EventChargebackReversed, EventPrearbitrationWon:
		return order.DisputeWon, nil
	case EventPrearbitrationLost, EventSecondChargeback:
		return order.DisputeLost, nil
	case EventChargeback:
	default:
		return "", fmt.Errorf("%q is not a dispute notification", clip(it.EventCode))
	}
	switch s := additional(it, "disputeStatus"); s {
	case "Unresponded":
		return order.DisputeNeedsResponse, nil
	case "Responded", "Pending":
		return order.DisputeUnderReview, nil
	case "Won":
		return order.DisputeWon, nil
	case "Lost", "Accepted", "Expired", "Undefended":
		return order.DisputeLost, nil
	case "":
		if additional(it, "defendable") == "true" {
			return order.DisputeNeedsResponse, nil
		}
		return order.DisputeLost, nil
	default:
		return "", fmt.Errorf("disputeStatus %q is not one Settle knows", clip(s))
	}
}

// additional is a string of the item's additionalData, "" when absent.
func additional(it *notificationItem, key string) string {
	s, _ := it.AdditionalData[key].(string)
	return s
}
