package order

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on request fields. Lengths count characters (runes), not bytes.
const (
	// MaxAmountMinor bounds an order's amount: 10^12 minor units (ten billion
	// in a two-decimal currency) is far beyond any checkout and far inside int64.
	MaxAmountMinor     = 1_000_000_000_000
	MaxReferenceLen    = 255
	MaxTokenLen        = 255
	MaxGatewayLen      = 32
	MinRequestIDLen    = 8
	MaxRequestIDLen    = 255
	MaxReasonLen       = 1000
	cardNumberAdvisory = "looks like a card number: send a gateway token, not a card number"
)

// NewOrder is what a client asks to create.
type NewOrder struct {
	MerchantReference string
	Amount            Money
	PaymentMethod     string
	Gateway           string
	// Capture is the order's capture mode; empty is CaptureAutomatic.
	Capture CaptureMode
	// Routes, when set instead of PaymentMethod and Gateway, are the
	// gateways the order may be charged on, in order of preference (see
	// route.go).
	Routes []Route
}

// Validate checks every field and returns the first problem as a
// *ValidationError naming the field.
func (n NewOrder) Validate() error {
	if err := checkText("merchant_reference", n.MerchantReference, 1, MaxReferenceLen); err != nil {
		return err
	}
	if err := n.Amount.Validate("amount"); err != nil {
		return err
	}
	if len(n.Routes) > 0 {
		return n.validateRoutes()
	}
	if err := checkText("payment_method", n.PaymentMethod, 1, MaxTokenLen); err != nil {
		return err
	}
	if n.Gateway != "" {
		return checkText("gateway", n.Gateway, 1, MaxGatewayLen)
	}
	return nil
}

// tooLarge refuses an amount past MaxAmountMinor, stating the maximum.
var tooLarge = fmt.Sprintf("is too large: at most %d minor units", int64(MaxAmountMinor))

// Validate checks an amount; field prefixes the field names in errors.
func (m Money) Validate(field string) error {
	if !isCurrency(m.Currency) {
		return &ValidationError{Field: field + ".currency", Reason: "must be an ISO 4217 currency code such as GBP"}
	}
	if m.AmountMinor <= 0 {
		return &ValidationError{Field: field + ".amount_minor", Reason: "must be greater than zero"}
	}
	if m.AmountMinor > MaxAmountMinor {
		return &ValidationError{Field: field + ".amount_minor", Reason: tooLarge}
	}
	return nil
}

// ChargeInput is a client's request to charge an order.
type ChargeInput struct {
	OrderID   string
	RequestID string
	// PaymentMethod, when set, replaces the order's for this attempt.
	PaymentMethod string
	// CustomerPresent says the customer is at the checkout and can act
	// (3-D Secure); otherwise the charge is merchant-initiated.
	CustomerPresent bool
	// ReturnURL, when set, is where the gateway sends the customer back
	// after a redirect.
	ReturnURL string
	// Customer, when set, is the gateway's customer (a Stripe Customer,
	// cus_...) the payment method is saved to. It is kept with the attempt,
	// so that a replay of the attempt's first request carries it again.
	Customer string
	// ActionResult, when set, is what the gateway handed the customer's
	// browser on return from its challenge (Adyen's redirectResult): the
	// call completes the action of the attempt RequestID names (see
	// ActionCompleter). Opaque, and never stored or logged.
	ActionResult string
}

// MaxReturnURLLen bounds a return URL.
const MaxReturnURLLen = 2048

// MaxCustomerLen bounds a customer id: Stripe's ids are far shorter.
const MaxCustomerLen = 255

// Validate checks every field of a charge request.
func (c ChargeInput) Validate() error {
	if err := CheckID("order_id", c.OrderID); err != nil {
		return err
	}
	return c.validateCharge()
}

// validateCharge checks the fields of a charge request but its order id:
// ChargeOrder names an existing order, CreateAndChargeOrder the one it
// creates, and both take the rest alike.
func (c ChargeInput) validateCharge() error {
	if err := CheckRequestID(c.RequestID); err != nil {
		return err
	}
	if c.PaymentMethod != "" {
		if err := checkText("payment_method", c.PaymentMethod, 1, MaxTokenLen); err != nil {
			return err
		}
	}
	if c.ReturnURL != "" {
		if err := checkReturnURL(c.ReturnURL); err != nil {
			return err
		}
	}
	if c.Customer != "" {
		if err := CheckCustomer(c.Customer); err != nil {
			return err
		}
	}
	if c.ActionResult != "" {
		return CheckActionResult(c.ActionResult)
	}
	return nil
}

