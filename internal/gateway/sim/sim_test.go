package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

const apiKey = "sk_sim_test"

// stack is a simulator behind a real HTTP server, and a client for it.
type stack struct {
	sim *sim.Sim
	srv *httptest.Server
	gw  *refpsp.Client
}

func newStack(t *testing.T, opts sim.Options, clientTimeout time.Duration) *stack {
	t.Helper()
	s := &stack{sim: sim.New(opts)}
	s.srv = httptest.NewServer(s.sim)
	t.Cleanup(s.srv.Close)
	gw, err := refpsp.New(refpsp.Config{BaseURL: s.srv.URL, APIKey: apiKey, Timeout: clientTimeout})
	if err != nil {
		t.Fatal(err)
	}
	s.gw = gw
	return s
}

func req(attempt, token string) order.ChargeRequest {
	return order.ChargeRequest{
		AttemptID:         attempt,
		OrderID:           "ord_" + attempt,
		MerchantReference: "inv-" + attempt,
		Amount:            order.Money{Currency: "GBP", AmountMinor: 1250},
		PaymentMethod:     token,
	}
}

// statuses lists the ledger's charges for a reference by status.
func (s *stack) statuses(ref string) []string {
	var out []string
	for _, c := range s.sim.Ledger() {
		if c.Reference == ref {
			out = append(out, c.Status)
		}
	}
	return out
}

func TestTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		token string
		want  order.Result
		// ledger is the statuses the ledger should hold for the attempt.
		ledger []string
		// lookup is what a lookup says right after the charge.
		lookup order.Outcome
	}{
		{"tok_ok", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		// A token the simulator does not know is declined, not charged.
		{"pm_card_visa", order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_sim_000001", DeclineCode: "unknown_token"}, []string{"declined"}, order.OutcomeDeclined},
		{"tok_okk", order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_sim_000001", DeclineCode: "unknown_token"}, []string{"declined"}, order.OutcomeDeclined},
		{"tok_refund_timeout", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_refund_fail_later", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_refund_lookup_fails", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_timeout_silent", order.Result{Outcome: order.OutcomeUnknown}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_random", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_decline", order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_sim_000001", DeclineCode: "card_declined"}, []string{"declined"}, order.OutcomeDeclined},
		{"tok_decline_processing_error", order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_sim_000001", DeclineCode: "processing_error"}, []string{"declined"}, order.OutcomeDeclined},
		{"tok_decline_Stolen-Card", order.Result{Outcome: order.OutcomeDeclined, ChargeID: "ch_sim_000001", DeclineCode: "unknown_token"}, []string{"declined"}, order.OutcomeDeclined},
		{"tok_timeout", order.Result{Outcome: order.OutcomeUnknown}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_5xx_after_charge", order.Result{Outcome: order.OutcomeUnknown}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_drop_after_charge", order.Result{Outcome: order.OutcomeUnknown}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_slow_20", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_sim_000001"}, []string{"succeeded"}, order.OutcomeSucceeded},
		{"tok_refuse", order.Result{Outcome: order.OutcomeNotSent}, nil, order.OutcomeNotFound},
		{"tok_reject", order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_422"}, nil, order.OutcomeNotFound},
		{"tok_slow_soon", order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_422"}, nil, order.OutcomeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, sim.Options{APIKey: apiKey, ClientTimeout: 10 * time.Second}, time.Second)
			ctx := context.Background()
			got, err := s.gw.Charge(ctx, req("att_1", tt.token))
			if got != tt.want {
				t.Errorf("Charge() = %+v, want %+v (err %v)", got, tt.want, err)
			}
			if st := s.statuses("att_1"); !reflect.DeepEqual(st, tt.ledger) {
				t.Errorf("ledger = %v, want %v", st, tt.ledger)
			}
			res, err := s.gw.Lookup(ctx, req("att_1", tt.token))
			if err != nil || res.Outcome != tt.lookup {
				t.Errorf("Lookup() = %+v, %v; want %s", res, err, tt.lookup)
			}
		})
	}
}

func TestLedgerRecordsTheCharge(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	before := time.Now().UTC()
	r := req("att_1", "tok_ok")
	if _, err := s.gw.Charge(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	ledger := s.sim.Ledger()
	if len(ledger) != 1 {
		t.Fatalf("ledger has %d charges, want 1", len(ledger))
	}
	c := ledger[0]
	want := sim.Charge{
		ID: "ch_sim_000001", Reference: "att_1", Amount: 1250, Currency: "GBP",
		PaymentMethod: "tok_ok", Description: "inv-att_1", Status: sim.StatusSucceeded, Created: c.Created,
	}
	if c != want {
		t.Errorf("charge = %+v, want %+v", c, want)
	}
	if c.Created.Before(before.Add(-time.Second)) || c.Created.After(time.Now().Add(time.Second)) {
		t.Errorf("created %s, want about now", c.Created)
	}
}

// TestRequestCounters: the simulator counts the requests a gateway
// account's rate limit would (charges, lookups), and the lookups apart;
// its ledgers, which only tests read, count for nothing.
func TestRequestCounters(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	ctx := context.Background()
	r := req("att_count", "tok_ok")
	if _, err := s.gw.Charge(ctx, r); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.gw.Lookup(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(s.srv.URL + "/v1/ledger")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, lookups := s.sim.Requests(), s.sim.Lookups(); got != 4 || lookups != 3 {
		t.Errorf("counted %d requests and %d lookups; want 4 and 3", got, lookups)
	}
}

func TestLedgerEndpoint(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	for i, token := range []string{"tok_ok", "tok_decline", "tok_refuse", "tok_ok"} {
		_, _ = s.gw.Charge(context.Background(), req(fmt.Sprintf("att_%d", i), token))
	}

	resp, err := http.Get(s.srv.URL + "/v1/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/ledger: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got []sim.Charge
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := s.sim.Ledger()
	if len(want) != 3 {
		t.Fatalf("ledger has %d charges, want 3 (the refused one charged nothing)", len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("endpoint lists %d charges, Ledger %d", len(got), len(want))
	}
	for i := range want {
		if !got[i].Created.Equal(want[i].Created) {
			t.Errorf("charge %d created %s, want %s", i, got[i].Created, want[i].Created)
		}
		got[i].Created = want[i].Created
		if got[i] != want[i] {
			t.Errorf("charge %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEmptyLedgerIsAnArray(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	resp, err := http.Get(s.srv.URL + "/v1/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSpace(buf.Bytes()); string(got) != "[]" {
		t.Errorf("empty ledger = %s, want []", got)
	}
}

func TestDedupe(t *testing.T) {
	t.Parallel()
	for _, dedupe := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedupe=%t", dedupe), func(t *testing.T) {
			t.Parallel()
			s := newStack(t, sim.Options{Dedupe: dedupe}, time.Second)
			ctx := context.Background()
			first, err := s.gw.Charge(ctx, req("att_1", "tok_ok"))
			if err != nil {
				t.Fatal(err)
			}
			second, err := s.gw.Charge(ctx, req("att_1", "tok_ok"))
			if err != nil {
				t.Fatal(err)
			}
			wantCharges := 2
			if dedupe {
				wantCharges = 1
			}
			if n := len(s.statuses("att_1")); n != wantCharges {
				t.Fatalf("ledger has %d charges for att_1, want %d", n, wantCharges)
			}
			if sameID := first.ChargeID == second.ChargeID; sameID != dedupe {
				t.Errorf("charge ids %s and %s; want the same id: %t", first.ChargeID, second.ChargeID, dedupe)
			}
			// A lookup finds the latest charge.
			got, err := s.gw.Lookup(ctx, req("att_1", "tok_ok"))
			if err != nil || got != second {
				t.Errorf("Lookup() = %+v, %v; want %+v", got, err, second)
			}
		})
	}
}

func TestDedupeReplaysADecline(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{Dedupe: true}, time.Second)
	ctx := context.Background()
	first, _ := s.gw.Charge(ctx, req("att_1", "tok_decline"))
	// The same reference with another card is still the first, declined charge.
	again, _ := s.gw.Charge(ctx, req("att_1", "tok_ok"))
	if first.Outcome != order.OutcomeDeclined || again != first {
		t.Errorf("charges = %+v then %+v, want the same decline twice", first, again)
	}
	if st := s.statuses("att_1"); !reflect.DeepEqual(st, []string{"declined"}) {
		t.Errorf("ledger = %v, want one declined charge", st)
	}
}

// inFlightHold is how long the in-flight tests' charges are held and hidden
// from lookups. The test gives up on the charge as soon as the ledger shows
// it and then looks it up once while it is in flight, so the hold only has to
// outlast those two steps, which a loaded machine running -race can stretch
// to hundreds of milliseconds.
const inFlightHold = 2 * time.Second

// TestSlowChargeIsInFlight shows a lookup saying 404 about a charge that has
// happened, until its answer is due.
func TestSlowChargeIsInFlight(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, 10*time.Second)
	r := req("att_1", fmt.Sprintf("tok_slow_%d", inFlightHold.Milliseconds()))
	testInFlight(t, s, r)
}

func TestRandomTimeoutInFlight(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{
		ClientTimeout: inFlightHold,
		Random:        sim.RandomFaults{Timeout: 1, LookupNotFoundWhileInFlight: 1},
	}, 10*time.Second)
	testInFlight(t, s, req("att_1", "tok_ok"))
}

// testInFlight charges r, whose answer the simulator holds for inFlightHold,
// and hangs up once the charge is made. Lookups must say 404 until the
// answer is due and then find the charge.
func testInFlight(t *testing.T, s *stack, r order.ChargeRequest) {
	t.Helper()
	// The client hangs up when the ledger shows the charge rather than after
	// a short timeout of its own: a timeout could end the request before the
	// simulator had read it on a loaded machine, and nothing would be charged.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answered := make(chan chargeAnswer, 1)
	go func() {
		res, err := s.gw.Charge(ctx, r)
		answered <- chargeAnswer{res, err}
	}()
	made := waitForCharge(t, s, r.AttemptID, answered)
	cancel()
	if a := <-answered; a.res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Charge() = %+v, %v; want unknown (the client gave up first)", a.res, a.err)
	}
	if made.Status != sim.StatusSucceeded {
		t.Fatalf("ledger holds %+v, want the charge made", made)
	}

	// The simulator hides the charge until made.Created+inFlightHold by its
	// own clock, which is this process's; a lookup that returned before then
	// was answered while the charge was in flight.
	due := made.Created.Add(inFlightHold)
	got, err := s.gw.Lookup(context.Background(), r)
	if answeredBy := time.Now(); answeredBy.Before(due) {
		if err != nil || got.Outcome != order.OutcomeNotFound {
			t.Errorf("Lookup() while in flight = %+v, %v; want not found", got, err)
		}
	} else {
		t.Logf("the lookup came back %s after the answer was due; nothing to check while in flight", answeredBy.Sub(due))
	}
	waitForLookup(t, s, r, due)
}

// waitForCharge waits until the simulator's ledger holds a charge with the
// reference and returns it. It fails the test if the charge's answer comes
// first, which would mean the simulator answered without holding it.
func waitForCharge(t *testing.T, s *stack, ref string, answered <-chan chargeAnswer) sim.Charge {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for _, c := range s.sim.Ledger() {
			if c.Reference == ref {
				return c
			}
		}
		select {
		case a := <-answered:
			t.Fatalf("Charge() = %+v, %v before the ledger showed the charge; want it held", a.res, a.err)
		case <-deadline:
			t.Fatal("the ledger never showed the charge")
		case <-time.After(time.Millisecond):
		}
	}
}

