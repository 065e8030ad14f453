package order

import (
	"fmt"
	"strings"
)

// NoMinorUnit is the exponent of a currency that has no minor unit in ISO
// 4217 (precious metals, fund codes such as XDR): an amount in it is counted
// in whole units.
const NoMinorUnit = -1

// currencyExponents is the one table of currency exponents: for each active
// ISO 4217 alphabetic code, how many decimal places its minor unit has (JPY
// 0, GBP 2, KWD 3). An order's amount is in the minor units this table
// gives; a gateway whose units differ (Stripe counts ISK in hundredths, and
// MGA in whole ariary) converts from it and refuses what it cannot carry.
var currencyExponents = exponentTable(map[int]string{
	0: "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF",
	2: "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD " +
		"BTN BWP BYN BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUC CUP CVE CZK DKK DOP DZD " +
		"EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR " +
		"IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP " +
		"MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN " +
		"QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL " +
		"THB TJS TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR " +
		"ZMW ZWG ZWL",
	3:           "BHD IQD JOD KWD LYD OMR TND",
	4:           "CLF UYW",
	NoMinorUnit: "XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU XUA",
})

func exponentTable(byExponent map[int]string) map[string]int {
	t := make(map[string]int)
	for exp, codes := range byExponent {
		for _, c := range strings.Fields(codes) {
			t[c] = exp
		}
	}
	return t
}

// CurrencyExponent returns the number of decimal places of code's minor unit
// (NoMinorUnit for a currency without one), and false when code is not an
// active ISO 4217 alphabetic code (upper case).
func CurrencyExponent(code string) (int, bool) {
	exp, ok := currencyExponents[code]
	return exp, ok
}

// isCurrency reports whether code is an active ISO 4217 alphabetic code.
func isCurrency(code string) bool {
	_, ok := currencyExponents[code]
	return ok
}

// String writes m for a person: in the currency's units, with the minor
// units beside them, as "7.50 GBP (750 minor units)"; a currency with no
// minor unit (JPY, XAU) or an unknown code shows its count alone, as
// "750 JPY".
func (m Money) String() string {
	exp, ok := CurrencyExponent(m.Currency)
	if !ok || exp <= 0 {
		return fmt.Sprintf("%d %s", m.AmountMinor, m.Currency)
	}
	sign, n := "", m.AmountMinor
	if n < 0 {
		sign, n = "-", -n
	}
	unit := int64(1)
	for range exp {
		unit *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s (%d minor units)", sign, n/unit, exp, n%unit, m.Currency, m.AmountMinor)
}
