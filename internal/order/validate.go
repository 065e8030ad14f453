package order

import (
	"strings"
	"unicode"
)

// Limits on request fields.
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

// Validate checks an amount; field prefixes the field names in errors.
func (m Money) Validate(field string) error {
	if !isCurrency(m.Currency) {
		return &ValidationError{Field: field + ".currency", Reason: "must be an ISO 4217 currency code such as GBP"}
	}
	if m.AmountMinor <= 0 {
		return &ValidationError{Field: field + ".amount_minor", Reason: "must be greater than zero"}
	}
	if m.AmountMinor > MaxAmountMinor {
		return &ValidationError{Field: field + ".amount_minor", Reason: "is too large"}
	}
	return nil
}

// ChargeInput is a client's request to charge an order.
type ChargeInput struct {
	OrderID   string
	RequestID string
	// PaymentMethod, when set, replaces the order's for this attempt.
	PaymentMethod string
}

// Validate checks every field of a charge request.
func (c ChargeInput) Validate() error {
	if err := CheckID("order_id", c.OrderID); err != nil {
		return err
	}
	if err := checkText("request_id", c.RequestID, MinRequestIDLen, MaxRequestIDLen); err != nil {
		return err
	}
	if c.PaymentMethod != "" {
		return checkText("payment_method", c.PaymentMethod, 1, MaxTokenLen)
	}
	return nil
}

// CheckReason validates a free-text reason of at most MaxReasonLen bytes.
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

// CheckReference validates a merchant reference used as a lookup key.
func CheckReference(field, ref string) error {
	return checkText(field, ref, 1, MaxReferenceLen)
}

// checkText checks length, printable characters, and card numbers.
func checkText(field, s string, min, max int) error {
	switch {
	case len(s) < min && len(s) == 0:
		return &ValidationError{Field: field, Reason: "is required"}
	case len(s) < min:
		return &ValidationError{Field: field, Reason: "is too short"}
	case len(s) > max:
		return &ValidationError{Field: field, Reason: "is too long"}
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return &ValidationError{Field: field, Reason: "must contain only printable characters"}
		}
	}
	if LooksLikeCardNumber(s) {
		return &ValidationError{Field: field, Reason: cardNumberAdvisory}
	}
	return nil
}

// LooksLikeCardNumber reports whether s holds a run of 13 to 19 digits,
// optionally grouped by single spaces or dashes, that passes the Luhn check.
func LooksLikeCardNumber(s string) bool {
	var digits []byte
	flush := func() bool {
		ok := len(digits) >= minCardDigits && len(digits) <= maxCardDigits && luhn(digits)
		digits = digits[:0]
		return ok
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
		case (c == ' ' || c == '-') && len(digits) > 0 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			// A separator inside a group of digits: keep collecting.
		default:
			if flush() {
				return true
			}
		}
	}
	return flush()
}

func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
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
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// isCurrency reports whether code is an active ISO 4217 alphabetic code.
func isCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	return strings.Contains(iso4217, " "+code+" ")
}

// iso4217 holds the active ISO 4217 alphabetic currency codes.
const iso4217 = " AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN BWP BYN BZD" +
	" CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP" +
	" GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR" +
	" LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP" +
	" PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP" +
	" TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD" +
	" XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL "
