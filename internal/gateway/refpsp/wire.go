package refpsp

import "time"

// The protocol's bodies are defined once, here, for both of its ends: this
// client, and the simulator (package sim), which serves the protocol.

// The statuses a charge object can have.
const (
	// StatusSucceeded: the gateway charged the customer.
	StatusSucceeded = "succeeded"
	// StatusDeclined: the gateway said no.
	StatusDeclined = "declined"
	// StatusRequiresAction: the gateway asks the customer to authenticate
	// (3-D Secure) at NextActionURL before it charges. A charge answers it
	// with 202; opening the page ends it succeeded or declined, and a
	// cancel (POST /v1/charges/cancel) ends it declined "canceled".
	StatusRequiresAction = "requires_action"

	// The statuses of an authorization: a charge made with "capture":
	// false. Its amount is held, not taken; captures take some or all of
	// it (AmountCaptured) and a void releases it (see capture.go).

	// StatusAuthorized: the amount is held, and AmountCapturable of it
	// can still be captured until CaptureBefore (some may already be
	// captured, by captures that were not final).
	StatusAuthorized = "authorized"
	// StatusCaptured: AmountCaptured was captured and the rest released;
	// nothing more can be captured. An authorization that lapses with
	// something captured ends captured too.
	StatusCaptured = "captured"
	// StatusVoided: released by a void, nothing captured.
	StatusVoided = "voided"
	// StatusExpired: lapsed at CaptureBefore with nothing captured.
	StatusExpired = "expired"
)

// CancelBody is the JSON body of POST /v1/charges/cancel: cancel the charge
// with this reference while it waits for the customer. The gateway answers
// 200 with the charge, declined "canceled"; 409 with the charge when it has
// already ended (succeeded or declined); 404 when it has none.
type CancelBody struct {
	Reference string `json:"reference"`
}

// ChargeBody is the JSON body of POST /v1/charges.
type ChargeBody struct {
	// Reference is the attempt id, which the gateway echoes in its charge
	// object and by which a lookup finds the charge.
	Reference string `json:"reference"`
	// Amount is in the currency's minor units.
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	// Description is the merchant's reference of the order.
	Description string `json:"description"`
	// CustomerPresent says the customer can authenticate; otherwise a
	// charge that needs it is declined "authentication_required".
	CustomerPresent bool `json:"customer_present,omitempty"`
	// ReturnURL is where the authentication page sends the customer back.
	ReturnURL string `json:"return_url,omitempty"`
	// Capture false only authorizes: the charge holds the amount for
	// captures later (POST /v1/captures). Absent, or true, charges at once.
	Capture *bool `json:"capture,omitempty"`
}

// ChargeObject is the gateway's charge, as a charge (201, 402) or a lookup
// (200) answers it. It carries no payment method: a gateway does not echo
// one.
type ChargeObject struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	// Status is one of the Status constants.
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	DeclineCode string `json:"decline_code,omitempty"`
	// NextActionURL is the authentication page of a requires_action charge.
	NextActionURL string `json:"next_action_url,omitempty"`
	// AmountCaptured, AmountCapturable and CaptureBefore are an
	// authorization's (a charge made with "capture": false, whose status
	// is one of StatusAuthorized, StatusCaptured, StatusVoided or
	// StatusExpired): what was captured of Amount so far, what can still
	// be, and when the hold lapses. A charge made at once has none.
	AmountCaptured   int64     `json:"amount_captured,omitempty"`
	AmountCapturable int64     `json:"amount_capturable,omitempty"`
	CaptureBefore    time.Time `json:"capture_before,omitzero"`
}

// The statuses a refund object can have.
const (
	// RefundSucceeded: the money went back to the customer.
	RefundSucceeded = "succeeded"
	// RefundPending: the gateway accepted the refund and will say later
	// whether it succeeded; a lookup tells.
	RefundPending = "pending"
	// RefundFailed: no money went back.
	RefundFailed = "failed"
)

