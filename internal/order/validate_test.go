package order

import (
	"errors"
	"regexp"
	"strconv"
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
		// Card numbers, as people write them.
		{"4242424242424242", true},
		{"4242 4242 4242 4242", true},
		{"4242-4242-4242-4242", true},
		{"4242.4242.4242.4242", true},
		{"card 5555555555554444 ok", true},
		{"card: 4242424242424242", true},
		{"card:4242424242424242", true},
		{"#4242424242424242", true},
		{"(4242 4242 4242 4242)", true},
		{"my card is 4242424242424242.", true},
		{"cus_4242424242424242", true}, // an underscore joins no identifier
		{"tok_4242424242424242", true},
		{"https://shop.example/r?pan=4242424242424242", true},
		{"https://shop.example/orders/4242424242424242", true},
		{"378282246310005", true},     // 15-digit Amex
		{"3782 822463 10005", true},   // Amex's groups
		{"3622-720627-1667", true},    // Diners' 14 digits, its groups
		{"36227206271667", true},      // Diners, 14 digits
		{"6011000990139424", true},    // Discover
		{"2223003122003222", true},    // Mastercard's 2-series
		{"6205500000000000004", true}, // 19-digit UnionPay
		{"6205 5000 0000 0000 004", true},
		{"4242424242424242 12/28", true},
		{"4242424242424242 1228 123", true},
		{"12/28 4242 4242 4242 4242 cvc 123", true},
		{"4242 4242 4242 4242 4242", true}, // five groups hold four
		{"1234 4242 4242 4242 4242", true},
		{"20261130 4242 4242 4242 4242", true},
		{"ref 4111-1111-1111-1111", true},
		{"\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12", true}, // fullwidth
		{"\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662\u0664\u0662", true}, // Arabic-Indic
		{"4242\u00a04242\u00a04242\u00a04242", true},                                                               // a no-break space
		// Part of a longer identifier.
		{"ORD-4242424242424242", false},
		{"order-20261130-4242424242424242", false},
		{"4242424242424242-1228", false},
		{"x4242424242424242x", false},
		{"ORD4242424242424242", false},
		{"9" + "4242424242424242" + "9", false}, // an 18-digit number no brand issues
		{"42424242424242420000", false},         // 20 digits
		{"+4242424242424242", false},            // a phone number
		{"ORD-4242-4242-4242-4242", false},
		// Not written as a card is.
		{"4242 4242-4242 4242", false}, // two separators
		{"4242/4242/4242/4242", false},
		{"4242  4242  4242  4242", false},
		{"4242_4242_4242_4242", false},
		{"42424 24242 424242", false},
		{"4242x4242x4242x4242", false},
		// No brand's number, or no Luhn.
		{"1234567890123456", false},
		{"1234567812345678", false},
		{"4242424242424241", false},
		{"0000000000000000", false},
		{"1111 1111 1111 1111", false},
		{"4222222222222", false}, // 13 digits are never taken for a card
		{"424242424242", false},
		// Merchant references.
		{"order-20261130-000123", false},
		{"2026-11-30 12:00:00 #12345", false},
		{"112-3456789-0123456", false},
		{"order-2024-0001", false},
		{"tok_visa", false},
		{"", false},
		{"order-1f3e9a40-7c1b-4d2e-9b3a-0c5d6e7f8a9b", false},
		{"23aedba1-4230-4518-8635-5565379e01b0", false},
		{"saved-23aedba1-4230-4518-8635-5565379e01b0", false},
		{"23AEDBA1-4230-4518-8635-5565379E01B0", false},
		// A card beside a UUID is still a card.
		{"23aedba1-4230-4518-8635-5565379e01b0 4242 4242 4242 4242", true},
		{"1234567890123", false},
		// An IBAN printed in fours holds groups like a card's.
		{"refund to DE89 3704 0044 0532 0130 00", false},
		{"FR40 5180 3824 0813 4061 4963 277", false},
		{"IT60 X054 2811 1010 0000 0123 456", false},
		{"de89 4242 4242 4242 4242", false},
		{"DE89 3704 0044 0532 0130 00 4242 4242 4242 4242", true}, // the IBAN ends at its short group
		{"DE89 3704 0044 0532 0130 00, card 4242 4242 4242 4242", true},
		{"DE89-4242-4242-4242-4242", false},
		{"DE8 4242 4242 4242 4242", true},
		{"XDE89 4242 4242 4242 4242", true},
	} {
		if got := ContainsCardNumber(tt.s); got != tt.want {
			t.Errorf("ContainsCardNumber(%q) = %v, want %v", tt.s, got, tt.want)
		}
		if got := bruteForceCard(tt.s); got != tt.want {
			t.Errorf("the brute force says %v for %q, want %v", got, tt.s, tt.want)
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
// the tests: with Unicode digits read as ASCII, every substring of at most
// 23 characters that is a card number written as a card is (all digits, or
// one of the groupings with one separator, spelled as regular
// expressions), with nothing touching it that makes it part of an
// identifier.
func bruteForceCard(s string) bool {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsDigit(r) {
			r = '0' + r - nearestZero(r)
		}
		b.WriteRune(r)
	}
	rs := []rune(b.String())
	joins := func(i int, dir int) bool {
		in := func(i int) bool { return 0 <= i && i < len(rs) }
		word := func(i int) bool { return in(i) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i])) }
		if !in(i) {
			return false
		}
		return word(i) || (dir < 0 && rs[i] == '+') || (rs[i] == '-' && word(i+dir))
	}
	for i := range rs {
		for j := i + 14; j <= len(rs) && j <= i+23; j++ {
			w := string(rs[i:j])
			if joins(i-1, -1) || joins(j, +1) || !writtenAsCard.MatchString(w) {
				continue
			}
			if k := strings.IndexFunc(w, func(r rune) bool { return r < '0' || r > '9' }); k >= 0 {
				sep := regexp.QuoteMeta(string([]rune(w[k:])[0]))
				iban := regexp.MustCompile(`(?:^|[^\p{L}\p{Nd}])[A-Za-z]{2}[0-9]{2}(?:` + sep + `[\p{L}\p{Nd}]{4})*` + sep + `$`)
				if iban.MatchString(string(rs[:i])) {
					continue
				}
			}
			d := strings.Map(func(r rune) rune {
				if '0' <= r && r <= '9' {
					return r
				}
				return -1
			}, w)
			if bruteBrand(d) && bruteLuhn(d) {
				return true
			}
		}
	}
	return false
}

