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
