package order

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/google/uuid"
)

func TestContainsCardNumber(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		// Card numbers, however they are written.
		{"4242424242424242", true},
		{"4242 4242 4242 4242", true},
		{"4242-4242-4242-4242", true},
		{"4242.4242.4242.4242", true},
		{"4242/4242/4242/4242", true},
		{"4242 - 4242 - 4242 - 4242", true},
		{"4242_4242_4242_4242", true},
		{"(4242) 4242, 4242; 4242", true},
		{"card 5555555555554444 ok", true},
		{"378282246310005", true},     // 15-digit Amex
		{"3782 822463 10005", true},   // Amex grouping
		{"6011000990139424", true},    // Discover
		{"4000056655665556", true},    // 16 digits
		{"4222222222222", true},       // 13-digit Visa
		{"6304000000000000018", true}, // 19-digit Maestro
		{"1234567890123456", true},    // not a card, but a 13-digit window passes Luhn: a false positive
		{"4242424242424242 1228 123", true},
		{"4242424242424242-1228", true},
		{"4242424242424242-12/28-123", true},
		{"order-20261130-4242424242424242", true},
		{"20261130 4242 4242 4242 4242", true},
		{"ref 4111-1111-1111-1111", true},
		{"x4242424242424242x", true},
		{"9" + "4242424242424242" + "9", true}, // digits around a card
		{"\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12", true}, // fullwidth
		{"\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662", true}, // Arabic-Indic
		{"4242\u0664\u0662\u0664\u0662 4242 \uff14\uff12\uff14\uff12", true},                                       // mixed scripts
		{"\U0001d7fa\U0001d7f8\U0001d7fa\U0001d7f8" + "424242424242", true},                                        // mathematical monospace digits
		{"4242\u00a04242\u20034242\t4242", true},                                                                   // any space separates nothing
		// Not card numbers.
		{"1234567812345678", false}, // no window passes Luhn
		{"1111 1111 1111 1111", false},
		{"order-20261130-000123", false},
		{"2026-11-30 12:00:00 #12345", false},
		{"424242424242", false}, // 12 digits
		{"4242x4242x4242x4242", false},
		{"4242a4242b4242c4242", false},
		{"order-2024-0001", false},
		{"tok_visa", false},
		{"", false},
		{"order-1f3e9a40-7c1b-4d2e-9b3a-0c5d6e7f8a9b", false},
		{"0000000000000000000000000", true}, // zeros pass Luhn: refused, a documented false positive
		// UUIDs whose digit groups joined across the hyphens pass Luhn
		// (about one UUIDv4 in 140): a UUID is read as a letter.
		{"23aedba1-4230-4518-8635-5565379e01b0", false},
		{"saved-23aedba1-4230-4518-8635-5565379e01b0", false},
		{"23AEDBA1-4230-4518-8635-5565379E01B0", false},
		// A card beside a UUID, or ending in what looks like a UUID's
		// tail, is still a card.
		{"23aedba1-4230-4518-8635-5565379e01b0 4242 4242 4242 4242", true},
		{"4242424242424242-4230-4518-8635-5565379e01b0", true},
		{"1234567890123", false},
	} {
		if got := ContainsCardNumber(tt.s); got != tt.want {
			t.Errorf("ContainsCardNumber(%q) = %v, want %v", tt.s, got, tt.want)
		}
		if got := bruteForceCard(tt.s); got != tt.want {
			t.Errorf("the brute force says %v for %q, want %v", got, tt.s, tt.want)
		}
	}
}

// TestCardNumberRefusedInEveryField checks that every client-chosen text
// field of every request refuses a card number, without echoing it.
func TestCardNumberRefusedInEveryField(t *testing.T) {
	const pan = "order-20261130-4242424242424242"
	ok := NewOrder{MerchantReference: "order-1", Amount: Money{"GBP", 100}, PaymentMethod: "tok_ok"}
	id := NewID()
	for _, tt := range []struct {
		field string
		err   error
	}{
		{"merchant_reference", func() error { n := ok; n.MerchantReference = pan; return n.Validate() }()},
		{"payment_method", func() error { n := ok; n.PaymentMethod = pan; return n.Validate() }()},
		{"gateway", func() error { n := ok; n.Gateway = "4242424242424242"; return n.Validate() }()},
		{"request_id", ChargeInput{OrderID: id, RequestID: pan}.Validate()},
		{"payment_method", ChargeInput{OrderID: id, RequestID: "request-1", PaymentMethod: pan}.Validate()},
		{"request_id", CheckRequestID(pan)},
		{"reason", CheckReason("reason", pan, false)},
		{"merchant_reference", CheckReference("merchant_reference", pan)},
	} {
		var v *ValidationError
		if !errors.As(tt.err, &v) || v.Field != tt.field || v.Reason != cardNumberAdvisory || strings.Contains(v.Error(), "4242") {
			t.Errorf("%s with a card number: %v, want the card number advisory", tt.field, tt.err)
		}
	}
}

