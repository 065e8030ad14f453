package order

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Route rules: a merchant's operators decide, in the database and through
// OpsService, in which order an order's routes are tried. The checkout
// says where the order may be charged (a payment method token for each
// gateway, routes); the merchant's rules say where it goes first. The
// rules are an ordered list, and the first whose conditions the order
// meets decides: a priority list of gateways, or a weighted split. A
// rule is applied once, when the order is created, and its choice is
// kept with the order's routes, with the rule's name and the version of
// the rules: a retry of the charge, a cascade and the reconciler all read
// the order's routes, so a retry lands where the first try did, and a
// change of the rules moves new orders only. Every attempt of the order
// was routed by that version (GetOrderHistory shows it).

// RouteRule is one rule of a merchant's routes.
type RouteRule struct {
	// Name names the rule in the order's routes and its history.
	Name string
	// The conditions, each met when empty or zero: the order's currency
	// is one of Currencies; its amount is at least MinAmount and at most
	// MaxAmount (minor units, of any currency); its capture mode is
	// Capture.
	Currencies           []string
	MinAmount, MaxAmount int64
	Capture              CaptureMode
	// The decision, one of the two: Gateways in order of priority, or
	// Split, the first gateway chosen by weight (deterministically per
	// order id), the others following by weight.
	Gateways []string
	Split    []WeightedGateway
}

// WeightedGateway is one gateway of a weighted split and its weight.
type WeightedGateway struct {
	Gateway string
	Weight  int
}

// RouteConfig is a version of a merchant's route rules.
type RouteConfig struct {
	MerchantID string
	// Version counts the merchant's changes from 1; 0 is no rules (each
	// order's routes are tried in the checkout's order).
	Version int64
	Rules   []RouteRule
	// Actor and Note say who made the change and why.
	Actor, Note string
	CreatedAt   time.Time
}

// Bounds of route rules.
const (
	MaxRouteRules  = 32
	MaxRuleNameLen = 64
	MaxRouteNote   = 500 // characters
	maxRouteWeight = 10_000
)

// RoutesVersionError is a change of route rules made against a version
// that is no longer the merchant's latest: another change came first.
type RoutesVersionError struct {
	Expected, Current int64
}

func (e *RoutesVersionError) Error() string {
	return fmt.Sprintf("the merchant's routes are at version %d, not %d: read them again (GetRoutes) and make the change on the latest", e.Current, e.Expected)
}

// ErrRoutesUnsupported is a call for route rules on a server whose store
// keeps none.
var ErrRoutesUnsupported = errors.New("routes: this server's store keeps no route rules")

// RouteStore keeps merchants' route rules.
type RouteStore interface {
	// RouteConfig returns the merchant's latest route rules; Version 0
	// when it has none.
	RouteConfig(ctx context.Context, merchantID string) (RouteConfig, error)
	// SetRouteConfig records c as version expected+1 of its merchant's
	// rules, or returns a *RoutesVersionError when expected is not the
	// latest version.
	SetRouteConfig(ctx context.Context, c RouteConfig, expected int64) (RouteConfig, error)
}

