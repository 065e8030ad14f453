package order

import (
	"context"
	"time"
)

// A dispute takes a paid order's money back through the card network,
// often weeks after the charge, with a deadline for the merchant's evidence
// (issue #32). Settle records what the gateway says of each dispute; it
// never decides one. This file holds the words the gateway adapters and the
// Service share: what an adapter reads from the gateway's events and reads,
// and the order in which a dispute may move.

// DisputeStatus is where a dispute stands, in Settle's words; each adapter
// maps its gateway's statuses onto them.
type DisputeStatus string

// The dispute statuses. NEEDS_RESPONSE and UNDER_REVIEW are open; the
// others close the dispute at its stage.
const (
	// DisputeNeedsResponse: the merchant may answer with evidence until
	// DueBy (Stripe warning_needs_response, needs_response; Adyen
	// NOTIFICATION_OF_CHARGEBACK, a CHARGEBACK or PREARBITRATION that can
	// still be defended).
	DisputeNeedsResponse DisputeStatus = "NEEDS_RESPONSE"
	// DisputeUnderReview: evidence was given, the network decides (Stripe
	// warning_under_review, under_review).
	DisputeUnderReview DisputeStatus = "UNDER_REVIEW"
	// DisputeWon: the money stays with, or comes back to, the merchant
	// (Stripe won, Adyen CHARGEBACK_REVERSED, PREARBITRATION_WON).
	DisputeWon DisputeStatus = "WON"
	// DisputeLost: the money went back to the cardholder (Stripe lost,
	// including an accepted dispute; Adyen CHARGEBACK once final,
	// SECOND_CHARGEBACK, PREARBITRATION_LOST).
	DisputeLost DisputeStatus = "LOST"
	// DisputeWarningClosed: an inquiry closed without becoming a
	// chargeback (Stripe warning_closed); no money moved.
	DisputeWarningClosed DisputeStatus = "WARNING_CLOSED"
)

// Open says whether the dispute still waits on its outcome: while it does,
// the order's refunds are refused.
func (s DisputeStatus) Open() bool {
	return s == DisputeNeedsResponse || s == DisputeUnderReview
}

// DisputeStage is the network's round of a dispute.
type DisputeStage string

// The dispute stages, in the order a dispute goes through them.
const (
	// DisputeInquiry: a retrieval request or early warning; no money has
	// moved (Stripe warning_*, Adyen REQUEST_FOR_INFORMATION and
	// NOTIFICATION_OF_CHARGEBACK).
	DisputeInquiry DisputeStage = "INQUIRY"
	// DisputeChargeback: the first chargeback (Stripe's non-warning
	// statuses, Adyen CHARGEBACK, CHARGEBACK_REVERSED).
	DisputeChargeback DisputeStage = "CHARGEBACK"
	// DisputePreArbitration: the issuer challenged the merchant's defence
	// (Adyen PREARBITRATION_WON, PREARBITRATION_LOST).
	DisputePreArbitration DisputeStage = "PRE_ARBITRATION"
	// DisputeSecondChargeback: a second chargeback after a reversal (Adyen
	// SECOND_CHARGEBACK); the last stage Settle records.
	DisputeSecondChargeback DisputeStage = "SECOND_CHARGEBACK"
)

// DisputeRank orders the points a dispute may be at: a later stage outranks
// an earlier one, and within a stage an open status is outranked by a
// closing one (NEEDS_RESPONSE before UNDER_REVIEW before WON, LOST or
// WARNING_CLOSED). A dispute only moves to a higher rank, so that events
// repeated or out of order change nothing; a closed dispute moves again
// only when the network opens a later stage of it (Adyen's
// SECOND_CHARGEBACK after a CHARGEBACK_REVERSED). It returns 0 for an
// unknown stage or status.
func DisputeRank(stage DisputeStage, status DisputeStatus) int {
	var st int
	switch stage {
	case DisputeInquiry:
		st = 1
	case DisputeChargeback:
		st = 2
	case DisputePreArbitration:
		st = 3
	case DisputeSecondChargeback:
		st = 4
	default:
		return 0
	}
	var s int
	switch status {
	case DisputeNeedsResponse:
		s = 1
	case DisputeUnderReview:
		s = 2
	case DisputeWon, DisputeLost, DisputeWarningClosed:
		s = 3
	default:
		return 0
	}
	return st*10 + s
}

// GatewayDispute is what a gateway says of one dispute, from an event or a
// read. Amounts are in the dispute's currency, in minor units.
type GatewayDispute struct {
	// ID is the gateway's id of the dispute (Stripe's dp_…; Adyen's
	// pspReference of the dispute notification's original payment plus its
	// chargeback's reference where it has one). It is unique per gateway.
	ID     string
	Status DisputeStatus
	Stage  DisputeStage
	// Amount is the amount disputed.
	Amount Money
	// Reason is the gateway's reason ("fraudulent", "product_not_received");
	// NetworkReasonCode the card network's code ("10.4"), "" if unknown.
	Reason            string
	NetworkReasonCode string
	// DueBy is the deadline for the merchant's evidence; zero if none.
	DueBy time.Time
	// Withdrawn and Reinstated are the amounts taken from and given back to
	// the merchant so far; Fee the gateway's dispute fee, 0 if unknown.
	Withdrawn  int64
	Reinstated int64
	Fee        int64
}

// DisputeGateway is implemented by a gateway whose disputes can be read and
// accepted through its API (Stripe's dispute.Get and dispute.Close). For
// such a gateway a dispute event is a hint: the Service reads the dispute
// and the read decides. A gateway without it (Adyen, whose disputes arrive
// only by notification; refpsp) is believed from its verified events, under
// DisputeRank's forward-only rule.
type DisputeGateway interface {
	// GetDispute returns the dispute's current state.
	GetDispute(ctx context.Context, id string) (GatewayDispute, error)
	// AcceptDispute concedes the dispute (it closes as LOST) and returns
	// its state after. Accepting a dispute twice is not an error.
	AcceptDispute(ctx context.Context, id string) (GatewayDispute, error)
}