// chargeAnswer is what a Charge call returned.
type chargeAnswer struct {
	res order.Result
	err error
}

// waitForLookup waits until a lookup of r finds the charge, and fails the
// test if it does so before notBefore.
func waitForLookup(t *testing.T, s *stack, r order.ChargeRequest, notBefore time.Time) {
	t.Helper()
	deadline := notBefore.Add(30 * time.Second)
	for {
		got, err := s.gw.Lookup(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		// Read after the lookup returned: the simulator decided before
		// then, so a find before notBefore is one the simulator made early.
		now := time.Now()
		if got.Outcome == order.OutcomeSucceeded {
			if now.Before(notBefore) {
				t.Fatalf("lookup found the charge %s before it was due", notBefore.Sub(now))
			}
			return
		}
		if now.After(deadline) {
			t.Fatalf("lookup still says %s %s after the charge was due", got.Outcome, now.Sub(notBefore))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRandomFaultsAreDeterministic(t *testing.T) {
	t.Parallel()
	faults := sim.RandomFaults{
		FiveXXNoCharge:    0.1,
		Decline:           0.15,
		Timeout:           0.05,
		FiveXXAfterCharge: 0.1,
		DropAfterCharge:   0.1,
		Slow:              0.1,
		SlowMax:           20 * time.Millisecond,
	}
	// run charges the same sequence of requests, one at a time, and says
	// what each came to and what the ledger holds.
	run := func(t *testing.T, seed uint64) (outcomes []order.Result, ledger []string) {
		// A second for each charge: one slower than that on a loaded
		// machine would be an outcome the seed did not draw.
		s := newStack(t, sim.Options{Seed: seed, Random: faults, ClientTimeout: 5 * time.Second}, time.Second)
		for i := range 40 {
			token := "tok_random"
			if i%2 == 0 {
				token = "tok_ok"
			}
			res, _ := s.gw.Charge(context.Background(), req(fmt.Sprintf("att_%02d", i), token))
			outcomes = append(outcomes, res)
		}
		for _, c := range s.sim.Ledger() {
			ledger = append(ledger, c.ID+" "+c.Reference+" "+c.Status)
		}
		return outcomes, ledger
	}

	outcomes1, ledger1 := run(t, 7)
	outcomes2, ledger2 := run(t, 7)
	if !reflect.DeepEqual(outcomes1, outcomes2) {
		t.Errorf("same seed, different outcomes:\n%v\n%v", outcomes1, outcomes2)
	}
	if !reflect.DeepEqual(ledger1, ledger2) {
		t.Errorf("same seed, different ledgers:\n%v\n%v", ledger1, ledger2)
	}

	// The faults do happen, and another seed draws them differently.
	seen := map[order.Outcome]int{}
	for _, r := range outcomes1 {
		seen[r.Outcome]++
	}
	for _, o := range []order.Outcome{order.OutcomeSucceeded, order.OutcomeDeclined, order.OutcomeUnknown} {
		if seen[o] == 0 {
			t.Errorf("no %s outcome in %v", o, seen)
		}
	}
	if outcomes3, _ := run(t, 8); reflect.DeepEqual(outcomes1, outcomes3) {
		t.Error("seeds 7 and 8 drew the same faults")
	}
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{APIKey: "sk_other"}, time.Second)
	got, err := s.gw.Charge(context.Background(), req("att_1", "tok_ok"))
	if got != (order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_401"}) {
		t.Errorf("Charge() with the wrong key = %+v, %v; want rejected_401", got, err)
	}
	if n := len(s.sim.Ledger()); n != 0 {
		t.Errorf("ledger has %d charges, want none", n)
	}
	if _, err := s.gw.Lookup(context.Background(), req("att_1", "tok_ok")); err == nil {
		t.Error("Lookup() with the wrong key succeeded")
	}

	// Without Options.APIKey any bearer token will do, but one is needed.
	open := newStack(t, sim.Options{}, time.Second)
	resp, err := http.Post(open.srv.URL+"/v1/charges", "application/json",
		bytes.NewReader([]byte(`{"reference":"att_1","amount":1,"currency":"GBP","payment_method":"tok_ok"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(open.sim.Ledger()) != 0 {
		t.Errorf("charge without a key: %s, %d charges; want 401, none", resp.Status, len(open.sim.Ledger()))
	}
}

func TestInvalidRequestsChargeNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	tests := map[string]string{
		"not JSON":          `charge me`,
		"no reference":      `{"amount":1,"currency":"GBP","payment_method":"tok_ok"}`,
		"no amount":         `{"reference":"att_1","currency":"GBP","payment_method":"tok_ok"}`,
		"negative amount":   `{"reference":"att_1","amount":-5,"currency":"GBP","payment_method":"tok_ok"}`,
		"no currency":       `{"reference":"att_1","amount":1,"payment_method":"tok_ok"}`,
		"no payment method": `{"reference":"att_1","amount":1,"currency":"GBP"}`,
	}
	for name, body := range tests {
		r, err := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/charges", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("%s: %s, want a 4xx", name, resp.Status)
		}
	}
	if n := len(s.sim.Ledger()); n != 0 {
		t.Errorf("ledger has %d charges, want none", n)
	}
}

func TestServeShutsDownDespiteAHeldAnswer(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{ClientTimeout: time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	gw, err := refpsp.New(refpsp.Config{BaseURL: "http://" + ln.Addr().String(), APIKey: apiKey, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	charged := make(chan order.Result, 1)
	go func() {
		res, _ := gw.Charge(context.Background(), req("att_1", "tok_timeout"))
		charged <- res
	}()
	for len(s.Ledger()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}

	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve() = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("shutdown took %s; the held answer kept it waiting", elapsed)
	}
	if res := <-charged; res.Outcome != order.OutcomeUnknown {
		t.Errorf("charge cut short by shutdown = %+v, want unknown", res)
	}
}

func TestListenAndServeReportsABadAddress(t *testing.T) {
	t.Parallel()
	err := sim.New(sim.Options{}).ListenAndServe(context.Background(), "127.0.0.1:-1")
	if err == nil {
		t.Fatal("ListenAndServe on a bad address returned nil")
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("error %v does not wrap the listen error", err)
	}
}

func TestSucceededCountsOnlySucceededChargesOfTheReferences(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	ctx := context.Background()
	for _, c := range []struct{ attempt, token string }{
		{"att_1", "tok_ok"}, {"att_1", "tok_ok"}, // no Dedupe: charged twice
		{"att_2", "tok_decline"}, {"att_3", "tok_ok"}, {"att_4", "tok_reject"},
	} {
		_, _ = s.gw.Charge(ctx, req(c.attempt, c.token))
	}
	for _, tt := range []struct {
		refs []string
		want int
	}{
		{nil, 0},
		{[]string{"att_1"}, 2},
		{[]string{"att_2"}, 0},
		{[]string{"att_4"}, 0},
		{[]string{"att_1", "att_2", "att_3"}, 3},
		{[]string{"att_9"}, 0},
	} {
		if got := s.sim.Succeeded(tt.refs...); got != tt.want {
			t.Errorf("Succeeded(%v) = %d, want %d", tt.refs, got, tt.want)
		}
	}
}

// TestLookupFails: tok_lookup_fails charges, times out, and then no lookup
// can tell: the reconciler's path to NEEDS_REVIEW.
func TestLookupFails(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{APIKey: apiKey, ClientTimeout: 10 * time.Second}, time.Second)
	ctx := context.Background()
	if got, _ := s.gw.Charge(ctx, req("att_1", "tok_lookup_fails")); got.Outcome != order.OutcomeUnknown {
		t.Fatalf("Charge() = %+v; want unknown", got)
	}
	if n := s.sim.Succeeded("att_1"); n != 1 {
		t.Fatalf("%d charges in the ledger, want 1", n)
	}
	for range 3 {
		res, err := s.gw.Lookup(ctx, req("att_1", "tok_lookup_fails"))
		if err == nil || res.Outcome != order.OutcomeUnknown {
			t.Fatalf("Lookup() = %+v, %v; want an error and an unknown outcome", res, err)
		}
	}
}

// TestRefundLookupFails: tok_refund_lookup_fails charges at once; its
// refund is made, answers after the deadline, and then no lookup can tell:
// the refund reconciler's path to NEEDS_REVIEW. The charge itself can still
// be looked up.
func TestRefundLookupFails(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{APIKey: apiKey, ClientTimeout: 10 * time.Second}, time.Second)
	ctx := context.Background()
	if got, err := s.gw.Charge(ctx, req("att_1", "tok_refund_lookup_fails")); got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge() = %+v, %v; want succeeded", got, err)
	}
	if res, err := s.gw.Lookup(ctx, req("att_1", "tok_refund_lookup_fails")); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Lookup() = %+v, %v; want succeeded", res, err)
	}
	rr := order.RefundRequest{RefundID: "ref_1", OrderID: "ord_att_1", ChargeAttemptID: "att_1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 500}}
	if got, _ := s.gw.Refund(ctx, rr); got.Outcome != order.OutcomeUnknown {
		t.Fatalf("Refund() = %+v; want unknown", got)
	}
	if got := s.sim.Refunds(); len(got) != 1 || got[0].Status != refpsp.RefundSucceeded {
		t.Fatalf("refund ledger = %+v; want one succeeded refund", got)
	}
	for range 3 {
		res, err := s.gw.LookupRefund(ctx, rr)
		if err == nil || res.Outcome != order.OutcomeUnknown {
			t.Fatalf("LookupRefund() = %+v, %v; want an error and an unknown outcome", res, err)
		}
	}
}

// TestSilentTokensSendNoEvent: of tok_timeout, tok_timeout_silent and
// tok_lookup_fails, only tok_timeout's charge is pushed as an event.
func TestSilentTokensSendNoEvent(t *testing.T) {
	t.Parallel()
	got := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e refpsp.Event
		if err := json.NewDecoder(r.Body).Decode(&e); err == nil {
			got <- e.Data.Object.Reference
		}
	}))
	t.Cleanup(receiver.Close)
	s := newStack(t, sim.Options{APIKey: apiKey, ClientTimeout: 5 * time.Second,
		Events: sim.Events{URL: receiver.URL, Secrets: []string{"whsec_test"}}}, time.Second)
	t.Cleanup(s.sim.Close)
	ctx := context.Background()
	for _, c := range []struct{ ref, token string }{{"att_silent", "tok_timeout_silent"}, {"att_fails", "tok_lookup_fails"}, {"att_loud", "tok_timeout"}} {
		if res, _ := s.gw.Charge(ctx, req(c.ref, c.token)); res.Outcome != order.OutcomeUnknown {
			t.Fatalf("Charge(%s) = %+v; want unknown", c.token, res)
		}
	}
	// Events are sent in order of the charges' visibility; the loud one is
	// the last charge, so once it arrives the silent ones would have too.
	select {
	case ref := <-got:
		if ref != "att_loud" {
			t.Fatalf("event for %s; want only att_loud's", ref)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event for tok_timeout's charge")
	}
	select {
	case ref := <-got:
		t.Fatalf("a second event, for %s", ref)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestChallengePages: a tok_3ds challenge's page has a random id and a
// secret; the charge's own id, a wrong secret or another challenge's
// secret end nothing, and only the URL the charge answered ends it.
func TestChallengePages(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{APIKey: apiKey}, 2*time.Second)
	ctx := context.Background()
	present := func(ref string) order.Result {
		r := req(ref, "tok_3ds")
		r.CustomerPresent = true
		res, err := s.gw.Charge(ctx, r)
		if err != nil || res.Outcome != order.OutcomeRequiresAction || res.NextAction.RedirectURL == "" {
			t.Fatalf("Charge(tok_3ds) = %+v, %v; want requires_action with a page", res, err)
		}
		return res
	}
	a, b := present("att_a"), present("att_b")
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	pageA, pageB := a.NextAction.RedirectURL, b.NextAction.RedirectURL
	idA, secretA := splitPage(t, pageA)
	idB, secretB := splitPage(t, pageB)
	if idA == idB || secretA == secretB || len(idA) < 20 || len(secretA) < 20 {
		t.Fatalf("challenge pages %s and %s: want distinct random ids and secrets", pageA, pageB)
	}
	for _, url := range []string{
		s.srv.URL + "/v1/charges/" + a.ChargeID + "/authenticate", // the old, sequential page
		s.srv.URL + "/v1/challenges/" + idA,
		s.srv.URL + "/v1/challenges/" + idA + "/wrong",
		s.srv.URL + "/v1/challenges/" + idA + "/" + secretB,
	} {
		if code := get(url); code != http.StatusNotFound {
			t.Errorf("GET %s = %d; want 404", url, code)
		}
	}
	if n := s.sim.Succeeded("att_a", "att_b"); n != 0 {
		t.Fatalf("%d charges after guessed pages; want none", n)
	}
	if code := get(pageA); code != http.StatusOK {
		t.Fatalf("GET %s = %d; want 200", pageA, code)
	}
	if code := get(pageB + "?fail=1"); code != http.StatusOK {
		t.Fatalf("GET %s?fail=1 = %d; want 200", pageB, code)
	}
	if n, m := s.sim.Succeeded("att_a"), s.sim.Succeeded("att_b"); n != 1 || m != 0 {
		t.Errorf("succeeded charges: att_a %d, att_b %d; want 1 and 0", n, m)
	}
	// The ledger, which needs no key, does not hand out the pages.
	resp, err := http.Get(s.srv.URL + "/v1/ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(body.Bytes(), []byte(secretA)) || bytes.Contains(body.Bytes(), []byte(secretB)) {
		t.Errorf("the ledger shows a challenge's secret: %s", body.String())
	}
}

// splitPage returns the id and the secret of a challenge page's URL.
func splitPage(t *testing.T, page string) (id, secret string) {
	t.Helper()
	_, rest, ok := strings.Cut(page, "/v1/challenges/")
	id, secret, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		t.Fatalf("challenge page %s is not /v1/challenges/<id>/<secret>", page)
	}
	return id, secret
}