// validateRules checks rules against this server's gateways.
func (s *Service) validateRules(rules []RouteRule) error {
	if len(rules) > MaxRouteRules {
		return &ValidationError{Field: "rules", Reason: fmt.Sprintf("must have at most %d rules", MaxRouteRules)}
	}
	// No text of any rule may hold a card number, whatever else is wrong
	// with it.
	for i, r := range rules {
		texts := map[string]string{fmt.Sprintf("rules[%d].name", i): r.Name}
		for j, c := range r.Currencies {
			texts[fmt.Sprintf("rules[%d].currencies[%d]", i, j)] = c
		}
		for j, g := range r.Gateways {
			texts[fmt.Sprintf("rules[%d].gateways[%d]", i, j)] = g
		}
		for j, w := range r.Split {
			texts[fmt.Sprintf("rules[%d].split[%d].gateway", i, j)] = w.Gateway
		}
		for _, f := range slices.Sorted(maps.Keys(texts)) {
			if ContainsCardNumber(texts[f]) {
				return &ValidationError{Field: f, Reason: cardNumberAdvisory}
			}
		}
	}
	for i, r := range rules {
		f := fmt.Sprintf("rules[%d]", i)
		if err := checkText(f+".name", r.Name, 1, MaxRuleNameLen); err != nil {
			return err
		}
		if slices.ContainsFunc(rules[:i], func(x RouteRule) bool { return x.Name == r.Name }) {
			return &ValidationError{Field: f + ".name", Reason: "names an earlier rule; each rule's name is its own"}
		}
		for j, c := range r.Currencies {
			if _, ok := currencyExponents[c]; !ok {
				return &ValidationError{Field: fmt.Sprintf("%s.currencies[%d]", f, j), Reason: "must be an ISO 4217 currency code Settle knows"}
			}
		}
		if r.MinAmount < 0 || r.MaxAmount < 0 || (r.MaxAmount > 0 && r.MinAmount > r.MaxAmount) {
			return &ValidationError{Field: f + ".max_amount_minor", Reason: "amounts must not be negative, and the minimum at most the maximum"}
		}
		switch r.Capture {
		case "", CaptureAutomatic, CaptureManual:
		default:
			return &ValidationError{Field: f + ".capture", Reason: "must be AUTOMATIC, MANUAL or unset (any)"}
		}
		if (len(r.Gateways) == 0) == (len(r.Split) == 0) {
			return &ValidationError{Field: f, Reason: "must have gateways (a priority list) or split (weights), one of the two"}
		}
		names := r.gateways()
		for j, g := range names {
			field := fmt.Sprintf("%s.gateways[%d]", f, j)
			if len(r.Split) > 0 {
				field = fmt.Sprintf("%s.split[%d].gateway", f, j)
				if w := r.Split[j].Weight; w < 1 || w > maxRouteWeight {
					return &ValidationError{Field: fmt.Sprintf("%s.split[%d].weight", f, j), Reason: fmt.Sprintf("must be between 1 and %d", maxRouteWeight)}
				}
			}
			if _, ok := s.gateways[g]; !ok {
				return s.unknownGateway(field, g)
			}
			if slices.Contains(names[:j], g) {
				return &ValidationError{Field: field, Reason: "names a gateway twice"}
			}
		}
		if len(names) > MaxRoutes {
			return &ValidationError{Field: f, Reason: fmt.Sprintf("must name at most %d gateways", MaxRoutes)}
		}
	}
	return nil
}

// gateways are the gateways r names, in its list's or its split's order.
func (r RouteRule) gateways() []string {
	if len(r.Split) == 0 {
		return r.Gateways
	}
	out := make([]string, len(r.Split))
	for i, w := range r.Split {
		out[i] = w.Gateway
	}
	return out
}

// matches reports whether an order of amount m and capture mode capture
// meets r's conditions.
func (r RouteRule) matches(m Money, capture CaptureMode) bool {
	return (len(r.Currencies) == 0 || slices.Contains(r.Currencies, m.Currency)) &&
		m.AmountMinor >= r.MinAmount && (r.MaxAmount == 0 || m.AmountMinor <= r.MaxAmount) &&
		(r.Capture == "" || r.Capture == capture)
}