// writtenAsCard is how a card number is written: 14 to 19 digits, or the
// groups with one separator (a dash, a dot, a space character).
var writtenAsCard = func() *regexp.Regexp {
	var alts []string
	for _, sep := range []string{`-`, `\.`, `\s`} {
		for _, g := range []string{"4 4 4 4", "4 6 5", "4 6 4", "4 4 4 4 1", "4 4 4 4 2", "4 4 4 4 3"} {
			var parts []string
			for _, n := range strings.Fields(g) {
				parts = append(parts, `[0-9]{`+n+`}`)
			}
			if sep == `\s` {
				// One space character, the same throughout.
				for sp := rune(0); sp <= unicode.MaxRune; sp++ {
					if unicode.IsSpace(sp) {
						alts = append(alts, strings.Join(parts, regexp.QuoteMeta(string(sp))))
					}
				}
				continue
			}
			alts = append(alts, strings.Join(parts, sep))
		}
	}
	return regexp.MustCompile(`^(?:[0-9]{14,19}|` + strings.Join(alts, "|") + `)$`)
}()

// bruteBrand is cardBrands as a table of prefixes and lengths, read the
// slow way.
func bruteBrand(d string) bool {
	n := func(k int) int { v, _ := strconv.Atoi(d[:k]); return v }
	in := func(k, lo, hi int) bool { return lo <= n(k) && n(k) <= hi }
	l := len(d)
	switch {
	case d[0] == '4' && (l == 13 || l == 16 || l == 19):
		return true
	case (in(2, 51, 55) || in(4, 2221, 2720)) && l == 16:
		return true
	case (d[:2] == "34" || d[:2] == "37") && l == 15:
		return true
	case (d[:4] == "6011" || in(3, 644, 649) || d[:2] == "65" || in(6, 622126, 622925) || in(4, 3528, 3589) || d[:2] == "62") && l >= 16 && l <= 19:
		return true
	case (in(3, 300, 305) || d[:2] == "36" || in(2, 38, 39)) && l >= 14 && l <= 19:
		return true
	case (d[:2] == "50" || in(2, 56, 69)) && l >= 12 && l <= 19:
		return true
	}
	return false
}

