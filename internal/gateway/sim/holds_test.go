package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// authReq is a request to authorize 1250 GBP with token.
func authReq(attempt, token string) order.ChargeRequest {
	r := req(attempt, token)
	r.Capture = order.CaptureManual
	return r
}

func captureReq(id, attempt string, amount int64, final bool) order.CaptureRequest {
	return order.CaptureRequest{CaptureID: id, OrderID: "ord_" + attempt, ChargeAttemptID: attempt,
		Amount: order.Money{Currency: "GBP", AmountMinor: amount}, Final: final}
}

func voidReq(id, attempt string) order.VoidRequest {
	return order.VoidRequest{VoidID: id, OrderID: "ord_" + attempt, ChargeAttemptID: attempt}
}

// authorize authorizes with token and fails the test unless it succeeded.
func (s *stack) authorize(t *testing.T, attempt, token string) order.Result {
	t.Helper()
	res, err := s.gw.Charge(context.Background(), authReq(attempt, token))
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold == nil || res.Hold.State != order.HoldOpen {
		t.Fatalf("Charge(manual, %s) = %+v, %v; want an open hold", token, res, err)
	}
	return res
}

// TestAuthorizationLedger: an authorization is in the ledger as such, with
// its capture_before at Options.AuthorizationLifetime, and the ledger
// follows what its captures take; Succeeded counts only charges made at
// once.
func TestAuthorizationLedger(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{AuthorizationLifetime: time.Hour}, time.Second)
	before := time.Now()
	res := s.authorize(t, "att_1", "tok_ok")
	if cb := res.Hold.CaptureBefore; cb.Before(before.Add(time.Hour)) || cb.After(time.Now().Add(time.Hour)) {
		t.Errorf("capture_before %s, want an hour from the authorization", cb)
	}
	if _, err := s.gw.Capture(context.Background(), captureReq("cap_1", "att_1", 400, false)); err != nil {
		t.Fatal(err)
	}
	l := s.sim.Ledger()
	if len(l) != 1 || !l[0].Manual || l[0].Status != sim.StatusAuthorized || l[0].AmountCaptured != 400 || !l[0].CaptureBefore.Equal(res.Hold.CaptureBefore) {
		t.Fatalf("ledger = %+v; want one authorization, 400 captured", l)
	}
	if n := s.sim.Succeeded("att_1"); n != 0 {
		t.Errorf("Succeeded = %d, want 0 for an authorization", n)
	}
	if c := s.sim.Captures(); len(c) != 1 || c[0].Reference != "cap_1" || c[0].Status != refpsp.OpSucceeded || c[0].Amount != 400 {
		t.Errorf("captures = %+v; want cap_1, 400, succeeded", c)
	}
	for _, path := range []string{"/v1/capture-ledger", "/v1/void-ledger"} {
		resp, err := http.Get(s.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var got []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got == nil {
			t.Errorf("GET %s: %d, %v, %v; want 200 and a JSON array", path, resp.StatusCode, got, err)
		}
	}
}

// TestHoldFaults: each capture and void token's fault, after the capture
// or void is made: the client cannot tell, the ledger can, and a lookup
// can (or, for the lookup_fails tokens, cannot).
func TestHoldFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		token      string
		void       bool
		lookupFail bool
	}{
		{"tok_capture_timeout", false, false},
		{"tok_capture_lookup_fails", false, true},
		{"tok_capture_5xx", false, false},
		{"tok_capture_drop", false, false},
		{"tok_void_timeout", true, false},
		{"tok_void_lookup_fails", true, true},
		{"tok_void_5xx", true, false},
		{"tok_void_drop", true, false},
	} {
		t.Run(tc.token, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, sim.Options{ClientTimeout: 5 * time.Second}, 300*time.Millisecond)
			ctx := context.Background()
			s.authorize(t, "att_1", tc.token)
			// The other operation meets no fault.
			var res order.Result
			var err error
			if tc.void {
				res, err = s.gw.Void(ctx, voidReq("vd_1", "att_1"))
			} else {
				res, err = s.gw.Capture(ctx, captureReq("cap_1", "att_1", 1250, true))
			}
			if res.Outcome != order.OutcomeUnknown || err == nil {
				t.Fatalf("%s = %+v, %v; want unknown with an error", tc.token, res, err)
			}
			want := sim.StatusCaptured
			if tc.void {
				want = sim.StatusVoided
			}
			if l := s.sim.Ledger(); l[0].Status != want {
				t.Fatalf("authorization is %s, want %s: the fault comes after the %s is made", l[0].Status, want, want)
			}
			if tc.void {
				res, err = s.gw.LookupVoid(ctx, voidReq("vd_1", "att_1"))
			} else {
				res, err = s.gw.LookupCapture(ctx, captureReq("cap_1", "att_1", 1250, true))
			}
			if tc.lookupFail {
				if err == nil || res.Outcome != order.OutcomeUnknown {
					t.Fatalf("lookup = %+v, %v; want an error", res, err)
				}
				return
			}
			if err != nil || res.Outcome != order.OutcomeSucceeded {
				t.Fatalf("lookup = %+v, %v; want succeeded", res, err)
			}
		})
	}
}

