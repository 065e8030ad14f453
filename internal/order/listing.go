package order

import (
	"context"
	"time"
)

// ChargeLister is a gateway whose charges and refunds can be listed by
// the time the gateway created them: the gateway's side of the audit,
// which matches a closed window of the gateway's records with Settle's
// attempts, captures and refunds by our reference. Each method calls fn
// once for every record created in [from, to), ordered by creation time
// (then the gateway's id), reading the gateway page by page so that a
// window is never held in memory whole; it stops at fn's first error,
// and returns it, or at ctx's end.
type ChargeLister interface {
	ListCharges(ctx context.Context, from, to time.Time, fn func(GatewayCharge) error) error
	ListRefunds(ctx context.Context, from, to time.Time, fn func(GatewayRefund) error) error
}

// GatewayCharge is one charge as a gateway's listing has it.
type GatewayCharge struct {
	// ID is the gateway's id for the charge.
	ID string
	// Reference is what the gateway holds as the charge's reference: the
	// attempt's id for a charge Settle made, and anything else (empty, or
	// not one of Settle's ids) for one made elsewhere.
	Reference string
	// Amount is what the charge asked for (an authorization's hold).
	Amount Money
	// Outcome is OutcomeSucceeded, OutcomeDeclined or
	// OutcomeRequiresAction (waiting for the customer, nothing moved).
	Outcome Outcome
	// DeclineCode says why a declined charge was declined.
	DeclineCode string
	// Hold is where an authorization (a charge made with manual capture)
	// stands; empty for a charge taken at once.
	Hold HoldState
	// Captured is what the gateway took, in Amount's currency: Amount for
	// a succeeded charge taken at once, what its captures took for an
	// authorization, nothing otherwise.
	Captured int64
	// Refunded is what the charge's succeeded refunds gave back.
	Refunded int64
	// Created is when the gateway created the charge.
	Created time.Time
}

// GatewayRefund is one refund as a gateway's listing has it.
type GatewayRefund struct {
	// ID is the gateway's id for the refund.
	ID string
	// Reference is the refund's reference at the gateway: Settle's refund
	// id for a refund Settle made, and anything else (often empty) for
	// one made elsewhere.
	Reference string
	// ChargeID and ChargeReference name the refunded charge: the
	// gateway's id and the charge's reference (the attempt's id).
	ChargeID, ChargeReference string
	Amount                    Money
	// Outcome is OutcomeSucceeded (the money went back), OutcomeDeclined
	// (the refund failed, FailureCode says why) or OutcomeUnknown (the
	// gateway has not decided yet: pending).
	Outcome     Outcome
	FailureCode string
	// Created is when the gateway created the refund.
	Created time.Time
}
