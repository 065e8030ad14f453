package order

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

func gatewaysOf(routes []Route) []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.Gateway
	}
	return out
}

// TestApplyRules: the first rule an order meets orders its routes (the
// rule's gateways first, in its order, the others after in the
// checkout's), and marks each with the rule and the version; an order no
// rule meets keeps the checkout's order, unmarked.
func TestApplyRules(t *testing.T) {
	c := RouteConfig{Version: 7, Rules: []RouteRule{
		{Name: "big-eur", Currencies: []string{"EUR"}, MinAmount: 10_000, Gateways: []string{"sim2", "adyen"}},
		{Name: "manual", Capture: CaptureManual, Gateways: []string{"adyen"}},
		{Name: "small", MaxAmount: 999, Gateways: []string{"sim2"}},
	}}
	routes := []Route{{Gateway: "sim", PaymentMethod: "tok_a"}, {Gateway: "adyen", PaymentMethod: "tok_b"}, {Gateway: "sim2", PaymentMethod: "tok_c"}}
	for _, tc := range []struct {
		name    string
		m       Money
		capture CaptureMode
		want    []string
		rule    string
	}{
		{"priority list", Money{"EUR", 10_000}, CaptureAutomatic, []string{"sim2", "adyen", "sim"}, "big-eur"},
		{"first match wins", Money{"EUR", 20_000}, CaptureManual, []string{"sim2", "adyen", "sim"}, "big-eur"},
		{"currency not met", Money{"GBP", 20_000}, CaptureManual, []string{"adyen", "sim", "sim2"}, "manual"},
		{"amount range", Money{"GBP", 999}, CaptureAutomatic, []string{"sim2", "sim", "adyen"}, "small"},
		{"no rule", Money{"GBP", 1000}, CaptureAutomatic, []string{"sim", "adyen", "sim2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := applyRules(c, "0190a5f2-0000-7000-8000-000000000001", tc.m, tc.capture, routes)
			if !slices.Equal(gatewaysOf(got), tc.want) {
				t.Fatalf("routes %v, want %v", gatewaysOf(got), tc.want)
			}
			for _, r := range got {
				want := int64(7)
				if tc.rule == "" {
					want = 0
				}
				if r.Rule != tc.rule || r.RouteVersion != want {
					t.Fatalf("route %+v, want rule %q version %d", r, tc.rule, want)
				}
				if i := slices.IndexFunc(routes, func(x Route) bool { return x.Gateway == r.Gateway }); routes[i].PaymentMethod != r.PaymentMethod {
					t.Fatalf("route %+v lost its payment method", r)
				}
			}
		})
	}
	if routes[0].Gateway != "sim" || routes[0].Rule != "" {
		t.Fatalf("applyRules changed the checkout's routes: %+v", routes)
	}
}

// TestWeightedSplit: a split sends each order, by its id, to one first
// gateway, the same every time, and over 10,000 orders each gateway's
// share is its weight's within a tolerance of four standard deviations
// of the binomial count (a bias of a few percent fails).
func TestWeightedSplit(t *testing.T) {
	r := RouteRule{Name: "split", Split: []WeightedGateway{{"sim", 6}, {"sim2", 3}, {"adyen", 1}}}
	const n = 10_000
	count := map[string]int{}
	for range n {
		id := NewID()
		first := r.order(id)
		if again := r.order(id); !slices.Equal(first, again) {
			t.Fatalf("order %s drew %v, then %v", id, first, again)
		}
		if len(first) != 3 {
			t.Fatalf("order %s: %v, want every gateway of the split", id, first)
		}
		count[first[0]]++
	}
	for _, w := range r.Split {
		p := float64(w.Weight) / 10
		want, tol := p*n, 4*math.Sqrt(n*p*(1-p))
		got := float64(count[w.Gateway])
		t.Logf("%s: weight %d, %d of %d orders first (%.1f%%, want %.1f%% ± %.1f)", w.Gateway, w.Weight, count[w.Gateway], n, 100*got/n, 100*p, 100*tol/n)
		if math.Abs(got-want) > tol {
			t.Errorf("%s first for %d of %d orders, want %.0f ± %.0f", w.Gateway, count[w.Gateway], n, want, tol)
		}
	}
	// After the drawn gateway, the others by weight.
	for range 100 {
		got := r.order(NewID())
		rest := slices.DeleteFunc(slices.Clone([]string{"sim", "sim2", "adyen"}), func(g string) bool { return g == got[0] })
		if !slices.Equal(got[1:], rest) {
			t.Fatalf("split order %v: the rest should follow by weight, %v", got, rest)
		}
	}
}

// TestValidateRules: rules naming a gateway this server lacks, twice, with
// no decision or both, a bad weight, currency or range are refused, each
// naming its field; good rules pass.
func TestValidateRules(t *testing.T) {
	s := &Service{gateways: map[string]Gateway{"sim": nil, "sim2": nil, "adyen": nil}}
	good := []RouteRule{{Name: "a", Currencies: []string{"KWD"}, MaxAmount: 5, Gateways: []string{"sim", "adyen"}},
		{Name: "b", Split: []WeightedGateway{{"sim", 1}, {"sim2", 10_000}}}}
	if err := s.validateRules(good); err != nil {
		t.Fatalf("good rules refused: %v", err)
	}
	for field, rules := range map[string][]RouteRule{
		"rules[0].gateways[1]":      {{Name: "a", Gateways: []string{"sim", "stripe"}}},
		"rules[0].split[1].gateway": {{Name: "a", Split: []WeightedGateway{{"sim", 1}, {"sim", 1}}}},
		"rules[0].split[0].weight":  {{Name: "a", Split: []WeightedGateway{{"sim", 0}}}},
		"rules[0]":                  {{Name: "a"}},
		"rules[0].currencies[0]":    {{Name: "a", Currencies: []string{"eur"}, Gateways: []string{"sim"}}},
		"rules[0].max_amount_minor": {{Name: "a", MinAmount: 10, MaxAmount: 5, Gateways: []string{"sim"}}},
		"rules[1].name":             {{Name: "a", Gateways: []string{"sim"}}, {Name: "a", Gateways: []string{"sim"}}},
		"rules[0].name":             {{Gateways: []string{"sim"}}},
		"rules[0].capture":          {{Name: "a", Capture: "LATER", Gateways: []string{"sim"}}},
		"rules[0].split[1].weight":  {{Name: "a", Split: []WeightedGateway{{"sim", 1}, {"sim2", 10_001}}}},
	} {
		err := s.validateRules(rules)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != field {
			t.Errorf("rules %+v: %v, want a ValidationError of %s", rules, err, field)
		}
	}
}

// BenchmarkApplyRules is the routing decision's cost per order: the
// first matching rule of eight, a weighted split, over three routes.
func BenchmarkApplyRules(b *testing.B) {
	c := RouteConfig{Version: 3}
	for i := range 7 {
		c.Rules = append(c.Rules, RouteRule{Name: fmt.Sprint("r", i), Currencies: []string{"JPY"}, Gateways: []string{"sim"}})
	}
	c.Rules = append(c.Rules, RouteRule{Name: "split", Split: []WeightedGateway{{"sim", 6}, {"sim2", 3}, {"adyen", 1}}})
	routes := []Route{{Gateway: "sim", PaymentMethod: "a"}, {Gateway: "sim2", PaymentMethod: "b"}, {Gateway: "adyen", PaymentMethod: "c"}}
	id := NewID()
	b.ReportAllocs()
	for b.Loop() {
		applyRules(c, id, Money{"GBP", 1250}, CaptureAutomatic, routes)
	}
}
