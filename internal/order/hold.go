package order

import (
	"context"
	"time"
)

// CaptureMode says whether a charge takes the money at once or only holds
// it (an authorization) for captures later.
type CaptureMode string

// The capture modes of an order.
const (
	// CaptureAutomatic: the charge takes the money (the default).
	CaptureAutomatic CaptureMode = "automatic"
	// CaptureManual: the charge authorizes, holding the amount on the
	// customer's card; CaptureOrder takes some or all of it, VoidOrder
	// releases it, and the gateway lets it lapse at its capture_before.
	CaptureManual CaptureMode = "manual"
)

// HoldState is what a gateway says has become of an authorization.
type HoldState string

// The states of an authorization at its gateway.
const (
	// HoldOpen: the amount is held and can be captured.
	HoldOpen HoldState = "open"
	// HoldCaptured: captured (Hold.CapturedMinor), the rest released; no
	// more can be captured.
	HoldCaptured HoldState = "captured"
	// HoldVoided: released by a void before anything was captured.
	HoldVoided HoldState = "voided"
	// HoldExpired: lapsed at the gateway (past its capture_before) with
	// nothing captured.
	HoldExpired HoldState = "expired"
)

// Hold is a gateway's word on an authorization: a charge made with
// CaptureManual that succeeded. Charge sets it on OutcomeSucceeded, and
// Lookup on every answer about such a charge, so that the reconciler can
// tell an open hold from one that was captured, voided or has lapsed.
type Hold struct {
	State HoldState
	// AuthorizedMinor is the amount held, CapturedMinor what was captured
	// of it so far (several captures with Final false add up).
	AuthorizedMinor, CapturedMinor int64
	// CaptureBefore is when the gateway will let the hold lapse; zero when
	// it did not say.
	CaptureBefore time.Time
}

// CaptureRequest is what a gateway needs to capture part or all of an
// authorization, and to look the capture up.
type CaptureRequest struct {
	// CaptureID is the gateway reference and idempotency key.
	CaptureID string
	OrderID   string
	// ChargeAttemptID is the reference of the authorizing attempt, and
	// ChargeID the gateway's own id for it, when the gateway told us.
	ChargeAttemptID string
	ChargeID        string
	Amount          Money
	// Final releases what is left of the hold once this capture succeeds;
	// otherwise more captures may follow.
	Final bool
	// CreatedAt is when the capture was made (database time, for lookups).
	CreatedAt time.Time
}

// VoidRequest is what a gateway needs to release an authorization, and to
// look the void up.
type VoidRequest struct {
	// VoidID is the gateway reference and idempotency key.
	VoidID          string
	OrderID         string
	ChargeAttemptID string
	ChargeID        string
	CreatedAt       time.Time
}

// Capturer is a gateway that can authorize (ChargeRequest.Capture is
// CaptureManual), capture and void. Capture and Void report an outcome for
// every call: OutcomeSucceeded, OutcomeDeclined (the gateway refused it:
// the hold has lapsed, is already captured or voided, or the amount is
// more than is held), OutcomeNotSent, or OutcomeUnknown; the error
// explains the last two and is for logs. LookupCapture and LookupVoid ask
// about an earlier one by its reference: OutcomeSucceeded, OutcomeDeclined,
// OutcomeNotFound, or an error when the gateway cannot say. A successful
// Capture or LookupCapture sets Result.Hold to the authorization as it
// stands after the capture.
type Capturer interface {
	Capture(ctx context.Context, req CaptureRequest) (Result, error)
	LookupCapture(ctx context.Context, req CaptureRequest) (Result, error)
	Void(ctx context.Context, req VoidRequest) (Result, error)
	LookupVoid(ctx context.Context, req VoidRequest) (Result, error)
}