// order returns the gateways of r in the order an order with id tries
// them: the priority list, or for a split the gateway the order's id
// draws by weight first and the others by weight (the earlier first among
// equals).
func (r RouteRule) order(id string) []string {
	if len(r.Split) == 0 {
		return r.Gateways
	}
	total := 0
	for _, w := range r.Split {
		total += w.Weight
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	draw := int(h.Sum64() % uint64(total))
	rest := slices.Clone(r.Split)
	first := 0
	for i, w := range rest {
		if draw < w.Weight {
			first = i
			break
		}
		draw -= w.Weight
	}
	out := []string{rest[first].Gateway}
	rest = slices.Delete(rest, first, first+1)
	slices.SortStableFunc(rest, func(a, b WeightedGateway) int { return b.Weight - a.Weight })
	for _, w := range rest {
		out = append(out, w.Gateway)
	}
	return out
}

// applyRules orders routes, the routes of a new order id of amount m and
// capture mode capture, by the first of c's rules the order meets: the
// gateways the rule names first, in its order, then the order's others in
// the checkout's order. Each route records the rule and c's version.
// Without a matching rule the routes stay as they are.
func applyRules(c RouteConfig, id string, m Money, capture CaptureMode, routes []Route) []Route {
	i := slices.IndexFunc(c.Rules, func(r RouteRule) bool { return r.matches(m, capture) })
	if i < 0 {
		return routes
	}
	rule := c.Rules[i]
	first := rule.order(id)
	rank := func(r Route) int {
		if k := slices.Index(first, r.Gateway); k >= 0 {
			return k
		}
		return MaxRoutes
	}
	out := slices.Clone(routes)
	slices.SortStableFunc(out, func(a, b Route) int { return rank(a) - rank(b) })
	for k := range out {
		out[k].Rule, out[k].RouteVersion = rule.Name, c.Version
	}
	return out
}

// routeRulesTTL is how long a server keeps a merchant's route rules
// before reading them again: a change reaches every server's new orders
// within it.
const routeRulesTTL = time.Second

// ruleCache holds the merchants' route rules this server read last.
type ruleCache struct {
	mu sync.Mutex
	m  map[string]cachedRules
}

type cachedRules struct {
	c    RouteConfig
	read time.Time
}

// routeConfig returns merchantID's route rules, read at most routeRulesTTL
// ago, or a zero config when the store keeps none.
func (s *Service) routeConfig(ctx context.Context, merchantID string) (RouteConfig, error) {
	if s.routes == nil {
		return RouteConfig{}, nil
	}
	s.rules.mu.Lock()
	c, ok := s.rules.m[merchantID]
	s.rules.mu.Unlock()
	if ok && time.Since(c.read) < routeRulesTTL {
		return c.c, nil
	}
	cfg, err := s.routes.RouteConfig(ctx, merchantID)
	if err != nil {
		return RouteConfig{}, err
	}
	s.rules.mu.Lock()
	if s.rules.m == nil {
		s.rules.m = map[string]cachedRules{}
	}
	s.rules.m[merchantID] = cachedRules{c: cfg, read: time.Now()}
	s.rules.mu.Unlock()
	return cfg, nil
}

// Routes returns the merchant's latest route rules.
func (s *Service) Routes(ctx context.Context, merchantID string) (RouteConfig, error) {
	if s.routes == nil {
		return RouteConfig{}, ErrRoutesUnsupported
	}
	return s.routes.RouteConfig(ctx, merchantID)
}

// SetRoutes records rules as the merchant's next version of its route
// rules, made by actor for note, when expected is its latest version.
// New orders follow them within routeRulesTTL on every server.
func (s *Service) SetRoutes(ctx context.Context, merchantID string, expected int64, rules []RouteRule, actor, note string) (RouteConfig, error) {
	if s.routes == nil {
		return RouteConfig{}, ErrRoutesUnsupported
	}
	if expected < 0 {
		return RouteConfig{}, &ValidationError{Field: "expected_version", Reason: "must not be negative"}
	}
	if err := checkText("note", note, 0, MaxRouteNote); err != nil {
		return RouteConfig{}, err
	}
	if err := s.validateRules(rules); err != nil {
		return RouteConfig{}, err
	}
	c, err := s.routes.SetRouteConfig(ctx, RouteConfig{MerchantID: merchantID, Rules: rules, Actor: actor, Note: strings.TrimSpace(note)}, expected)
	if err != nil {
		return RouteConfig{}, err
	}
	s.rules.mu.Lock()
	delete(s.rules.m, merchantID)
	s.rules.mu.Unlock()
	return c, nil
}

// AccountInfo is what a server says of one of its gateway accounts
// besides what its adapter can do: its kind (refpsp, stripe, adyen), a
// fingerprint of its credentials (never the credentials), and whether it
// runs 3-D Secure.
type AccountInfo struct {
	Kind, Fingerprint string
	ThreeDS           bool
}

// GatewayAccount is a gateway account of this server, as route rules may
// name it, with what it can do.
type GatewayAccount struct {
	Name string
	AccountInfo
	ManualCapture, Refunds, Disputes bool
}

// GatewayAccounts returns this server's gateway accounts, by name.
func (s *Service) GatewayAccounts() []GatewayAccount {
	var out []GatewayAccount
	for _, name := range slices.Sorted(maps.Keys(s.gateways)) {
		gw := s.gateways[name]
		a := GatewayAccount{Name: name, AccountInfo: s.cfg.Accounts[name]}
		_, a.ManualCapture = gw.(Capturer)
		_, a.Refunds = gw.(Refunder)
		_, a.Disputes = gw.(DisputeGateway)
		out = append(out, a)
	}
	return out
}

// SeedRoutes makes rules the merchant's route rules unless they are
// already its latest (a deployment that keeps its configuration in files
// seeds them at every start, and a restart makes no new version). A
// change that races another server's seeding reads the rules again. It
// reports whether it made a version.
func (s *Service) SeedRoutes(ctx context.Context, merchantID string, rules []RouteRule, actor, note string) (bool, error) {
	if err := CheckMerchantID("merchant_id", merchantID); err != nil {
		return false, err
	}
	for range 3 {
		cur, err := s.Routes(ctx, merchantID)
		if err != nil {
			return false, err
		}
		if slices.EqualFunc(cur.Rules, rules, sameRule) {
			return false, nil
		}
		_, err = s.SetRoutes(ctx, merchantID, cur.Version, rules, actor, note)
		var verr *RoutesVersionError
		if !errors.As(err, &verr) {
			return err == nil, err
		}
	}
	return false, fmt.Errorf("seed merchant %s route rules: other changes kept coming first", merchantID)
}

// sameRule reports whether a and b are the same rule.
func sameRule(a, b RouteRule) bool {
	return a.Name == b.Name && slices.Equal(a.Currencies, b.Currencies) && a.MinAmount == b.MinAmount &&
		a.MaxAmount == b.MaxAmount && a.Capture == b.Capture && slices.Equal(a.Gateways, b.Gateways) &&
		slices.Equal(a.Split, b.Split)
}
