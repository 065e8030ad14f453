package order

import (
	"errors"
	"strings"
	"sync"
	"time"
)

// The breakers: one per gateway account, fed by the outcome of every
// charge call the lifecycle makes (chargeOp.call). A call fails when it
// proved nothing reached the gateway, when its outcome is unknown (a
// timeout, a 5xx, a dropped connection) or when its answer came later
// than SlowCall; any definite answer in time (paid, declined, refused,
// a challenge) is healthy. Of the calls within Window (the last
// breakerMaxCalls at most), once MinCalls are there and FailureRate of
// them failed, the breaker opens: for Cooldown, a new attempt of an order
// with routes goes to the next eligible route instead, the gateway named
// in the attempt's skipped with reasonBreakerOpen. Then it is half-open:
// exactly one new attempt goes to the gateway as the probe; its success
// closes the breaker, its failure opens it again.
//
// A breaker only steers new attempts, and only where the order may go
// elsewhere: its first attempt, or a cascade after a proven non-charge.
// It never moves an order off a gateway the cascade table keeps it on (an
// issuer's decline is retried where it was made), never refuses to create
// an order, and is never read by a lookup, the reconciler or the settle of
// an attempt in flight: an open breaker changes where the next attempt
// goes, not what became of the last. When no other eligible route admits
// an attempt (an order with one route, or every other route's breaker
// open too), the attempt goes to the gateway anyway: refusing it would
// turn a gateway's bad minute into a certain failure, while trying it
// costs one call that may succeed, and its outcome counts as a probe's.

// BreakerState is the state of a gateway account's breaker; its value is
// the settle_gateway_breaker_state gauge's.
type BreakerState int