// TestRandomFaultsReachCaptures: the random rates apply to the captures
// and voids of tok_ok authorizations too.
func TestRandomFaultsReachCaptures(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{Random: sim.RandomFaults{FiveXXAfterCharge: 1}}, time.Second)
	ctx := context.Background()
	if res, _ := s.gw.Charge(ctx, authReq("att_1", "tok_ok")); res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Charge = %+v; want unknown (500 after authorizing)", res)
	}
	if res, _ := s.gw.Capture(ctx, captureReq("cap_1", "att_1", 500, false)); res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Capture = %+v; want unknown (500 after capturing)", res)
	}
	if res, _ := s.gw.Void(ctx, voidReq("vd_1", "att_1")); res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Void = %+v; want unknown (500 after refusing)", res)
	}
	if c, v := s.sim.Captures(), s.sim.Voids(); len(c) != 1 || c[0].Status != refpsp.OpSucceeded ||
		len(v) != 1 || v[0].Status != refpsp.OpFailed || v[0].FailureCode != refpsp.FailureCaptured {
		t.Fatalf("captures %+v, voids %+v; want one succeeded capture and one refused void", c, v)
	}

}

// TestCaptureDedupe: with Dedupe, a repeated capture or void is answered
// with the one made, and a capture reference reused with other
// parameters is refused 409, which the adapter calls unknown; without
// it, a repeated capture captures again.
func TestCaptureDedupe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, sim.Options{Dedupe: true}, time.Second)
	s.authorize(t, "att_1", "tok_ok")
	first, err := s.gw.Capture(ctx, captureReq("cap_1", "att_1", 500, false))
	if err != nil || first.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Capture = %+v, %v", first, err)
	}
	again, err := s.gw.Capture(ctx, captureReq("cap_1", "att_1", 500, false))
	if err != nil || again.ChargeID != first.ChargeID || again.Hold.CapturedMinor != 500 {
		t.Fatalf("repeated Capture = %+v, %v; want the first one, 500 captured", again, err)
	}
	other, err := s.gw.Capture(ctx, captureReq("cap_1", "att_1", 600, false))
	if other.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Capture reusing the reference = %+v, %v; want unknown (409)", other, err)
	}
	if c := s.sim.Captures(); len(c) != 1 {
		t.Fatalf("captures = %+v; want one", c)
	}

	n := newStack(t, sim.Options{}, time.Second)
	n.authorize(t, "att_1", "tok_ok")
	for range 2 {
		if res, err := n.gw.Capture(ctx, captureReq("cap_1", "att_1", 500, false)); err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Capture = %+v, %v", res, err)
		}
	}
	if l := n.sim.Ledger(); l[0].AmountCaptured != 1000 || n.sim.Captured("att_1") != 1000 {
		t.Fatalf("captured %d; want 1000: a gateway without dedupe captures every request", l[0].AmountCaptured)
	}
}

