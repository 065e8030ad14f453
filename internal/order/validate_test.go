package order

import "testing"

func TestLooksLikeCardNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"4242424242424242":         true,
		"4242 4242 4242 4242":      true,
		"4242-4242-4242-4242":      true,
		"card 5555555555554444 ok": true,
		"378282246310005":          true,  // 15-digit Amex
		"4242424242424241":         false, // fails Luhn
		"424242424242":             false, // 12 digits
		"order-2024-0001":          false,
		"tok_visa":                 false,
		"12345678901234567890123":  false, // too long to be a card
	} {
		if got := LooksLikeCardNumber(s); got != want {
			t.Errorf("LooksLikeCardNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestMoneyValidate(t *testing.T) {
	for _, tt := range []struct {
		m     Money
		field string
	}{
		{Money{"GBP", 1}, ""},
		{Money{"JPY", MaxAmountMinor}, ""},
		{Money{"GBP", 0}, "amount.amount_minor"},
		{Money{"GBP", MaxAmountMinor + 1}, "amount.amount_minor"},
		{Money{"gbp", 1}, "amount.currency"},
		{Money{"XXX", 1}, "amount.currency"},
		{Money{"", 1}, "amount.currency"},
	} {
		err := tt.m.Validate("amount")
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%v: %v", tt.m, err)
		case tt.field != "" && (err == nil || err.(*ValidationError).Field != tt.field):
			t.Errorf("%v: got %v, want an error on %s", tt.m, err, tt.field)
		}
	}
}
