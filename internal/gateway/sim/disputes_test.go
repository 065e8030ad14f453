package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// disputeStack is a stack whose events reach a refpsp client that
// verifies them.
func disputeStack(t *testing.T) (*stack, <-chan order.GatewayEvent) {
	t.Helper()
	const secret = "whsec_sim_disputes_0123456789abcdefgh"
	got := make(chan order.GatewayEvent, 50)
	var gw *refpsp.Client
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read event: %v", err)
			return
		}
		e, err := receiveOne(gw, body, r.Header)
		if err != nil {
			t.Errorf("ReceiveEvents: %v", err)
			return
		}
		got <- e
	}))
	t.Cleanup(receiver.Close)
	s := newStack(t, sim.Options{Events: sim.Events{URL: receiver.URL, Secrets: []string{secret}}}, time.Second)
	t.Cleanup(s.sim.Close)
	var err error
	gw, err = refpsp.New(refpsp.Config{BaseURL: s.srv.URL, APIKey: apiKey, EventSecrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	s.gw = gw
	return s, got
}

// nextDispute waits for the next dispute event.
func nextDispute(t *testing.T, got <-chan order.GatewayEvent) order.GatewayEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-got:
			if e.Dispute != nil {
				return e
			}
		case <-deadline:
			t.Fatal("no dispute event")
		}
	}
}

// TestDisputeLifecycle: the simulator opens a dispute of a succeeded
// charge, withdrawing its amount and fee; a response puts it under
// review; won gives both back, lost keeps them; each change is a signed
// event the refpsp client reads as the dispute; the ledger and the
// protocol's read agree with the events; accepting a closed dispute
// changes nothing.
func TestDisputeLifecycle(t *testing.T) {
	t.Parallel()
	s, got := disputeStack(t)
	ctx := context.Background()
	charge := func(attempt string) string {
		res, err := s.gw.Charge(ctx, req(attempt, "tok_ok"))
		if err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge = %+v, %v", res, err)
		}
		return res.ChargeID
	}
	won, lost := charge("att_won"), charge("att_lost")

	d, err := s.sim.OpenDispute(won, 0, "fraudulent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.sim.OpenDispute(won, 100, "duplicate"); !errors.Is(err, sim.ErrDisputeOpen) {
		t.Errorf("a second open dispute: %v, want ErrDisputeOpen", err)
	}
	e := nextDispute(t, got)
	want := order.GatewayDispute{ID: d.ID, Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, Reason: "fraudulent", NetworkReasonCode: "10.4",
		DueBy: d.DueBy, Withdrawn: 1250, Fee: sim.DisputeFee}
	if e.Type != refpsp.EventDisputeOpened || e.AttemptID != "att_won" || e.ChargeID != won || e.ObjectID != d.ID || *e.Dispute != want {
		t.Fatalf("dispute.opened: %+v %+v; want %+v", e, e.Dispute, want)
	}
	if _, err := s.sim.RespondDispute(d.ID); err != nil {
		t.Fatal(err)
	}
	e = nextDispute(t, got)
	want.Status = order.DisputeUnderReview
	if e.Type != refpsp.EventDisputeUpdated || *e.Dispute != want {
		t.Fatalf("dispute.updated: %+v; want %+v", e.Dispute, want)
	}
	if _, err := s.sim.ResolveDispute(d.ID, true); err != nil {
		t.Fatal(err)
	}
	e = nextDispute(t, got)
	want.Status, want.Reinstated, want.Fee = order.DisputeWon, 1250, 0
	if e.Type != refpsp.EventDisputeClosed || *e.Dispute != want {
		t.Fatalf("dispute.closed: %+v; want %+v", e.Dispute, want)
	}
	if _, err := s.sim.ResolveDispute(d.ID, false); !errors.Is(err, sim.ErrDisputeClosed) {
		t.Errorf("deciding a won dispute again: %v, want ErrDisputeClosed", err)
	}
	// Accepting a won dispute leaves it won; the read says so.
	var dg order.DisputeGateway = s.gw
	if g, err := dg.AcceptDispute(ctx, d.ID); err != nil || g != want {
		t.Errorf("AcceptDispute of a won dispute = %+v, %v; want %+v", g, err, want)
	}
	if g, err := dg.GetDispute(ctx, d.ID); err != nil || g != want {
		t.Errorf("GetDispute = %+v, %v; want %+v", g, err, want)
	}

	// The other is accepted by the merchant: lost, its amount kept.
	d2, err := s.sim.OpenDispute(lost, 1000, "product_not_received")
	if err != nil {
		t.Fatal(err)
	}
	nextDispute(t, got)
	for i := range 2 {
		g, err := dg.AcceptDispute(ctx, d2.ID)
		if err != nil || g.Status != order.DisputeLost || g.Withdrawn != 1000 || g.Reinstated != 0 {
			t.Fatalf("AcceptDispute #%d = %+v, %v; want LOST with 1000 withdrawn", i+1, g, err)
		}
	}
	if e := nextDispute(t, got); e.Type != refpsp.EventDisputeClosed || e.Dispute.Status != order.DisputeLost {
		t.Errorf("after the accept: %+v, want dispute.closed LOST", e)
	}
	// What is left of the charge may be disputed again; no more.
	if _, err := s.sim.OpenDispute(lost, 251, ""); !errors.Is(err, sim.ErrDisputeAmount) {
		t.Errorf("disputing more than is left: %v, want ErrDisputeAmount", err)
	}
	if _, err := dg.GetDispute(ctx, "dp_nosuch"); err == nil {
		t.Error("GetDispute of an unknown dispute: no error")
	}

	ledger := s.sim.Disputes()
	if len(ledger) != 2 || ledger[0].Status != refpsp.DisputeWon || ledger[0].Withdrawn != 1250 || ledger[0].Reinstated != 1250 ||
		ledger[1].Status != refpsp.DisputeLost || ledger[1].Withdrawn != 1000 || ledger[1].Reinstated != 0 {
		t.Errorf("dispute ledger %+v", ledger)
	}
	// Only a succeeded charge can be disputed.
	if res, _ := s.gw.Charge(ctx, req("att_declined", "tok_decline")); res.Outcome != order.OutcomeDeclined {
		t.Fatal(res)
	}
	if _, err := s.sim.OpenDispute(s.sim.Ledger()[2].ID, 0, ""); !errors.Is(err, sim.ErrNoCharge) {
		t.Errorf("disputing a declined charge: %v, want ErrNoCharge", err)
	}
}