func TestRequestIDLengthInCharacters(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"request1", true},
		{"ééééééé", false},  // 7 characters, 14 bytes
		{"éééééééé", true},  // 8 characters
		{"        ", false}, // blank
		{"\u3000\u3000\u3000\u3000\u3000\u3000\u3000\u3000", false}, // ideographic spaces
		{" request-1 ", true},
		{strings.Repeat("é", MaxRequestIDLen), true},
		{strings.Repeat("é", MaxRequestIDLen+1), false},
	} {
		err := CheckRequestID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("CheckRequestID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}

// maskUUIDs is the brute force's reading of the UUID rule, written apart
// from uuidShape: every 36 bytes that uuid.Parse reads as a canonical UUID,
// with no letter, digit or underscore on either side, become one letter.
func maskUUIDs(s string) string {
	word := func(i int) bool {
		if i < 0 || i >= len(s) {
			return false
		}
		c := rune(s[i])
		return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c)
	}
	for i := 0; i+36 <= len(s); i++ {
		if u := s[i : i+36]; strings.Count(u, "-") == 4 && u[8] == '-' && !word(i-1) && !word(i+36) {
			if _, err := uuid.Parse(u); err == nil {
				s = s[:i] + "u" + s[i+36:]
			}
		}
	}
	return s
}

// TestDigitValue checks what digitValue rests on: every range of
// unicode.Nd is a whole number of runs of ten digits, zero first.
func TestDigitValue(t *testing.T) {
	check := func(lo, hi, stride uint32) {
		if stride != 1 || (hi-lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x stride %d is not runs of ten", lo, hi, stride)
		}
		for r := lo; r <= hi; r++ {
			if got, want := digitValue(rune(r)), byte((r-lo)%10); got != want || !unicode.IsDigit(rune(r)) {
				t.Errorf("digitValue(%U) = %d, want %d", r, got, want)
			}
		}
	}
	for _, rg := range unicode.Nd.R16 {
		check(uint32(rg.Lo), uint32(rg.Hi), uint32(rg.Stride))
	}
	for _, rg := range unicode.Nd.R32 {
		check(rg.Lo, rg.Hi, rg.Stride)
	}
}

// bruteForceCard is ContainsCardNumber written the slow, obvious way, for
// the tests: split s into digit sequences at letters, normalize the digits,
// and try every window of 13 to 19 digits with a plain Luhn check.
func bruteForceCard(s string) bool {
	s = maskUUIDs(s)
	var seqs [][]int
	var cur []int
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			cur = append(cur, int(r-nearestZero(r)))
		case unicode.IsLetter(r):
			seqs = append(seqs, cur)
			cur = nil
		}
	}
	seqs = append(seqs, cur)
	for _, d := range seqs {
		for i := range d {
			for k := 13; k <= 19 && i+k <= len(d); k++ {
				w := d[i : i+k]
				sum := 0
				for j := range w {
					v := w[len(w)-1-j]
					if j%2 == 1 {
						v = v * 2
						if v > 9 {
							v = v/10 + v%10
						}
					}
					sum += v
				}
				if sum%10 == 0 {
					return true
				}
			}
		}
	}
	return false
}

// nearestZero finds the zero of a decimal digit's run: the first digit of
// the unbroken run of Nd characters r is in, counted in tens from there.
func nearestZero(r rune) rune {
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return start + (r-start)/10*10
}

// TestUUIDsAreNotCardNumbers: checkouts often use UUIDs as request ids and
// references, and none may be refused as a card number.
func TestUUIDsAreNotCardNumbers(t *testing.T) {
	for range 100000 {
		for _, u := range []string{uuid.NewString(), uuid.Must(uuid.NewV7()).String()} {
			if ContainsCardNumber(u) || ContainsCardNumber("req-"+u) {
				t.Fatalf("%s is read as a card number", u)
			}
		}
	}
}
