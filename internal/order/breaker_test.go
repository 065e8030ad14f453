package order

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newTestBreakers returns breakers for gateway "a" on a fake clock, with
// the default thresholds, and the states they reported.
func newTestBreakers(t *testing.T) (*Breakers, *fakeClock, func() []BreakerState) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	var states []BreakerState
	b, err := NewBreakers([]string{"a"}, BreakerConfig{SlowCall: time.Second, ProbeLease: 5 * time.Second, Now: clock.Now,
		OnState: func(gw string, s BreakerState) {
			mu.Lock()
			defer mu.Unlock()
			states = append(states, s)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return b, clock, func() []BreakerState {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(states)
	}
}

// TestBreakerOpensAtThreshold: the breaker opens when half of the last
// calls within the window failed, once there are ten, and not before.
func TestBreakerOpensAtThreshold(t *testing.T) {
	tests := []struct {
		name  string
		calls []Outcome
		slow  int // of the calls, how many answered slowly (the last ones)
		open  bool
	}{
		{"nine failures are too few calls", repeat(OutcomeNotSent, 9), 0, false},
		{"ten failures", repeat(OutcomeNotSent, 10), 0, true},
		{"five of ten unknown", append(repeat(OutcomeSucceeded, 5), repeat(OutcomeUnknown, 5)...), 0, true},
		{"four of ten failed", append(repeat(OutcomeSucceeded, 6), repeat(OutcomeNotSent, 4)...), 0, false},
		{"declines and refusals are answers", append(repeat(OutcomeDeclined, 6), repeat(OutcomeRefused, 6)...), 0, false},
		{"slow answers fail", repeat(OutcomeSucceeded, 10), 5, true},
		{"four slow of ten", repeat(OutcomeSucceeded, 10), 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clock, _ := newTestBreakers(t)
			for i, o := range tt.calls {
				latency := 10 * time.Millisecond
				if i >= len(tt.calls)-tt.slow {
					latency = time.Second
				}
				clock.Advance(100 * time.Millisecond)
				b.record("a", o, latency)
			}
			if got := b.State("a") == BreakerOpen; got != tt.open {
				t.Errorf("open %v, want %v", got, tt.open)
			}
			if b.admit("a") == tt.open {
				t.Errorf("admit while open %v", tt.open)
			}
		})
	}
}

func repeat(o Outcome, n int) []Outcome { return slices.Repeat([]Outcome{o}, n) }

// TestBreakerWindow: failures older than the window no longer count.
func TestBreakerWindow(t *testing.T) {
	b, clock, _ := newTestBreakers(t)
	for range 9 {
		b.record("a", OutcomeNotSent, 0)
	}
	clock.Advance(31 * time.Second)
	b.record("a", OutcomeNotSent, 0)
	if s := b.State("a"); s != BreakerClosed {
		t.Fatalf("state %s after nine failures out of the window and one in it, want closed", s)
	}
	for range 9 {
		b.record("a", OutcomeNotSent, 0)
	}
	if s := b.State("a"); s != BreakerOpen {
		t.Fatalf("state %s after ten failures within the window, want open", s)
	}
}

// TestBreakerHalfOpen: after the cool-down exactly one attempt goes, even
// when many ask at once; its success closes the breaker, its failure
// opens it again for another cool-down; a probe never answered is
// replaced after its lease; a call started before the opening decides
// nothing.
func TestBreakerHalfOpen(t *testing.T) {
	b, clock, states := newTestBreakers(t)
	open := func() {
		t.Helper()
		for range 10 {
			clock.Advance(time.Millisecond)
			b.record("a", OutcomeNotSent, 0)
		}
		if s := b.State("a"); s != BreakerOpen {
			t.Fatalf("state %s, want open", s)
		}
	}
	open()
	// An answer to a call made before the breaker opened changes nothing.
	b.record("a", OutcomeSucceeded, 2*time.Millisecond)
	if s := b.State("a"); s != BreakerOpen {
		t.Fatalf("state %s after a late answer to an earlier call, want open", s)
	}
	clock.Advance(9 * time.Second)
	if b.admit("a") {
		t.Fatal("admitted before the cool-down")
	}
	clock.Advance(time.Second)

	probes := func() int {
		var n atomic.Int32
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				if b.admit("a") {
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return int(n.Load())
	}
	if n := probes(); n != 1 {
		t.Fatalf("%d attempts let through half-open, want 1", n)
	}
	clock.Advance(time.Second)
	b.record("a", OutcomeNotSent, 0)
	if s := b.State("a"); s != BreakerOpen {
		t.Fatalf("state %s after the probe failed, want open", s)
	}
	if b.admit("a") {
		t.Fatal("admitted right after the probe failed")
	}

	clock.Advance(10 * time.Second)
	if n := probes(); n != 1 {
		t.Fatalf("%d attempts let through on the second half-open, want 1", n)
	}
	clock.Advance(5 * time.Second)
	// The probe was never answered (its attempt never claimed): after its
	// lease, another goes.
	if n := probes(); n != 1 {
		t.Fatalf("%d attempts let through after the probe's lease, want 1", n)
	}
	clock.Advance(time.Second)
	b.record("a", OutcomeDeclined, 500*time.Millisecond)
	if s := b.State("a"); s != BreakerClosed {
		t.Fatalf("state %s after the probe's answer, want closed", s)
	}
	if n := probes(); n != 32 {
		t.Fatalf("%d attempts let through closed, want all 32", n)
	}
	// Closed afresh: the failures before count no more.
	for range 9 {
		b.record("a", OutcomeNotSent, 0)
	}
	if s := b.State("a"); s != BreakerClosed {
		t.Fatalf("state %s after nine failures since closing, want closed", s)
	}
	want := []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen, BreakerOpen, BreakerHalfOpen, BreakerClosed}
	if got := states(); !slices.Equal(got, want) {
		t.Fatalf("states reported %v, want %v", got, want)
	}
}

// TestBreakerConfig: defaults fill a zero configuration, and a wrong one
// is refused.
func TestBreakerConfig(t *testing.T) {
	b, err := NewBreakers([]string{"a"}, BreakerConfig{SlowCall: time.Second, ProbeLease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c := b.cfg; c.FailureRate != 0.5 || c.MinCalls != 10 || c.Window != 30*time.Second || c.Cooldown != 10*time.Second {
		t.Errorf("defaults %+v", c)
	}
	for _, c := range []BreakerConfig{
		{FailureRate: 1.5, SlowCall: time.Second, ProbeLease: time.Second},
		{MinCalls: -1, SlowCall: time.Second, ProbeLease: time.Second},
		{Cooldown: -time.Second, SlowCall: time.Second, ProbeLease: time.Second},
		{},
	} {
		if _, err := NewBreakers([]string{"a"}, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
