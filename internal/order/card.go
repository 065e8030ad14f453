package order

import (
	"slices"
	"unicode"
)

// ContainsCardNumber reports whether s holds a card number written the way
// a person writes one, anywhere in s: in a sentence, beside an expiry date,
// after "card: ". docs/card-numbers.md tells the rule, why, and what it
// costs, with the rates measured on card numbers and on merchant references.
//
// A candidate is the digits of either
//
//   - one whole run of 14 to 19 digits ("4242424242424242"), or
//   - whole runs of digits in a card's groups with one separator throughout:
//     4-4-4-4 (16 digits), 4-6-5 (Amex, 15), 4-6-4 (Diners, 14), or
//     4-4-4-4-1 to 4-4-4-4-3 (17 to 19); the separator is a dash, a dot or
//     a space ("4242 4242 4242 4242", "3782-822463-10005").
//
// A digit is any Unicode decimal digit (category Nd), read as its value: a
// number typed on a fullwidth keyboard is the same number. A candidate is a
// card number if its digits are a brand's (IIN range and length, see
// cardBrands) and pass the Luhn check, unless it is part of a longer
// identifier, which it is when
//
//   - a letter or a digit touches either end ("ORD4242…", "…4242x"),
//   - or a dash joins it to a letter or digit on either side
//     ("ORD-4242424242424242", "20261201-4242424242424242"),
//   - or a plus sign stands right before it (a phone number: "+4930…").
//
// Nor is it a card number when its groups continue an IBAN printed in
// fours (see inIBAN). Anything else beside it leaves it a card number: a
// space, a colon, an underscore, a slash, "#", "=", a bracket, the full
// stop that ends a sentence. So "card: 4242424242424242", "cus_4242424242424242" and
// "4242 4242 4242 4242 12/28" are card numbers.
//
// A run of 12 or 13 digits is never taken for a card, although Maestro and
// Visa once issued such numbers: 13 digits is the length of Shopify's order
// ids and of millisecond timestamps, and one in forty of those would be
// refused.
func ContainsCardNumber(s string) bool {
	rs := []rune(s)
	var runs []span
	for i := 0; i < len(rs); {
		if !unicode.IsDigit(rs[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(rs) && unicode.IsDigit(rs[j]) {
			j++
		}
		runs = append(runs, span{i, j})
		i = j
	}
	var d [maxCardDigits]byte
	for k, first := range runs {
		if n := first.end - first.start; minCardDigits <= n && n <= maxCardDigits && standsAlone(rs, first.start, first.end) &&
			isCardNumber(appendDigits(d[:0], rs, runs[k:k+1])) {
			return true
		}
		for _, groups := range cardGroupings {
			if g, ok := grouped(rs, runs[k:], groups); ok && standsAlone(rs, first.start, g[len(g)-1].end) &&
				!inIBAN(rs, first.start) && isCardNumber(appendDigits(d[:0], rs, g)) {
				return true
			}
		}
	}
	return false
}

// Card numbers have 14 to 19 digits as ContainsCardNumber reads them.
const (
	minCardDigits = 14
	maxCardDigits = 19
)

// span is the runes [start, end) of a text.
type span struct{ start, end int }

// cardGroupings are the groups in which card numbers are printed and
// written: 16 digits in fours, Amex's 15 and Diners' 14 in 4-6-5 and
// 4-6-4, and the longer numbers as 16 digits in fours and the rest.
var cardGroupings = [][]int{
	{4, 4, 4, 4},
	{4, 6, 5},
	{4, 6, 4},
	{4, 4, 4, 4, 1},
	{4, 4, 4, 4, 2},
	{4, 4, 4, 4, 3},
}

// grouped reports whether runs begins with runs of the lengths in groups,
// each parted from the next by one rune, the same separator throughout,
// and returns those runs.
func grouped(rs []rune, runs []span, groups []int) ([]span, bool) {
	if len(runs) < len(groups) {
		return nil, false
	}
	sep := rune(-1)
	for m, n := range groups {
		r := runs[m]
		if r.end-r.start != n {
			return nil, false
		}
		if m == 0 {
			continue
		}
		if r.start != runs[m-1].end+1 {
			return nil, false
		}
		if m == 1 {
			sep = rs[r.start-1]
			if sep != '-' && sep != '.' && !unicode.IsSpace(sep) {
				return nil, false
			}
		} else if rs[r.start-1] != sep {
			return nil, false
		}
	}
	return runs[:len(groups)], true
}

// standsAlone reports whether the runes [start, end) of rs are not part of
// a longer identifier: no letter or digit touches them, directly or
// through a dash, and no plus sign comes right before them.
func standsAlone(rs []rune, start, end int) bool {
	word := func(i int) bool {
		return 0 <= i && i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]))
	}
	if start > 0 {
		if p := rs[start-1]; word(start-1) || p == '+' || (p == '-' && word(start-2)) {
			return false
		}
	}
	if end < len(rs) {
		if word(end) || (rs[end] == '-' && word(end+1)) {
			return false
		}
	}
	return true
}