// TestCaptureRefusals: the failure codes of the protocol's rules, each
// kept in the ledger as a failed capture or void.
func TestCaptureRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, sim.Options{}, time.Second)
	if res, _ := s.gw.Charge(ctx, req("att_auto", "tok_ok")); res.Outcome != order.OutcomeSucceeded {
		t.Fatal(res)
	}
	s.authorize(t, "att_open", "tok_ok")
	s.authorize(t, "att_void", "tok_ok")
	if res, err := s.gw.Void(ctx, voidReq("vd_1", "att_void")); err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold.State != order.HoldVoided {
		t.Fatalf("Void = %+v, %v", res, err)
	}
	for _, tc := range []struct {
		name string
		do   func() (order.Result, error)
		code string
	}{
		{"capture of a charge made at once", func() (order.Result, error) {
			return s.gw.Capture(ctx, captureReq("c1", "att_auto", 100, true))
		}, refpsp.FailureNotAuthorization},
		{"capture over the hold", func() (order.Result, error) {
			return s.gw.Capture(ctx, captureReq("c2", "att_open", 1251, true))
		}, refpsp.FailureTooLarge},
		{"capture after a void", func() (order.Result, error) {
			return s.gw.Capture(ctx, captureReq("c3", "att_void", 100, true))
		}, refpsp.FailureVoided},
		{"a second void", func() (order.Result, error) {
			return s.gw.Void(ctx, voidReq("vd_2", "att_void"))
		}, refpsp.FailureVoided},
		{"capture of no charge", func() (order.Result, error) {
			return s.gw.Capture(ctx, captureReq("c4", "att_none", 100, true))
		}, "rejected_404"},
		{"capture in another currency", func() (order.Result, error) {
			r := captureReq("c5", "att_open", 100, true)
			r.Amount.Currency = "EUR"
			return s.gw.Capture(ctx, r)
		}, "rejected_422"},
	} {
		res, _ := tc.do()
		if res.Outcome != order.OutcomeDeclined || res.DeclineCode != tc.code {
			t.Errorf("%s = %+v; want declined %s", tc.name, res, tc.code)
		}
	}
	if res, err := s.gw.LookupCapture(ctx, captureReq("c2", "att_open", 1251, true)); err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != refpsp.FailureTooLarge {
		t.Errorf("LookupCapture of the refused capture = %+v, %v; want declined %s", res, err, refpsp.FailureTooLarge)
	}
	var failed []string
	for _, c := range s.sim.Captures() {
		if c.Status == refpsp.OpFailed {
			failed = append(failed, c.Reference)
		}
	}
	if !slices.Equal(failed, []string{"c1", "c2", "c3"}) {
		t.Errorf("failed captures %v; want c1, c2, c3 (404 and 422 keep nothing)", failed)
	}
}

// TestLapse: an authorization lapses at its capture_before: expired with
// nothing captured, captured with something; a capture or void after it
// is refused authorization_expired.
func TestLapse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, sim.Options{AuthorizationLifetime: 2 * time.Second}, time.Second)
	s.authorize(t, "att_part", "tok_ok")
	if res, err := s.gw.Capture(ctx, captureReq("c1", "att_part", 200, false)); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Capture = %+v, %v", res, err)
	}
	s.authorize(t, "att_none", "tok_ok")
	// Until the last one made has lapsed.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := s.gw.Lookup(ctx, authReq("att_none", "tok_ok")); err == nil && res.Hold != nil && res.Hold.State != order.HoldOpen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("att_none has not lapsed")
		}
	}
	for ref, want := range map[string]order.Hold{
		"att_none": {State: order.HoldExpired, AuthorizedMinor: 1250},
		"att_part": {State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 200},
	} {
		res, err := s.gw.Lookup(ctx, authReq(ref, "tok_ok"))
		if err != nil || res.Hold == nil || res.Hold.State != want.State || res.Hold.CapturedMinor != want.CapturedMinor {
			t.Errorf("Lookup(%s) = %+v, %v; want %+v", ref, res.Hold, err, want)
		}
		if res, _ := s.gw.Capture(ctx, captureReq("c_"+ref, ref, 100, true)); res.DeclineCode != refpsp.FailureExpired {
			t.Errorf("Capture after the lapse of %s = %+v; want declined %s", ref, res, refpsp.FailureExpired)
		}
		if res, _ := s.gw.Void(ctx, voidReq("v_"+ref, ref)); res.DeclineCode != refpsp.FailureExpired {
			t.Errorf("Void after the lapse of %s = %+v; want declined %s", ref, res, refpsp.FailureExpired)
		}
	}
}