// checkReturnURL validates where the gateway sends the customer back: an
// absolute https URL with a host, no credentials, no spaces and a port, if
// any, from 1 to 65535. Plain http is for a checkout on this machine only
// (localhost, 127.0.0.0/8, ::1), as in development. The customer's browser
// goes there after 3-D Secure, carrying the payment's outcome.
func checkReturnURL(s string) error {
	if err := checkText("return_url", s, 1, MaxReturnURLLen); err != nil {
		return err
	}
	invalid := func(reason string) error { return &ValidationError{Field: "return_url", Reason: reason} }
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return invalid("must not contain spaces: percent-encode them (%20)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Opaque != "" {
		return invalid("must be an absolute https URL, such as https://shop.example/return")
	}
	if u.User != nil {
		return invalid("must not carry credentials (user:password@)")
	}
	host := u.Hostname()
	if host == "" {
		return invalid("must name a host, such as https://shop.example/return")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid("has a port out of range: a port is 1 to 65535")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return invalid("has an empty port: remove the colon or name a port from 1 to 65535")
	}
	if u.Scheme == "http" && !isLoopback(host) {
		return invalid("must use https: plain http is accepted only for localhost, 127.0.0.0/8 and ::1")
	}
	return nil
}

// isLoopback reports whether host names this machine: localhost or a
// loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckCustomer validates a customer id: a client's text like any other
// (no card number), in a Stripe Customer's shape, cus_ followed by 1 to
// MaxCustomerLen-4 letters and digits. The reason never repeats the value.
func CheckCustomer(id string) error {
	if err := checkText("customer", id, 1, MaxCustomerLen); err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(id, "cus_")
	if !ok || rest == "" || len(id) > MaxCustomerLen {
		return &ValidationError{Field: "customer", Reason: "must be a Stripe Customer id: cus_ followed by letters and digits"}
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; ('0' > c || c > '9') && ('a' > c || c > 'z') && ('A' > c || c > 'Z') {
			return &ValidationError{Field: "customer", Reason: "must be a Stripe Customer id: cus_ followed by letters and digits"}
		}
	}
	return nil
}

// CheckRequestID validates a client's request_id: MinRequestIDLen to
// MaxRequestIDLen characters, not blank, and no card number.
func CheckRequestID(id string) error {
	return checkText("request_id", id, MinRequestIDLen, MaxRequestIDLen)
}

// CheckReason validates a free-text reason of at most MaxReasonLen characters.
func CheckReason(field, s string, required bool) error {
	min := 0
	if required {
		min = 1
	}
	return checkText(field, s, min, MaxReasonLen)
}

// CheckID validates a server-assigned id (a UUID in its canonical form).
func CheckID(field, id string) error {
	if id == "" {
		return &ValidationError{Field: field, Reason: "is required"}
	}
	if !isUUID(id) {
		return &ValidationError{Field: field, Reason: "is not a valid id"}
	}
	return nil
}

// CheckMerchantID validates a merchant id named in a request (an
// operator's): as long as a reference at most, and no card number.
func CheckMerchantID(field, id string) error {
	return checkText(field, id, 1, MaxReferenceLen)
}

// CheckReference validates a merchant reference used as a lookup key.
func CheckReference(field, ref string) error {
	return checkText(field, ref, 1, MaxReferenceLen)
}

// checkText checks length (in characters, not bytes), printable
// characters, blankness, and card numbers. Every client-chosen text field
// of every request goes through it.
func checkText(field, s string, min, max int) error {
	n := utf8.RuneCountInString(s)
	switch {
	case n < min && n == 0:
		return &ValidationError{Field: field, Reason: "is required"}
	case n < min:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("is too short: %d characters, at least %d", n, min)}
	case n > max:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("is too long: %d characters, at most %d", n, max)}
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return &ValidationError{Field: field, Reason: "must contain only printable characters"}
		}
	}
	if min > 0 && strings.TrimSpace(s) == "" {
		return &ValidationError{Field: field, Reason: "must not be blank"}
	}
	if ContainsCardNumber(s) {
		// The reason never repeats the value: it may be a real card number.
		return &ValidationError{Field: field, Reason: cardNumberAdvisory}
	}
	return nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if ('0' > c || c > '9') && ('a' > c || c > 'f') && ('A' > c || c > 'F') {
				return false
			}
		}
	}
	return true
}