// TestDisputeControls: the HTTP controls open, answer and decide a
// dispute as the Go methods do, with the API key only, and the dispute
// ledger lists the result.
func TestDisputeControls(t *testing.T) {
	t.Parallel()
	s, got := disputeStack(t)
	ctx := context.Background()
	res, err := s.gw.Charge(ctx, req("att_http", "tok_ok"))
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatal(res, err)
	}
	post := func(path, key string, body any) (int, sim.Dispute) {
		t.Helper()
		b, _ := json.Marshal(body)
		r, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, bytes.NewReader(b))
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d sim.Dispute
		_ = json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode, d
	}
	if code, _ := post("/v1/sim/disputes", "", map[string]any{"charge_id": res.ChargeID}); code != http.StatusUnauthorized {
		t.Errorf("a control without the key: %d, want 401", code)
	}
	if code, _ := post("/v1/sim/disputes", apiKey, map[string]any{"charge_id": "ch_nosuch"}); code != http.StatusNotFound {
		t.Errorf("a dispute of no charge: %d, want 404", code)
	}
	code, d := post("/v1/sim/disputes", apiKey, map[string]any{"charge_id": res.ChargeID, "amount": 500, "reason": "duplicate"})
	if code != http.StatusCreated || d.Amount != 500 || d.Status != refpsp.DisputeNeedsResponse {
		t.Fatalf("open: %d %+v", code, d)
	}
	if e := nextDispute(t, got); e.Type != refpsp.EventDisputeOpened || e.Dispute.ID != d.ID {
		t.Errorf("open told as %+v", e)
	}
	if code, d = post("/v1/sim/disputes/"+d.ID+"/respond", apiKey, nil); code != http.StatusOK || d.Status != refpsp.DisputeUnderReview {
		t.Fatalf("respond: %d %+v", code, d)
	}
	if code, d = post("/v1/sim/disputes/"+d.ID+"/resolve", apiKey, map[string]any{"won": false}); code != http.StatusOK || d.Status != refpsp.DisputeLost {
		t.Fatalf("resolve: %d %+v", code, d)
	}
	if code, _ = post("/v1/sim/disputes/"+d.ID+"/resolve", apiKey, map[string]any{"won": true}); code != http.StatusConflict {
		t.Errorf("resolving a closed dispute: %d, want 409", code)
	}
	resp, err := http.Get(s.srv.URL + "/v1/dispute-ledger")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ledger []sim.Dispute
	if err := json.NewDecoder(resp.Body).Decode(&ledger); err != nil || len(ledger) != 1 || ledger[0].ID != d.ID || ledger[0].Status != refpsp.DisputeLost {
		t.Errorf("dispute ledger %+v, %v", ledger, err)
	}
}

