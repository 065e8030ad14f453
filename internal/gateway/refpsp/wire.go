package refpsp

// The protocol's bodies are defined once, here, for both of its ends: this
// client, and the simulator (package sim), which serves the protocol.

// The statuses a charge object can have.
const (
	// StatusSucceeded: the gateway charged the customer.
	StatusSucceeded = "succeeded"
	// StatusDeclined: the gateway said no.
	StatusDeclined = "declined"
)

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
}

// ChargeObject is the gateway's charge, as a charge (201, 402) or a lookup
// (200) answers it. It carries no payment method: a gateway does not echo
// one.
type ChargeObject struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	// Status is StatusSucceeded or StatusDeclined.
	Status      string `json:"status"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	DeclineCode string `json:"decline_code,omitempty"`
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
