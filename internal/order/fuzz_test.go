package order

import (
	"testing"
	"unicode/utf8"
)

// FuzzValidate checks request validation on arbitrary text: it never
// panics, and anything it accepts is printable, bounded, and no card number.
func FuzzValidate(f *testing.F) {
	f.Add("order-1", "GBP", int64(1250), "tok_ok", "")
	f.Add("4242 4242 4242 4242", "EUR", int64(-1), "tok_ok", "sim")
	f.Add("order\x00", "XXX", int64(1)<<62, "", "refpsp")
	f.Add("ünïcødé", "JPY", int64(1), "tok_\u200b", "stripe")
	f.Fuzz(func(t *testing.T, ref, currency string, amount int64, token, gateway string) {
		n := NewOrder{MerchantReference: ref, Amount: Money{Currency: currency, AmountMinor: amount}, PaymentMethod: token, Gateway: gateway}
		if err := n.Validate(); err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("not a ValidationError: %v", err)
			}
			return
		}
		for _, s := range []string{ref, token, gateway} {
			if !utf8.ValidString(s) || LooksLikeCardNumber(s) || len(s) > MaxReferenceLen {
				t.Fatalf("accepted %q", s)
			}
		}
		if amount <= 0 || amount > MaxAmountMinor || !isCurrency(currency) {
			t.Fatalf("accepted amount %d %q", amount, currency)
		}
	})
}