// TestAuthorizeAfterChallenge: a tok_3ds authorization holds once the
// customer has authenticated.
func TestAuthorizeAfterChallenge(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	r := authReq("att_1", "tok_3ds")
	r.CustomerPresent = true
	res, err := s.gw.Charge(context.Background(), r)
	if err != nil || res.Outcome != order.OutcomeRequiresAction {
		t.Fatalf("Charge = %+v, %v; want requires action", res, err)
	}
	resp, err := http.Get(res.NextAction.RedirectURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got, err := s.gw.Lookup(context.Background(), r)
	if err != nil || got.Outcome != order.OutcomeSucceeded || got.Hold == nil || got.Hold.State != order.HoldOpen || got.Hold.CaptureBefore.IsZero() {
		t.Fatalf("Lookup = %+v, %v; want an open hold with a capture_before", got, err)
	}
}

// TestHoldEvents: the simulator pushes signed events for an
// authorization, its captures and voids, and its lapse, which the adapter
// reads as events about the attempt, the capture or the void.
func TestHoldEvents(t *testing.T) {
	t.Parallel()
	const secret = "whsec_sim_holds_0123456789abcdefghij"
	got := make(chan order.GatewayEvent, 20)
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
	s := newStack(t, sim.Options{AuthorizationLifetime: 2 * time.Second,
		Events: sim.Events{URL: receiver.URL, Secrets: []string{secret}}}, time.Second)
	t.Cleanup(s.sim.Close)
	var err error
	gw, err = refpsp.New(refpsp.Config{BaseURL: s.srv.URL, APIKey: apiKey, EventSecrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.authorize(t, "att_cap", "tok_ok")
	s.authorize(t, "att_lapse", "tok_ok")
	if res, _ := s.gw.Capture(ctx, captureReq("cap_1", "att_cap", 1250, true)); res.Outcome != order.OutcomeSucceeded {
		t.Fatal(res)
	}
	if res, _ := s.gw.Void(ctx, voidReq("vd_1", "att_cap")); res.Outcome != order.OutcomeDeclined {
		t.Fatal(res)
	}
	want := map[string]order.GatewayEvent{
		"att_cap":   {Type: refpsp.EventAuthorized, AttemptID: "att_cap", Succeeded: true},
		"att_lapse": {Type: refpsp.EventAuthorized, AttemptID: "att_lapse", Succeeded: true},
		"cap_1":     {Type: refpsp.EventCaptureSucceeded, AttemptID: "cap_1", About: order.EventAboutCapture, Succeeded: true},
		"vd_1":      {Type: refpsp.EventVoidFailed, AttemptID: "vd_1", About: order.EventAboutVoid},
		"expired":   {Type: refpsp.EventAuthorizationExpired, AttemptID: "att_lapse"},
	}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case e := <-got:
			key := e.AttemptID
			if e.Type == refpsp.EventAuthorizationExpired {
				key = "expired"
			}
			w, ok := want[key]
			if !ok || e.Type != w.Type || e.About != w.About || e.Succeeded != w.Succeeded || e.ObjectID == "" {
				t.Fatalf("event %+v; want %+v", e, w)
			}
			delete(want, key)
		case <-deadline:
			t.Fatalf("events still missing: %+v", want)
		}
	}
	// att_cap was captured before its capture_before: no lapse is told.
	select {
	case e := <-got:
		if e.Type == refpsp.EventAuthorizationExpired {
			t.Fatalf("a lapse event for %s, which was captured", e.AttemptID)
		}
	case <-time.After(500 * time.Millisecond):
	}
}

// receiveOne is ReceiveEvents for a request that carries one event.
func receiveOne(r order.EventReceiver, body []byte, header map[string][]string) (order.GatewayEvent, error) {
	evs, err := r.ReceiveEvents(body, header)
	if err != nil {
		return order.GatewayEvent{}, err
	}
	if len(evs) != 1 {
		return order.GatewayEvent{}, fmt.Errorf("%d events, want one", len(evs))
	}
	return evs[0], nil
}
