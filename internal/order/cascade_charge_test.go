package order_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

// routeFixture is the charge path with several gateways, each a real HTTP
// server: three simulators with ledgers of their own (a, b, c), a gateway
// nothing listens on (dead: every charge is provably not sent), and one
// that takes every charge and never answers, and has none when asked
// (hole: an unknown outcome that the reconciler proves uncharged once the
// no-show horizon has passed).
type routeFixture struct {
	svc   *order.Service
	store *postgres.Store
	rec   *reconcile.Reconciler
	sims  map[string]*sim.Sim
	logs  logtest.Buffer
}

// routeGateways are the fixture's gateways, for routes drawn at random.
var routeGateways = []string{"a", "b", "c", "dead", "hole"}

// eurOnly is a simulator's adapter that charges only EUR: a route to it
// is ineligible for an order in another currency.
type eurOnly struct{ *refpsp.Client }

func (eurOnly) SupportsCurrency(c string) bool { return c == "EUR" }

// chargeOnly is a simulator's adapter without its captures: a route to it
// is ineligible for a MANUAL order.
type chargeOnly struct{ order.Gateway }

func newRouteFixture(t *testing.T) *routeFixture {
	t.Helper()
	f := &routeFixture{store: postgres.NewStore(postgrestest.Pool(t)), sims: map[string]*sim.Sim{}}
	gateways := map[string]order.Gateway{}
	adapter := func(url string) *refpsp.Client {
		gw, err := refpsp.New(refpsp.Config{BaseURL: url, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
		if err != nil {
			t.Fatal(err)
		}
		return gw
	}
	for _, name := range []string{"a", "b", "c"} {
		s := sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout})
		hs := httptest.NewServer(s)
		t.Cleanup(hs.Close)
		f.sims[name] = s
		gateways[name] = adapter(hs.URL)
	}
	gateways["eur"] = eurOnly{gateways["c"].(*refpsp.Client)}
	gateways["nocap"] = chargeOnly{gateways["c"]}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	gateways["dead"] = adapter(dead)
	hole := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Never answers, never charges. Reading the body to its end
			// lets the server notice the client hanging up.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		http.Error(w, `{"error":"no such charge"}`, http.StatusNotFound)
	}))
	t.Cleanup(hole.Close)
	gateways["hole"] = adapter(hole.URL)

	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "a", GatewayTimeout: gatewayTimeout, Grace: 100 * time.Millisecond, FirstRecheck: 50 * time.Millisecond,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	schedule := make([]time.Duration, 200)
	for i := range schedule {
		schedule[i] = 50 * time.Millisecond
	}
	f.rec, err = reconcile.New(f.store, gateways, reconcile.Config{
		Schedule: schedule, BatchSize: 50, Concurrency: 8, PollInterval: 50 * time.Millisecond,
		LookupTimeout: gatewayTimeout, NoShowHorizon: 3 * gatewayTimeout,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func routed(ref string, routes ...string) order.NewOrder {
	n := order.NewOrder{MerchantReference: ref, Amount: order.Money{Currency: "GBP", AmountMinor: 1250}}
	for i := 0; i < len(routes); i += 2 {
		n.Routes = append(n.Routes, order.Route{Gateway: routes[i], PaymentMethod: routes[i+1]})
	}
	return n
}

// settleAll runs the reconciler until none of ids is CHARGING.
func (f *routeFixture) settleAll(t *testing.T, ids ...string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := f.rec.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, id := range ids {
			o, err := f.store.Order(ctx, order.AnyMerchant, id)
			if err != nil {
				t.Fatal(err)
			}
			if o.State.AwaitsGateway() {
				busy++
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orders still await their gateway", busy)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *routeFixture) attempts(t *testing.T, id string) []order.Attempt {
	t.Helper()
	h, err := f.store.OrderHistory(context.Background(), merchant, id, order.HistoryPage{Limit: 100}, false)
	if err != nil {
		t.Fatal(err)
	}
	return h.Attempts
}

// paths are the attempts' gateways and outcomes, "a declined: processing_error".
func paths(as []order.Attempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Gateway + " " + string(a.Outcome)
		if a.DeclineCode != "" {
			out[i] += ": " + a.DeclineCode
		}
	}
	return out
}

// TestCascadeAfterProvenNonCharge charges orders with two or three routes
// and checks where each went: on to the next eligible gateway after a
// proven non-charge, within the same call, and nowhere else otherwise.
func TestCascadeAfterProvenNonCharge(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		routes []string
		state  order.State
		path   []string
	}{
		{"technical decline", []string{"a", "tok_decline_processing_error", "b", "tok_ok"}, order.StatePaid,
			[]string{"a declined: processing_error", "b succeeded"}},
		{"not sent", []string{"dead", "tok_ok", "b", "tok_ok"}, order.StatePaid,
			[]string{"dead not_sent", "b succeeded"}},
		{"rate limited, nothing stored", []string{"a", "tok_refuse", "b", "tok_ok"}, order.StatePaid,
			[]string{"a not_sent", "b succeeded"}},
		{"rejected before executing", []string{"a", "tok_reject", "b", "tok_ok"}, order.StatePaid,
			[]string{"a declined: rejected_422", "b succeeded"}},
		{"two hops", []string{"dead", "tok_ok", "a", "tok_decline_issuer_not_available", "b", "tok_ok"}, order.StatePaid,
			[]string{"dead not_sent", "a declined: issuer_not_available", "b succeeded"}},
		{"at most two hops", []string{"dead", "tok_ok", "a", "tok_refuse", "b", "tok_refuse", "c", "tok_ok"}, order.StatePending,
			[]string{"dead not_sent", "a not_sent", "b not_sent"}},
		{"issuer decline stops", []string{"a", "tok_decline", "b", "tok_ok"}, order.StatePending,
			[]string{"a declined: card_declined"}},
		{"stolen card stops", []string{"a", "tok_decline_stolen_card", "b", "tok_ok"}, order.StatePending,
			[]string{"a declined: stolen_card"}},
		{"authentication steps up on the same gateway", []string{"a", "tok_3ds", "b", "tok_ok"}, order.StatePending,
			[]string{"a declined: authentication_required"}},
		{"timeout waits", []string{"a", "tok_timeout", "b", "tok_ok"}, order.StateCharging,
			[]string{"a unknown"}},
		{"5xx waits", []string{"a", "tok_5xx_after_charge", "b", "tok_ok"}, order.StateCharging,
			[]string{"a unknown"}},
		{"ineligible skipped", []string{"eur", "tok_ok", "b", "tok_ok"}, order.StatePaid,
			[]string{"b succeeded"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, a, err := f.svc.CreateAndCharge(ctx, merchant, routed(fmt.Sprintf("cascade-%d", i), tt.routes...),
				order.ChargeInput{RequestID: fmt.Sprintf("cascade-req-%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if o.State != tt.state {
				t.Errorf("state %s, want %s", o.State, tt.state)
			}
			got := f.attempts(t, o.ID)
			if !slices.Equal(paths(got), tt.path) {
				t.Errorf("path %q, want %q", paths(got), tt.path)
			}
			// The call answers with its last hop's attempt, the order's.
			last := got[len(got)-1]
			if a == nil || a.ID != last.ID || o.CurrentAttempt != last.ID || o.Gateway != last.Gateway {
				t.Errorf("answered attempt %+v, order on %s, want the last hop %s on %s", a, o.Gateway, last.ID, last.Gateway)
			} else if a.CascadeAfter != last.CascadeAfter || a.Skipped != last.Skipped {
				t.Errorf("answered attempt's cascade %q, skipped %q; want the stored %q, %q", a.CascadeAfter, a.Skipped, last.CascadeAfter, last.Skipped)
			}
			// A replay of the request answers its last hop's attempt, with
			// the cascade it followed.
			if _, ra, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: fmt.Sprintf("cascade-req-%d", i)}); err != nil ||
				ra == nil || ra.ID != last.ID || ra.CascadeAfter != last.CascadeAfter {
				t.Errorf("replay answered %+v, %v; want attempt %s with cascade %q", ra, err, last.ID, last.CascadeAfter)
			}
			for j := 1; j < len(got); j++ {
				if want := paths(got[j-1 : j])[0]; got[j].CascadeAfter != want {
					t.Errorf("attempt %d cascade_after %q, want %q", j, got[j].CascadeAfter, want)
				}
			}
			if tt.name == "ineligible skipped" && got[0].Skipped != "eur: does not charge GBP" {
				t.Errorf("skipped %q, want the EUR-only route named with why", got[0].Skipped)
			}
		})
	}
}

// TestCascadeSkipsIneligible: a cascade of a MANUAL order passes over a
// gateway that cannot capture, and says so.
func TestCascadeSkipsIneligible(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	n := routed("manual-1", "a", "tok_refuse", "nocap", "tok_ok", "b", "tok_ok")
	n.Capture = order.CaptureManual
	o, _, err := f.svc.CreateAndCharge(context.Background(), merchant, n, order.ChargeInput{RequestID: "manual-req-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := f.attempts(t, o.ID)
	if o.State != order.StateAuthorized || !slices.Equal(paths(got), []string{"a not_sent", "b succeeded"}) {
		t.Fatalf("order %s, path %q: want AUTHORIZED on b", o.State, paths(got))
	}
	if got[1].Skipped != "nocap: cannot capture MANUAL" {
		t.Errorf("skipped %q, want the gateway that cannot capture named", got[1].Skipped)
	}
}

// TestCascadeAfterReconcilerProof: an unknown outcome keeps the order
// CHARGING on its gateway, and no attempt goes anywhere else, however
// often the client asks; once the reconciler proves that it charged
// nothing, the next charge cascades.
func TestCascadeAfterReconcilerProof(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	ctx := context.Background()
	o, _, err := f.svc.CreateAndCharge(ctx, merchant, routed("proof-1", "hole", "tok_ok", "b", "tok_ok"),
		order.ChargeInput{RequestID: "proof-req-1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.State != order.StateCharging || o.Gateway != "hole" {
		t.Fatalf("order %s on %s, want CHARGING on hole", o.State, o.Gateway)
	}
	again, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "proof-req-2"})
	if err != nil {
		t.Fatal(err)
	}
	if again.State != order.StateCharging || len(f.sims["b"].Ledger()) != 0 {
		t.Fatalf("a charge while the outcome is unknown: order %s, b's ledger %v", again.State, f.sims["b"].Ledger())
	}
	f.settleAll(t, o.ID)
	o, a, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "proof-req-3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.State != order.StatePaid || a.Gateway != "b" {
		t.Fatalf("after the proof: order %s, attempt on %q, want PAID on b", o.State, a.Gateway)
	}
	got := f.attempts(t, o.ID)
	if want := []string{"hole not_found", "b succeeded"}; !slices.Equal(paths(got), want) {
		t.Errorf("path %q, want %q", paths(got), want)
	}
	if got[1].CascadeAfter != "hole not_found" {
		t.Errorf("cascade_after %q, want the reconciler's proof", got[1].CascadeAfter)
	}
}

// TestCascadeWithinDeadline: a hop that could not finish before the
// caller's deadline is not started; the order is left PENDING, and the
// next charge cascades.
func TestCascadeWithinDeadline(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	o, err := f.svc.Create(context.Background(), merchant, routed("deadline-1", "a", "tok_decline_try_again_later", "b", "tok_ok"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gatewayTimeout/2)
	o, _, err = f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: "deadline-req-1"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if o.State != order.StatePending || len(f.sims["b"].Ledger()) != 0 {
		t.Fatalf("order %s, b's ledger %v: want PENDING and no hop", o.State, f.sims["b"].Ledger())
	}
	o, a, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: "deadline-req-2"})
	if err != nil {
		t.Fatal(err)
	}
	if o.State != order.StatePaid || a.Gateway != "b" {
		t.Fatalf("order %s, attempt on %q, want PAID on b", o.State, a.Gateway)
	}
	// A replay of the first request is answered from its attempt, and
	// a replay of the second, which did not cascade, from its own.
	_, ra, err := f.svc.Charge(context.Background(), merchant, order.ChargeInput{OrderID: o.ID, RequestID: "deadline-req-2"})
	if err != nil || ra.ID != a.ID {
		t.Fatalf("replay: attempt %+v, %v; want %s", ra, err, a.ID)
	}
}

// TestCascadeReplay: a retry of a request that cascaded is answered with
// its last hop, and charges nothing.
func TestCascadeReplay(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	ctx := context.Background()
	n := routed("replay-1", "a", "tok_decline_processing_error", "b", "tok_ok")
	in := order.ChargeInput{RequestID: "replay-req-1"}
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil {
		t.Fatal(err)
	}
	o2, a2, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil {
		t.Fatal(err)
	}
	if o2.ID != o.ID || a2 == nil || a2.ID != a.ID || a2.Gateway != "b" {
		t.Fatalf("replay answered %+v on order %s, want attempt %s on b", a2, o2.ID, a.ID)
	}
	if n := len(f.sims["a"].Ledger()) + len(f.sims["b"].Ledger()); n != 2 {
		t.Errorf("the gateways saw %d charges, want 2", n)
	}
	// The same reference with other routes is another order.
	n.Routes[1].PaymentMethod = "tok_other"
	if _, err := f.svc.Create(ctx, merchant, n); !errors.As(err, new(*order.ConflictError)) {
		t.Errorf("Create with other routes: %v, want a conflict", err)
	}
}

// TestRoutesValidation checks the routes a client may give.
func TestRoutesValidation(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		n     order.NewOrder
		field string
	}{
		{"with payment_method", func() order.NewOrder { n := routed("v-1", "a", "tok_ok"); n.PaymentMethod = "tok_ok"; return n }(), "routes"},
		{"unknown gateway", routed("v-2", "a", "tok_ok", "nope", "tok_ok"), "routes[1].gateway"},
		{"twice", routed("v-3", "a", "tok_ok", "a", "tok_ok"), "routes[1].gateway"},
		{"no token", routed("v-4", "a", "tok_ok", "b", ""), "routes[1].payment_method"},
		{"too many", routed("v-5", "a", "t", "b", "t", "c", "t", "dead", "t", "hole", "t", "eur", "t"), "routes"},
		{"none eligible", routed("v-6", "eur", "tok_ok"), "routes"},
	}
	for _, tt := range tests {
		_, err := f.svc.Create(ctx, merchant, tt.n)
		var ve *order.ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%s: %v, want a validation error of %s", tt.name, err, tt.field)
		}
	}
	o, err := f.svc.Create(ctx, merchant, routed("v-7", "a", "tok_ok", "b", "tok_ok"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []order.ChargeInput{{PaymentMethod: "tok_ok"}, {Customer: "cus_123"}} {
		in.OrderID, in.RequestID = o.ID, "v-req-1"
		var ve *order.ValidationError
		if _, _, err := f.svc.Charge(ctx, merchant, in); !errors.As(err, &ve) {
			t.Errorf("Charge %+v of an order with routes: %v, want a validation error", in, err)
		}
	}
}

// TestCascadeProperty charges orders with random routes and random
// gateway behaviour (successes, technical and issuer declines, stolen
// cards, refusals, calls never sent, timeouts after charging, answers
// never given), with retries, concurrent calls and reconciler passes in
// between, then settles everything and checks, against every gateway's
// own ledger and each order's history:
//
//   - never two succeeded charges for one order, across gateways, and the
//     one charge of an order is its current attempt of a PAID order;
//   - never an attempt while another is unknown: every attempt after the
//     first was claimed from PENDING, after the attempt before it was
//     settled as uncharged, and no attempt follows one that charged;
//   - every change of gateway is a cascade after a proven non-charge that
//     the cascade table allows, and names it; at most MaxHops per call.
func TestCascadeProperty(t *testing.T) {
	t.Parallel()
	f := newRouteFixture(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	tokens := []string{"tok_ok", "tok_decline", "tok_decline_processing_error", "tok_decline_issuer_not_available",
		"tok_decline_stolen_card", "tok_reject", "tok_refuse", "tok_timeout", "tok_5xx_after_charge", "tok_3ds"}
	type plan struct {
		n      order.NewOrder
		calls  [][]string // request ids of each round; two in a round run at once
		passes []int      // reconciler passes after each round
	}
	const orders = 24
	plans := make([]plan, orders)
	for i := range plans {
		gws := slices.Clone(routeGateways)
		rng.Shuffle(len(gws), func(a, b int) { gws[a], gws[b] = gws[b], gws[a] })
		var routes []string
		for _, g := range gws[:2+rng.IntN(3)] {
			routes = append(routes, g, tokens[rng.IntN(len(tokens))])
		}
		p := plan{n: routed(fmt.Sprintf("prop-%d", i), routes...)}
		for r := range 1 + rng.IntN(4) {
			round := []string{fmt.Sprintf("prop-%d-%d-a", i, r)}
			if rng.IntN(3) == 0 {
				round = append(round, fmt.Sprintf("prop-%d-%d-b", i, r))
			}
			p.calls = append(p.calls, round)
			p.passes = append(p.passes, rng.IntN(3))
		}
		plans[i] = p
	}

	ctx := context.Background()
	ids := make([]string, orders)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			o, err := f.svc.Create(ctx, merchant, p.n)
			if err != nil {
				t.Errorf("create %s: %v", p.n.MerchantReference, err)
				return
			}
			ids[i] = o.ID
			for r, round := range p.calls {
				var cw sync.WaitGroup
				for _, rid := range round {
					cw.Add(1)
					go func() {
						defer cw.Done()
						if _, _, err := f.svc.Charge(ctx, merchant, order.ChargeInput{OrderID: o.ID, RequestID: rid}); err != nil {
							t.Errorf("charge %s: %v", rid, err)
						}
					}()
				}
				cw.Wait()
				for range p.passes[r] {
					if _, err := f.rec.RunOnce(ctx); err != nil {
						t.Errorf("reconcile: %v", err)
					}
					time.Sleep(60 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	f.settleAll(t, ids...)

	// Every charge each gateway made, by our reference (the attempt id).
	charged := map[string]string{}
	for name, s := range f.sims {
		for _, c := range s.Ledger() {
			if c.Status == sim.StatusSucceeded {
				if prev, dup := charged[c.Reference]; dup {
					t.Errorf("attempt %s charged on %s and %s", c.Reference, prev, name)
				}
				charged[c.Reference] = name
			}
		}
	}
	var cascades, proofs int
	for i, id := range ids {
		o, err := f.store.Order(ctx, order.AnyMerchant, id)
		if err != nil {
			t.Fatal(err)
		}
		h, err := f.store.OrderHistory(ctx, merchant, id, order.HistoryPage{Limit: 1000}, false)
		if err != nil {
			t.Fatal(err)
		}
		as, where := h.Attempts, fmt.Sprintf("order %d (%v, path %q)", i, plans[i].n.Routes, paths(h.Attempts))
		var paid []string
		for j, a := range as {
			if gw, ok := charged[a.ID]; ok {
				paid = append(paid, a.ID)
				if gw != a.Gateway {
					t.Errorf("%s: attempt %s recorded on %s, charged on %s", where, a.ID, a.Gateway, gw)
				}
				if j != len(as)-1 {
					t.Errorf("%s: attempt %d follows attempt %d, which charged", where, j+1, j)
				}
			}
			if j == 0 {
				continue
			}
			prev := as[j-1]
			if a.Gateway != prev.Gateway || a.CascadeAfter != "" {
				cascades++
				if order.CascadeAfter(prev.Outcome, prev.DeclineCode) != order.CascadeNext {
					t.Errorf("%s: attempt %d went to %s after %s %s: %s, which allows no cascade", where, j, a.Gateway,
						prev.Gateway, prev.Outcome, prev.DeclineCode)
				}
				if !strings.HasPrefix(a.CascadeAfter, prev.Gateway+" "+string(prev.Outcome)) {
					t.Errorf("%s: attempt %d cascade_after %q does not name the attempt before", where, j, a.CascadeAfter)
				}
			}
			if root, n, ok := strings.Cut(a.RequestID, "/cascade-"); ok && (n == "" || n > fmt.Sprint(order.MaxHops) || root == "") {
				t.Errorf("%s: attempt %d is hop %q of a call", where, j, n)
			}
		}
		if len(paid) > 1 {
			t.Errorf("%s: charged %d times: %v", where, len(paid), paid)
		}
		if len(paid) == 1 && (o.State != order.StatePaid || o.CurrentAttempt != paid[0]) {
			t.Errorf("%s: charged by %s, but the order is %s with attempt %s", where, paid[0], o.State, o.CurrentAttempt)
		}
		if len(paid) == 0 && o.State == order.StatePaid {
			t.Errorf("%s: PAID, and no gateway charged it", where)
		}
		// Every claim was made from PENDING, after the attempt before it
		// was settled as uncharged.
		settled := true
		current := ""
		for _, e := range h.Events {
			if e.Actor == order.ActorReconciler {
				proofs++
			}
			switch {
			case e.Name == string(order.EventCharge):
				if e.From != order.StatePending || !settled {
					t.Errorf("%s: attempt %s claimed from %s while attempt %s was unsettled", where, e.AttemptID, e.From, current)
				}
				current, settled = e.AttemptID, false
			case e.To == order.StatePending && e.From.AwaitsGateway():
				if e.AttemptID != current {
					t.Errorf("%s: attempt %s settled uncharged, but attempt %s is current", where, e.AttemptID, current)
				}
				settled = true
			}
		}
	}
	t.Logf("%d orders, %d changes of gateway, %d outcomes settled by the reconciler", orders, cascades, proofs)
	if cascades == 0 {
		t.Error("no cascade happened: the test exercised nothing")
	}
}