func bruteLuhn(d string) bool {
	sum := 0
	for j := range d {
		v := int(d[len(d)-1-j] - '0')
		if j%2 == 1 {
			v = v * 2
			if v > 9 {
				v = v/10 + v%10
			}
		}
		sum += v
	}
	return sum%10 == 0
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

// TestReturnURL: the gateway sends the customer's browser to return_url
// after 3-D Secure, so it must name a host, over https unless the checkout
// runs on this machine, and each refusal says what to do.
func TestReturnURL(t *testing.T) {
	for _, tt := range []struct {
		url    string
		reason string // a part of the reason; "" if accepted
	}{
		{"https://shop.example/return?order=1", ""},
		{"https://shop.example:8443/return", ""},
		{"https://[2001:db8::1]:443/return", ""},
		{"http://localhost:8080/return", ""},
		{"http://LOCALHOST/return", ""},
		{"http://127.0.0.1:3000/return", ""},
		{"http://127.8.9.10/return", ""},
		{"http://[::1]:3000/return", ""},
		{"https://shop.example/return?q=a%20b", ""},
		{"https://", "must name a host"},
		{"https:///return", "must name a host"},
		{"https://:443/return", "must name a host"},
		{"https://shop.example:99999/return", "port out of range"},
		{"https://shop.example:0/return", "port out of range"},
		{"https://shop.example:/return", "empty port"},
		{"https://shop.example/re turn", "must not contain spaces"},
		{"https://shop.example/return ", "must not contain spaces"},
		{" https://shop.example/return", "must not contain spaces"},
		{"http://shop.example/return", "must use https"},
		{"http://10.0.0.1/return", "must use https"},
		{"http://localhost.shop.example/return", "must use https"},
		{"http://128.0.0.1/return", "must use https"},
		{"https://user:pw@shop.example/return", "credentials"},
		{"javascript:alert(1)", "absolute https URL"},
		{"/relative/return", "absolute https URL"},
		{"ftp://shop.example/return", "absolute https URL"},
		{"https:shop.example", "absolute https URL"},
	} {
		err := ChargeInput{OrderID: NewID(), RequestID: "request-1", ReturnURL: tt.url}.Validate()
		var v *ValidationError
		switch {
		case tt.reason == "" && err != nil:
			t.Errorf("return_url %q: %v, want accepted", tt.url, err)
		case tt.reason != "" && (!errors.As(err, &v) || v.Field != "return_url" || !strings.Contains(v.Reason, tt.reason)):
			t.Errorf("return_url %q: %v, want return_url %s", tt.url, err, tt.reason)
		}
	}
}

// TestActionResult checks what an action result may be: a gateway's text
// as it came back (Adyen's redirectResult, URL-decoded or not, base64 and
// base64url) passes, even with long runs of digits between its letters;
// spaces, other characters, a bare card number and too much do not, and
// no reason repeats the value.
func TestActionResult(t *testing.T) {
	for _, tt := range []struct {
		s  string
		ok bool
	}{
		{"X6XtfGC3!Y...", true},
		{"X6XtfGC3%21Y...", true},
		{"Ab02b4c0!BQABAgCW5sxB4e/Ww6HDbQiI8oZ7NBCEV7+gq2aMKP+hHuTXlEbcTu0Fx7r2/MtzCG2A==", true},
		{"eyJ0cmFuc1N0YXR1cyI6IlkifQ_-~*", true},
		{"Ab4242424242424242cd", true}, // digits in a token, not a card
		{"cdf0d8ba", true},
		{"", false},
		{"Ab12 cd", false},
		{"Ab12\ncd", false},
		{"Ab12&cd=1", false},
		{"Äb12", false},
		{"4242424242424242", false},
		{"card=4242424242424242", false},
		{strings.Repeat("A", MaxActionResultLen), true},
		{strings.Repeat("A", MaxActionResultLen+1), false},
	} {
		err := CheckActionResult(tt.s)
		var v *ValidationError
		if (err == nil) != tt.ok || (err != nil && (!errors.As(err, &v) || v.Field != "action_result")) {
			t.Errorf("CheckActionResult(%.40q) = %v, want ok %t, an action_result error otherwise", tt.s, err, tt.ok)
		}
		if err != nil && tt.s != "" && strings.Contains(err.Error(), tt.s) {
			t.Errorf("CheckActionResult(%.40q) repeats the value: %v", tt.s, err)
		}
	}
	in := ChargeInput{OrderID: "01a2354f-3472-7d0f-aa7d-ffa5c97e27f3", RequestID: "req-12345678", ActionResult: "Ab12 cd"}
	if err := in.Validate(); err == nil {
		t.Error("ChargeInput.Validate took a bad action result")
	}
}