// RefundBody is the JSON body of POST /v1/refunds.
type RefundBody struct {
	// Reference is the refund id, which the gateway echoes in its refund
	// object and by which a lookup finds the refund.
	Reference string `json:"reference"`
	// ChargeReference is the reference of the charge to refund.
	ChargeReference string `json:"charge_reference"`
	// Amount is in the currency's minor units.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// RefundObject is the gateway's refund, as a refund (201, 402) or a lookup
// (200) answers it.
type RefundObject struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	// Status is RefundSucceeded, RefundPending or RefundFailed.
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	FailureCode string `json:"failure_code,omitempty"`
}

// The statuses a capture or a void object can have.
const (
	// OpSucceeded: the capture took its amount, or the void released the
	// authorization.
	OpSucceeded = "succeeded"
	// OpFailed: the gateway refused it (FailureCode says why); nothing
	// moved.
	OpFailed = "failed"
)

// The failure codes of a refused capture or void.
const (
	// FailureExpired: the authorization lapsed (past its capture_before).
	FailureExpired = "authorization_expired"
	// FailureCaptured: the authorization is captured (a final capture, or
	// all of it); for a void, something of it is captured.
	FailureCaptured = "already_captured"
	// FailureVoided: the authorization was voided.
	FailureVoided = "authorization_voided"
	// FailureTooLarge: the capture is for more than is still held.
	FailureTooLarge = "amount_too_large"
	// FailureNotAuthorization: the charge is not an authorization that
	// can be captured or voided (it was declined, waits for the customer,
	// or was charged at once).
	FailureNotAuthorization = "not_capturable"
	// FailureDeclined: the gateway declined the capture for its own
	// reasons (the simulator's random decline).
	FailureDeclined = "capture_declined"
)

// CaptureBody is the JSON body of POST /v1/captures.
type CaptureBody struct {
	// Reference is the capture id, which the gateway echoes in its capture
	// object and by which a lookup finds the capture.
	Reference string `json:"reference"`
	// ChargeReference is the reference of the authorization to capture.
	ChargeReference string `json:"charge_reference"`
	// Amount is in the currency's minor units, at most what is still held.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Final releases what is left of the authorization once this capture
	// succeeds; otherwise more captures may follow.
	Final bool `json:"final"`
}

// CaptureObject is the gateway's capture, as a capture (201, 402) or a
// lookup (200) answers it.
type CaptureObject struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	// Status is OpSucceeded or OpFailed.
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Final       bool   `json:"final"`
	FailureCode string `json:"failure_code,omitempty"`
	// Charge is the authorization as it stands when the answer is made.
	Charge ChargeObject `json:"charge"`
}

// VoidBody is the JSON body of POST /v1/voids: release the authorization
// with ChargeReference, which nothing may have been captured of.
type VoidBody struct {
	// Reference is the void id, which the gateway echoes in its void
	// object and by which a lookup finds the void.
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
}

// VoidObject is the gateway's void, as a void (201, 402) or a lookup (200)
// answers it.
type VoidObject struct {
	ID              string `json:"id"`
	Reference       string `json:"reference"`
	ChargeReference string `json:"charge_reference"`
	// Status is OpSucceeded or OpFailed.
	Status      string `json:"status"`
	FailureCode string `json:"failure_code,omitempty"`
	// Charge is the authorization as it stands when the answer is made.
	Charge ChargeObject `json:"charge"`
}

// Listings
//
// GET /v1/charges and GET /v1/refunds without a reference list the
// records created in a window, a page at a time (see list.go).

// MaxListLimit is the most records a page of a listing holds, and the
// page size when the request names none.
const MaxListLimit = 100

// ListedCharge is a charge as a page of GET /v1/charges lists it: the
// charge object, when the gateway created it, and what its succeeded
// refunds gave back.
type ListedCharge struct {
	ChargeObject
	Created        time.Time `json:"created"`
	AmountRefunded int64     `json:"amount_refunded,omitempty"`
}

// ListedRefund is a refund as a page of GET /v1/refunds lists it: the
// refund object, the refunded charge's id, and when the gateway created
// it.
type ListedRefund struct {
	RefundObject
	ChargeID string    `json:"charge_id"`
	Created  time.Time `json:"created"`
}

// Page is one page of a listing. NextCursor, when HasMore, is the
// starting_after of the next page.
type Page[T any] struct {
	Data       []T    `json:"data"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}