// inIBAN reports whether the groups that start at rs[start] continue an
// IBAN printed in groups of four: going back over the groups of four
// letters and digits before them, each followed by the separator that
// follows rs[start:start+4], the first group is a country code and two
// check digits ("DE89 3704 0044 0532 0130 00").
func inIBAN(rs []rune, start int) bool {
	sep := rs[start+4]
	alnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	ascii := func(r rune) bool { return 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' }
	for p := start; p >= 5 && rs[p-1] == sep; p -= 5 {
		g := rs[p-5 : p-1]
		if !alnum(g[0]) || !alnum(g[1]) || !alnum(g[2]) || !alnum(g[3]) || (p > 5 && alnum(rs[p-6])) {
			return false
		}
		if ascii(g[0]) && ascii(g[1]) && unicode.IsDigit(g[2]) && unicode.IsDigit(g[3]) {
			return true
		}
	}
	return false
}

// appendDigits appends the values of the digits of runs to d.
func appendDigits(d []byte, rs []rune, runs []span) []byte {
	for _, r := range runs {
		for _, c := range rs[r.start:r.end] {
			d = append(d, digitValue(c))
		}
	}
	return d
}

// cardBrands are the brands' IIN ranges (the number's first digits) and
// the lengths of their numbers.
var cardBrands = []struct {
	name    string
	iins    []iinRange
	lengths []int
}{
	{"Visa", []iinRange{{4, 4}}, []int{13, 16, 19}},
	{"Mastercard", []iinRange{{51, 55}, {2221, 2720}}, []int{16}},
	{"American Express", []iinRange{{34, 34}, {37, 37}}, []int{15}},
	{"Discover", []iinRange{{6011, 6011}, {644, 649}, {65, 65}, {622126, 622925}}, []int{16, 17, 18, 19}},
	{"JCB", []iinRange{{3528, 3589}}, []int{16, 17, 18, 19}},
	{"Diners Club", []iinRange{{300, 305}, {36, 36}, {38, 39}}, []int{14, 15, 16, 17, 18, 19}},
	{"UnionPay", []iinRange{{62, 62}}, []int{16, 17, 18, 19}},
	{"Maestro", []iinRange{{50, 50}, {56, 69}}, []int{12, 13, 14, 15, 16, 17, 18, 19}},
}

// iinRange is the numbers whose first digits, read as a number of as many
// digits as lo has, lie in [lo, hi].
type iinRange struct{ lo, hi int }

// cardBrand returns the name of the brand whose number d (digit values)
// may be, by its first digits and its length, or "".
func cardBrand(d []byte) string {
	for _, b := range cardBrands {
		if !slices.Contains(b.lengths, len(d)) {
			continue
		}
		for _, r := range b.iins {
			prefix, n := 0, 0
			for k := r.lo; k > 0; k /= 10 {
				prefix = prefix*10 + int(d[n])
				n++
			}
			if r.lo <= prefix && prefix <= r.hi {
				return b.name
			}
		}
	}
	return ""
}

// isCardNumber reports whether d (digit values) is a brand's number that
// passes the Luhn check.
func isCardNumber(d []byte) bool {
	return cardBrand(d) != "" && luhn(d)
}

// luhn reports whether d (digit values) passes the Luhn check: every
// second digit from the right doubled (less 9 past 9), the sum a multiple
// of ten.
func luhn(d []byte) bool {
	sum := 0
	for k := range d {
		v := int(d[len(d)-1-k])
		if k%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
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