// TestDisputeSome: the chaos controls dispute a share of the succeeded
// charges and decide them, the same with the same seed, and ChargedBack
// sums what lost disputes kept.
func TestDisputeSome(t *testing.T) {
	t.Parallel()
	run := func() ([]sim.Dispute, map[string]int64) {
		s := newStack(t, sim.Options{Seed: 7}, time.Second)
		for i := range 40 {
			ref := "att_" + strconv.Itoa(i)
			if res, err := s.gw.Charge(context.Background(), req(ref, "tok_ok")); err != nil || res.Outcome != order.OutcomeSucceeded {
				t.Fatal(res, err)
			}
		}
		opened := s.sim.DisputeSome(0.5, "fraudulent")
		if len(opened) < 5 || len(opened) > 35 {
			t.Fatalf("%d of 40 charges disputed at a share of 0.5", len(opened))
		}
		if again := s.sim.DisputeSome(1, "fraudulent"); len(again)+len(opened) != 40 {
			t.Errorf("a second DisputeSome(1) opened %d, want the %d undisputed", len(again), 40-len(opened))
		}
		decided := s.sim.ResolveOpenDisputes(0.5)
		if len(decided) != 40 {
			t.Fatalf("%d disputes decided, want 40", len(decided))
		}
		back := map[string]int64{}
		halves := 0
		for _, d := range decided {
			if d.Amount != 1250 && d.Amount != 625 {
				t.Fatalf("dispute %+v is for neither all of its charge nor half", d)
			}
			if d.Amount == 625 {
				halves++
			}
			want := map[string]int64{refpsp.DisputeWon: 0, refpsp.DisputeLost: d.Amount}[d.Status]
			if d.Open() {
				t.Fatalf("dispute %+v still open", d)
			}
			if got := s.sim.ChargedBack(d.ChargeReference); got != want {
				t.Errorf("ChargedBack(%s) = %d for a %s dispute, want %d", d.ChargeReference, got, d.Status, want)
			}
			back[d.ChargeReference] = want
		}
		if halves == 0 || halves == 40 {
			t.Errorf("%d of 40 disputes are for half of the charge, want some and not all", halves)
		}
		return s.sim.Disputes(), back
	}
	d1, b1 := run()
	d2, b2 := run()
	for i := range d1 {
		if d1[i].ChargeReference != d2[i].ChargeReference || d1[i].Status != d2[i].Status {
			t.Fatalf("dispute %d: %+v, then %+v with the same seed", i, d1[i], d2[i])
		}
	}
	if len(b1) != len(b2) {
		t.Errorf("charged back %v, then %v", b1, b2)
	}
}

