package order

import (
	"fmt"
	"net/url"
	"regexp"
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
	maxCardDigits      = 19
	minCardDigits      = 13
	cardNumberAdvisory = "looks like a card number: send a gateway token, not a card number"
)

// NewOrder is what a client asks to create.
type NewOrder struct {
	MerchantReference string
	Amount            Money
	PaymentMethod     string
	Gateway           string
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
		if err := checkText("return_url", c.ReturnURL, 1, MaxReturnURLLen); err != nil {
			return err
		}
		u, err := url.Parse(c.ReturnURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			return &ValidationError{Field: "return_url", Reason: "must be an absolute http or https URL without credentials"}
		}
	}
	if c.Customer != "" {
		return CheckCustomer(c.Customer)
	}
	return nil
}

// CheckCustomer validates a customer id: a Stripe Customer's shape, cus_
// followed by 1 to MaxCustomerLen-4 letters and digits. The reason never
// repeats the value.
func CheckCustomer(id string) error {
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

// ContainsCardNumber reports whether s holds what may be a primary account
// number: 13 to 19 consecutive digits that pass the Luhn check, anywhere in
// s, after these rules are applied.
//
//   - A digit is any Unicode decimal digit (category Nd: ASCII, Arabic-Indic,
//     fullwidth, ...), read as its value 0-9.
//   - A letter (any Unicode letter) ends a sequence of digits: "4242x4242"
//     is two numbers. Letters between the groups of a card number are not
//     how anyone writes one by mistake, and UUIDs, tokens and hex strings,
//     which mix letters and digits, would otherwise often look like cards.
//   - Anything else (spaces, dashes, dots, slashes, other punctuation and
//     symbols, however many) separates nothing: "4242 4242-4242.4242" is
//     the 16 digits 4242424242424242.
//   - A UUID in its canonical form (8-4-4-4-12 hex digits) is read as one
//     letter. No one writes a card number in those groups, but by the rule
//     above a UUID's digit groups join across its hyphens, and about one
//     UUIDv4 in 140 would pass as a card: a checkout that uses UUIDs as
//     request ids would see 0.7% of its charges refused.
//   - Every window of 13 to 19 digits of a sequence is checked, not only
//     the whole sequence, so digits before or after a card number hide
//     nothing ("order-20261130-4242424242424242", "4242424242424242 1228").
//
// The price is false positives: one window in ten passes Luhn by chance, so
// a reference holding 13 or more digits with no letter among them (a
// timestamp and a counter, say) is often refused. Such a request gets
// INVALID_ARGUMENT saying the field looks like a card number, without the
// value; a client fixes it by putting a letter between its numbers. A card
// number that reached the database, a gateway or a log would cost far more.
func ContainsCardNumber(s string) bool {
	if strings.Count(s, "-") >= 4 {
		s = uuidShape.ReplaceAllLiteralString(s, "u")
	}
	// digits holds the current sequence, most recent last; only its last
	// maxCardDigits digits matter to the windows that end at a new digit.
	var digits [maxCardDigits]byte
	n := 0
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			if n == len(digits) {
				copy(digits[:], digits[1:])
				n--
			}
			digits[n] = digitValue(r)
			n++
			if luhnWindowEndsAt(digits[:n]) {
				return true
			}
		case unicode.IsLetter(r):
			n = 0
		}
	}
	return false
}

// uuidShape matches a UUID in its canonical form, which ContainsCardNumber
// reads as a letter. It must stand alone (\b): the last eight digits of a
// card number followed by "-1234-…" are not a UUID's first group.
var uuidShape = regexp.MustCompile(`\b[[:xdigit:]]{8}-[[:xdigit:]]{4}-[[:xdigit:]]{4}-[[:xdigit:]]{4}-[[:xdigit:]]{12}\b`)

// luhnWindowEndsAt reports whether a suffix of d of 13 to 19 digits passes
// the Luhn check. Luhn doubles every second digit counted from the right,
// so one pass from the end computes the sums of every suffix.
func luhnWindowEndsAt(d []byte) bool {
	if len(d) < minCardDigits {
		return false
	}
	sum := 0
	for k := 1; k <= len(d); k++ {
		v := int(d[len(d)-k])
		if k%2 == 0 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		if k >= minCardDigits && sum%10 == 0 {
			return true
		}
	}
	return false
}

// digitValue returns the value of a Unicode decimal digit. Unicode assigns
// the decimal digits of every script in runs of ten, zero first, and the
// ranges of unicode.Nd start at a zero (TestDigitValue checks both).
func digitValue(r rune) byte {
	if '0' <= r && r <= '9' {
		return byte(r - '0')
	}
	for _, rg := range unicode.Nd.R16 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); lo <= r && r <= hi {
			return byte((r - lo) % 10)
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); lo <= r && r <= hi {
			return byte((r - lo) % 10)
		}
	}
	return 0
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
