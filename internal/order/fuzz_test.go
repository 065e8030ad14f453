package order

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzValidate checks request validation on arbitrary text: it never
// panics, and anything it accepts is printable, bounded, and holds no card
// number. The card number property is checked by bruteForceCard, written
// independently of ContainsCardNumber: no accepted string has a substring
// written as a card number is (contiguous or in a card's groups, after
// normalizing Unicode digits), standing alone, that is a brand's number
// and passes Luhn.
func FuzzValidate(f *testing.F) {
	f.Add("order-1", "GBP", int64(1250), "tok_ok", "", "request-1", "")
	f.Add("4242 4242 4242 4242", "EUR", int64(-1), "tok_ok", "sim", "request-1", "")
	f.Add("order\x00", "XXX", int64(1)<<62, "", "refpsp", "", "")
	f.Add("ünïcødé", "JPY", int64(1), "tok_\u200b", "stripe", "ééééééé", "a reason")
	f.Add("order-20261130-4242424242424242", "GBP", int64(1), "tok_ok", "", "4242424242424242-1228", "4242424242424242 1228 123")
	f.Add("ORD-4242424242424242", "GBP", int64(1), "cus_4242424242424242", "", "card: 4242 4242 4242 4242 12/28", "DE89 3704 0044 0532 0130 00")
	f.Add("order-20261130-000123", "GBP", int64(1), "tok_ok", "", "\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12\uff14\uff12", "        ")
	f.Fuzz(func(t *testing.T, ref, currency string, amount int64, token, gateway, requestID, reason string) {
		accepted := func(s string) {
			t.Helper()
			if !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxReasonLen || bruteForceCard(s) {
				t.Fatalf("accepted %q", s)
			}
		}
		n := NewOrder{MerchantReference: ref, Amount: Money{Currency: currency, AmountMinor: amount}, PaymentMethod: token, Gateway: gateway}
		if err := n.Validate(); err != nil {
			if v := (*ValidationError)(nil); !errors.As(err, &v) {
				t.Fatalf("not a ValidationError: %v", err)
			}
		} else {
			for _, s := range []string{ref, token, gateway} {
				accepted(s)
				if utf8.RuneCountInString(s) > MaxReferenceLen {
					t.Fatalf("accepted %q", s)
				}
			}
			if amount <= 0 || amount > MaxAmountMinor || !isCurrency(currency) {
				t.Fatalf("accepted amount %d %q", amount, currency)
			}
		}
		if CheckRequestID(requestID) == nil {
			accepted(requestID)
			if utf8.RuneCountInString(requestID) < MinRequestIDLen {
				t.Fatalf("accepted request id %q", requestID)
			}
		}
		if CheckReason("reason", reason, false) == nil {
			accepted(reason)
		}
		if CheckReference("merchant_reference", ref) == nil {
			accepted(ref)
		}
	})
}