// TestDisputedChargeRefunds: a dispute is of what the refunds left; while
// it is open, a refund of its charge fails (charge_disputed, as Stripe's)
// and nothing is paid back; once it is decided, the rest can be refunded.
func TestDisputedChargeRefunds(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{APIKey: apiKey}, time.Second)
	ctx := context.Background()
	res, err := s.gw.Charge(ctx, req("att_1", "tok_ok"))
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v", res, err)
	}
	refund := func(id string, amount int64) order.Result {
		t.Helper()
		got, err := s.gw.Refund(ctx, order.RefundRequest{RefundID: id, OrderID: "ord_att_1", ChargeAttemptID: "att_1",
			Amount: order.Money{Currency: "GBP", AmountMinor: amount}})
		if got.Outcome == order.OutcomeUnknown {
			t.Fatalf("Refund(%s) = %+v, %v", id, got, err)
		}
		return got
	}
	if got := refund("ref_before", 250); got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("refund before the dispute: %+v", got)
	}
	d, err := s.sim.OpenDispute(res.ChargeID, 0, "fraudulent")
	if err != nil || d.Amount != 1000 || d.Withdrawn != 1000 {
		t.Fatalf("OpenDispute = %+v, %v; want the 1000 not refunded", d, err)
	}
	if got := refund("ref_during", 100); got.Outcome != order.OutcomeDeclined || got.DeclineCode != "charge_disputed" {
		t.Fatalf("refund during the dispute: %+v, want declined charge_disputed", got)
	}
	if got := s.sim.Refunded("att_1"); got != 250 {
		t.Fatalf("refunded %d, want 250", got)
	}
	if _, err := s.sim.ResolveDispute(d.ID, true); err != nil {
		t.Fatal(err)
	}
	if got := refund("ref_after", 100); got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("refund after the dispute was won: %+v", got)
	}
}

// TestResendDisputes: every dispute is told again as it stands, even when
// every event the simulator sends otherwise is lost.
func TestResendDisputes(t *testing.T) {
	t.Parallel()
	const secret = "whsec_sim_resend_0123456789abcdefgh"
	got := make(chan []byte, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
	}))
	t.Cleanup(receiver.Close)
	s := newStack(t, sim.Options{APIKey: apiKey, Events: sim.Events{URL: receiver.URL, Secrets: []string{secret}, Loss: 1}}, time.Second)
	t.Cleanup(s.sim.Close)
	ctx := context.Background()
	var ids []string
	for _, att := range []string{"att_open", "att_lost"} {
		res, err := s.gw.Charge(ctx, req(att, "tok_ok"))
		if err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge = %+v, %v", res, err)
		}
		d, err := s.sim.OpenDispute(res.ChargeID, 0, "fraudulent")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	if _, err := s.sim.ResolveDispute(ids[1], false); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		t.Fatalf("an event arrived although every event is lost: %s", b)
	case <-time.After(200 * time.Millisecond):
	}
	if n := s.sim.ResendDisputes(); n != 2 {
		t.Fatalf("ResendDisputes = %d, want 2", n)
	}
	want := map[string]string{ids[0]: refpsp.EventDisputeUpdated + " " + refpsp.DisputeNeedsResponse,
		ids[1]: refpsp.EventDisputeClosed + " " + refpsp.DisputeLost}
	for range 2 {
		select {
		case b := <-got:
			var e refpsp.Event
			if err := json.Unmarshal(b, &e); err != nil || e.Data.Dispute == nil {
				t.Fatalf("resent event %s: %v", b, err)
			}
			if w := want[e.Data.Dispute.ID]; w != e.Type+" "+e.Data.Dispute.Status {
				t.Errorf("resent %s %s of %s, want %s", e.Type, e.Data.Dispute.Status, e.Data.Dispute.ID, w)
			}
			delete(want, e.Data.Dispute.ID)
		case <-time.After(10 * time.Second):
			t.Fatalf("no resent event; still waiting for %v", want)
		}
	}
}
