package refpsp

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
	// NextActionURL is the authentication page of a requires_action charge.
	NextActionURL string `json:"next_action_url,omitempty"`
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