// The breaker's states.
const (
	// BreakerClosed: attempts go to the gateway.
	BreakerClosed BreakerState = 0
	// BreakerHalfOpen: the cool-down has passed; one attempt, the probe,
	// goes to the gateway, and the others elsewhere.
	BreakerHalfOpen BreakerState = 1
	// BreakerOpen: attempts go elsewhere until the cool-down has passed.
	BreakerOpen BreakerState = 2
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// reasonBreakerOpen is why a route whose breaker is open was passed over,
// in the attempt's skipped ("stripe: breaker open").
const reasonBreakerOpen = "breaker open"

// breakerMaxCalls bounds the calls a breaker remembers.
const breakerMaxCalls = 100

// BreakerConfig is the breakers' configuration; a zero field takes its
// default.
type BreakerConfig struct {
	// FailureRate of the calls within Window opens the breaker; 0.5 by
	// default.
	FailureRate float64
	// MinCalls is the fewest calls within Window that can open it; 10 by
	// default.
	MinCalls int
	// Window is how far back calls count; 30s by default.
	Window time.Duration
	// Cooldown is how long an open breaker sends attempts elsewhere
	// before it lets a probe through; 10s by default.
	Cooldown time.Duration
	// SlowCall is the latency from which an answer counts as a failure;
	// required (NewService sets half its GatewayTimeout).
	SlowCall time.Duration
	// ProbeLease is how long a probe let through is waited for before
	// another may go (its attempt may never have been claimed); required
	// (NewService sets its GatewayTimeout plus Grace).
	ProbeLease time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// OnState, when set, is told each breaker's state: closed for each at
	// the start, then every change. It is called under the breaker's lock,
	// so in order, and must not block.
	OnState func(gateway string, state BreakerState)
}

// Breakers are the breakers of a process's gateway accounts. The Services
// of one process share them (Config.Breakers), as they share budgets.
type Breakers struct {
	cfg BreakerConfig
	by  map[string]*breaker
}

// NewBreakers returns a closed breaker for each of gateways.
func NewBreakers(gateways []string, cfg BreakerConfig) (*Breakers, error) {
	if cfg.FailureRate == 0 {
		cfg.FailureRate = 0.5
	}
	if cfg.MinCalls == 0 {
		cfg.MinCalls = 10
	}
	if cfg.Window == 0 {
		cfg.Window = 30 * time.Second
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnState == nil {
		cfg.OnState = func(string, BreakerState) {}
	}
	switch {
	case cfg.FailureRate < 0 || cfg.FailureRate > 1:
		return nil, errors.New("breaker failure rate must be between 0 and 1")
	case cfg.MinCalls < 1 || cfg.MinCalls > breakerMaxCalls:
		return nil, errors.New("breaker minimum of calls must be between 1 and 100")
	case cfg.Window < 0 || cfg.Cooldown < 0 || cfg.SlowCall <= 0 || cfg.ProbeLease <= 0:
		return nil, errors.New("breaker window and cool-down must not be negative, slow call and probe lease must be positive")
	}
	b := &Breakers{cfg: cfg, by: make(map[string]*breaker, len(gateways))}
	for _, name := range gateways {
		b.by[name] = &breaker{name: name, cfg: &b.cfg}
		cfg.OnState(name, BreakerClosed)
	}
	return b, nil
}

// State returns the state of gateway's breaker as of now (closed for a
// gateway without one).
func (b *Breakers) State(gateway string) BreakerState {
	br, ok := b.by[gateway]
	if !ok {
		return BreakerClosed
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.state == BreakerOpen && !b.cfg.Now().Before(br.since.Add(b.cfg.Cooldown)) {
		return BreakerHalfOpen
	}
	return br.state
}

// admit reports whether a new attempt may go to gateway now. In the
// half-open state it lets exactly one through, the probe.
func (b *Breakers) admit(gateway string) bool {
	br, ok := b.by[gateway]
	if !ok {
		return true
	}
	return br.admit(b.cfg.Now())
}

// record counts the outcome of a charge call to gateway that took
// latency, answered now.
func (b *Breakers) record(gateway string, outcome Outcome, latency time.Duration) {
	br, ok := b.by[gateway]
	if !ok {
		return
	}
	now := b.cfg.Now()
	br.record(now, now.Add(-latency), failed(outcome) || latency >= b.cfg.SlowCall)
}

// failed says whether a charge call with outcome counts against its
// gateway: nothing proves the gateway answered it.
func failed(outcome Outcome) bool {
	switch outcome {
	case OutcomeSucceeded, OutcomeDeclined, OutcomeRefused, OutcomeRequiresAction, OutcomeNotFound:
		return false
	default:
		// Not sent, unknown, or an outcome a charge does not report: the
		// gateway gave no answer.
		return true
	}
}

// breaker is one gateway account's.
type breaker struct {
	name string
	cfg  *BreakerConfig

	mu    sync.Mutex
	state BreakerState
	// since is when the breaker last opened, or went half-open.
	since time.Time
	// calls are the calls counted while closed, oldest first.
	calls []call
	// probeAt is when the half-open breaker let its probe through; zero
	// while none is out.
	probeAt time.Time
}

// call is one call's answer: when it came, and whether it failed.
type call struct {
	at     time.Time
	failed bool
}

func (br *breaker) admit(now time.Time) bool {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.state == BreakerOpen && !now.Before(br.since.Add(br.cfg.Cooldown)) {
		br.set(BreakerHalfOpen, now)
	}
	switch br.state {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		if !br.probeAt.IsZero() && now.Before(br.probeAt.Add(br.cfg.ProbeLease)) {
			return false
		}
		br.probeAt = now
		return true
	case BreakerOpen:
		return false
	}
	return true
}

// record counts a call that started at start and answered at now. Once
// open, only calls started since (a probe, or an attempt with nowhere
// else to go) decide: success closes, failure opens again. A call started
// before the breaker opened says nothing the opening did not.
func (br *breaker) record(now, start time.Time, failed bool) {
	br.mu.Lock()
	defer br.mu.Unlock()
	if br.state != BreakerClosed {
		switch {
		case start.Before(br.since):
		case failed:
			br.set(BreakerOpen, now)
		default:
			br.set(BreakerClosed, now)
		}
		return
	}
	br.calls = append(br.calls, call{at: now, failed: failed})
	drop := max(len(br.calls)-breakerMaxCalls, 0)
	for drop < len(br.calls) && br.calls[drop].at.Before(now.Add(-br.cfg.Window)) {
		drop++
	}
	br.calls = br.calls[drop:]
	failures := 0
	for _, c := range br.calls {
		if c.failed {
			failures++
		}
	}
	if len(br.calls) >= br.cfg.MinCalls && float64(failures) >= br.cfg.FailureRate*float64(len(br.calls)) {
		br.set(BreakerOpen, now)
	}
}

// set moves the breaker to state at now, forgetting the calls counted
// before and any probe, and says so when the state changed (an open
// breaker opened again restarts its cool-down).
func (br *breaker) set(state BreakerState, now time.Time) {
	changed := state != br.state
	br.state, br.since, br.calls, br.probeAt = state, now, nil, time.Time{}
	if changed {
		br.cfg.OnState(br.name, state)
	}
}

// avoidOpen returns hop h of routes, or, when h's gateway's breaker
// admits no new attempt, the next eligible route after it whose breaker
// does, with each gateway passed over named in its skipped. When none
// does, it returns h: the attempt goes there anyway (see above).
func (s *Service) avoidOpen(h hop, routes []Route, capture CaptureMode, m Money) hop {
	var skipped []string
	if h.skipped != "" {
		skipped = append(skipped, h.skipped)
	}
	for cur := h; ; {
		if s.breakers.admit(cur.route.Gateway) {
			if cur.index == h.index {
				return h
			}
			cur.skipped, cur.cascadeAfter, cur.follows = strings.Join(skipped, "; "), h.cascadeAfter, h.follows
			return cur
		}
		skipped = append(skipped, cur.route.Gateway+": "+reasonBreakerOpen)
		next, _, ok := s.pick(routes, cur.index+1, capture, m)
		if !ok {
			return h
		}
		if next.skipped != "" {
			skipped = append(skipped, next.skipped)
		}
		cur = next
	}
}
