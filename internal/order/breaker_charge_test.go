package order_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// switchable is a gateway simulator on an address of its own that the
// test takes down (its listener closed: every charge is provably not
// sent) and brings up again on the same address.
type switchable struct {
	t    *testing.T
	sim  *sim.Sim
	addr string
	srv  *http.Server
}

func newSwitchable(t *testing.T) *switchable {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &switchable{t: t, sim: sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout}), addr: l.Addr().String()}
	s.serve(l)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *switchable) serve(l net.Listener) {
	s.srv = &http.Server{Handler: s.sim, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(l) //nolint:errcheck // ends with ErrServerClosed when the test takes it down
}

func (s *switchable) down() { s.srv.Close() }

func (s *switchable) up() {
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("listen again on %s: %v", s.addr, err)
	}
	s.serve(l)
}

// TestBreakerSteersAroundADownGateway: gateway a goes down. Orders with
// routes [a, b] cascade to b after a's proven non-charges until a's
// breaker opens; then their attempts go straight to b, a named in their
// skipped; an order with a alone is still created and tried there. After
// the cool-down one attempt probes a: while a is down it fails and the
// breaker opens again; once a is back it succeeds, and a takes attempts
// again.
func TestBreakerSteersAroundADownGateway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newSwitchable(t)
	bs := sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout})
	bsrv := httptest.NewServer(bs)
	t.Cleanup(bsrv.Close)
	adapter := func(url string, c *http.Client) order.Gateway {
		gw, err := refpsp.New(refpsp.Config{BaseURL: url, APIKey: "sk_sim_test", Timeout: gatewayTimeout, HTTPClient: c})
		if err != nil {
			t.Fatal(err)
		}
		return gw
	}
	gateways := map[string]order.Gateway{
		// A new connection for every call: a's downtime shows as a refused
		// dial, not as a kept-alive connection the server dropped.
		"a": adapter("http://"+a.addr, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}),
		"b": adapter(bsrv.URL, nil),
	}

	const cooldown = time.Second
	var mu sync.Mutex
	var changes []string
	var opened time.Time
	breakers, err := order.NewBreakers(slices.Collect(func(yield func(string) bool) {
		for name := range gateways {
			if !yield(name) {
				return
			}
		}
	}), order.BreakerConfig{
		Cooldown: cooldown, SlowCall: gatewayTimeout, ProbeLease: 2 * gatewayTimeout,
		OnState: func(gw string, s order.BreakerState) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, gw+" "+s.String())
			if gw == "a" && s == order.BreakerOpen && opened.IsZero() {
				opened = time.Now()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	store := postgres.NewStore(postgrestest.Pool(t))
	svc, err := order.NewService(store, gateways, order.Config{
		DefaultGateway: "a", GatewayTimeout: gatewayTimeout, Grace: 100 * time.Millisecond, FirstRecheck: 50 * time.Millisecond,
		Breakers: breakers,
	}, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	charge := func(routes ...string) (order.Order, []order.Attempt) {
		t.Helper()
		n++
		o, _, err := svc.CreateAndCharge(ctx, merchant, routed(fmt.Sprintf("breaker-%d", n), routes...),
			order.ChargeInput{RequestID: fmt.Sprintf("breaker-req-%d", n)})
		if err != nil {
			t.Fatalf("order %d: %v", n, err)
		}
		h, err := store.OrderHistory(ctx, merchant, o.ID, order.HistoryPage{Limit: 100}, false)
		if err != nil {
			t.Fatal(err)
		}
		return o, h.Attempts
	}
	wantPath := func(as []order.Attempt, want ...string) {
		t.Helper()
		if got := paths(as); !slices.Equal(got, want) {
			t.Fatalf("order %d: path %q, want %q", n, got, want)
		}
	}
	state := func() order.BreakerState { return breakers.State("a") }

	// A healthy a fills its breaker's window with answers.
	for range 10 {
		_, as := charge("a", "tok_ok", "b", "tok_ok")
		wantPath(as, "a succeeded")
	}

	a.down()
	down := time.Now()
	calls := 0
	for state() != order.BreakerOpen {
		if calls == 50 {
			t.Fatalf("a's breaker still %s after %d calls refused", state(), calls)
		}
		o, as := charge("a", "tok_ok", "b", "tok_ok")
		wantPath(as, "a not_sent", "b succeeded")
		if o.State != order.StatePaid || o.Gateway != "b" {
			t.Fatalf("order %d: %s on %s, want PAID on b", n, o.State, o.Gateway)
		}
		calls++
	}
	mu.Lock()
	took := opened.Sub(down)
	mu.Unlock()
	t.Logf("a down to its breaker open: %d calls refused, %v (sequential checkouts, each cascading to b)", calls, took.Round(time.Millisecond))

	// Open: new attempts go straight to b, and say why a was passed over.
	for range 3 {
		o, as := charge("a", "tok_ok", "b", "tok_ok")
		wantPath(as, "b succeeded")
		if as[0].Skipped != "a: breaker open" || as[0].CascadeAfter != "" || o.Gateway != "b" {
			t.Fatalf("order %d: skipped %q, cascade_after %q, on %s; want a passed over for its breaker", n, as[0].Skipped, as[0].CascadeAfter, o.Gateway)
		}
	}
	// With nowhere else to go the order is created and its attempt made:
	// provably not sent, it is PENDING, to be charged again.
	if o, as := charge("a", "tok_ok"); o.State != order.StatePending || len(as) != 1 || as[0].Outcome != order.OutcomeNotSent {
		t.Fatalf("order with a alone: %s, path %q; want PENDING after a's not_sent", o.State, paths(as))
	}

	// After the cool-down one attempt probes a, still down: the breaker
	// opens again, and the next attempt goes straight to b.
	time.Sleep(cooldown)
	_, as := charge("a", "tok_ok", "b", "tok_ok")
	wantPath(as, "a not_sent", "b succeeded")
	if s := state(); s != order.BreakerOpen {
		t.Fatalf("a's breaker %s after the probe failed, want open", s)
	}
	_, as = charge("a", "tok_ok", "b", "tok_ok")
	wantPath(as, "b succeeded")

	// a is back: after the cool-down the probe succeeds and closes the
	// breaker, and a takes the attempts again.
	a.up()
	time.Sleep(cooldown)
	_, as = charge("a", "tok_ok", "b", "tok_ok")
	wantPath(as, "a succeeded")
	if s := state(); s != order.BreakerClosed {
		t.Fatalf("a's breaker %s after the probe succeeded, want closed", s)
	}
	_, as = charge("a", "tok_ok", "b", "tok_ok")
	wantPath(as, "a succeeded")

	mu.Lock()
	defer mu.Unlock()
	var ofA []string
	for _, c := range changes {
		if c[0] == 'a' {
			ofA = append(ofA, c)
		}
	}
	want := []string{"a closed", "a open", "a half-open", "a open", "a half-open", "a closed"}
	if !slices.Equal(ofA, want) {
		t.Errorf("a's breaker went %q, want %q", ofA, want)
	}
	if slices.Contains(changes, "b open") {
		t.Errorf("b's breaker opened: %q", changes)
	}
}
