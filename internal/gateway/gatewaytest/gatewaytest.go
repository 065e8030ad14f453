// Package gatewaytest is the conformance suite that every order.Gateway
// adapter passes, each against a fake of its gateway: one set of behaviour
// tests, so that the charge path and the reconciler can count on the same
// things whatever the gateway.
//
// An adapter's test calls Run with a function that builds a fresh Harness
// (adapter and fake) for each test:
//
//	func TestConformance(t *testing.T) {
//		gatewaytest.Run(t, func(t *testing.T) gatewaytest.Harness { ... })
//	}
//
// What the suite holds every gateway to:
//
//   - a charge reports succeeded with the gateway's charge id, or declined
//     with a decline code, and the gateway's ledger agrees;
//   - a call that outlives its timeout reports unknown, with an error, and
//     returns in time;
//   - an error never comes with succeeded or declined;
//   - Lookup of a charged or declined attempt says so, and charges nothing
//     more;
//   - Lookup after an unknown outcome eventually finds the one charge;
//   - an attempt is charged at most once, whatever is called how often;
//   - a merchant-initiated (off-session) charge of a card that needs the
//     customer's authentication is declined
//     order.DeclineAuthenticationRequired, and leaves nothing open that an
//     authentication or a later confirm could still charge;
//   - every call is reported to the adapter's observer, once, with its
//     ids and its result.
//
// Refunds (refunds.go), authorize, capture and void (captures.go), the
// reads of disputes (disputes.go) and the listings of charges and refunds
// (listing.go) have cases of their own.
//
// A Lookup never moves money. Two capabilities differ between gateways and
// are declared in the Harness: whether a repeated Charge of one attempt is
// deduplicated by the gateway, and how Lookup proves that an attempt the
// gateway never charged will not be charged: by canceling it (Stripe), or
// by reporting it not found, which the reconciler trusts only past the
// no-show horizon (refpsp).
package gatewaytest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Harness is one adapter under test, talking to a fake of its gateway that
// the harness owns.
type Harness struct {
	// Gateway is the adapter under test.
	Gateway order.Gateway
	// OK, Decline and Timeout name payment methods for which the fake
	// charges; declines; and charges but answers only after CallTimeout
	// has passed.
	OK, Decline, Timeout string
	// CallTimeout is the longest a Charge or Lookup of the adapter may take
	// (its configured timeout). The fake's answer to the Timeout payment
	// method must come later than this.
	CallTimeout time.Duration
	// Ledger lists what the fake recorded for an attempt (by its reference
	// or idempotency key), in order.
	Ledger func(attemptID string) []Entry
	// DedupesCharges says that the gateway charges an attempt once however
	// often Charge is called with it.
	DedupesCharges bool
	// LookupCancels says that Lookup proves an attempt uncharged by
	// canceling it at the gateway: Lookup of an attempt the gateway never
	// charged reports it declined (never not found), and no later Charge of
	// the attempt can charge it.
	LookupCancels bool
	// Unreachable, when set, is the same adapter configured with an address
	// where nothing listens.
	Unreachable order.Gateway
	// RefundTimeout and RefundFailLater name payment methods whose charges
	// succeed, and whose refunds then succeed with the answer held past
	// CallTimeout, or are answered pending and fail soon after. With
	// RefundLedger (the fake's refunds under a refund's reference or
	// idempotency key), RefundFailLater is required of a Gateway that is
	// an order.Refunder, and RefundTimeout runs its case when set;
	// refunds.go lists what the suite checks.
	RefundTimeout, RefundFailLater string
	RefundLedger                   func(refundID string) []Entry
	// Observed returns the same adapter configured with obs as its
	// Observer (each adapter's Config.Observer).
	Observed func(obs gateway.Observer) order.Gateway
	// Action, when set, names a payment method that the fake charges only
	// once the customer has authenticated (3-D Secure); the suite then
	// checks an off-session charge of it.
	Action string
	// Captures opts the harness in to the suite's authorize, capture and
	// void cases (captures.go): its Gateway must then be an
	// order.Capturer, and CaptureLedger set (the fake's captures under a
	// capture's reference or idempotency key).
	Captures      bool
	CaptureLedger func(captureID string) []Entry
	// CaptureTimeout, when set, names a payment method whose
	// authorizations succeed, and whose captures are made with the answer
	// held past CallTimeout.
	CaptureTimeout string
	// Lapse, when set, names a payment method whose authorizations lapse
	// at the gateway within a few seconds.
	Lapse string
	// Expire, when set, makes the fake let the authorization chargeID
	// lapse now; the suite uses it where Lapse is not set.
	Expire func(chargeID string)
	// SingleCapture says that the gateway captures an authorization once:
	// a capture with Final false is declined, and nothing moves (Stripe
	// without Config.Multicapture).
	SingleCapture bool
	// VoidEndsCapturedHold says that a void after a capture with Final
	// false, though declined, ends the hold: what was captured stays, the
	// rest is released (Stripe's cancel of a multicaptured intent).
	VoidEndsCapturedHold bool
	// Notified says that the gateway has no status read and reports every
	// outcome by notification (Adyen): Lookup and the lookups of
	// captures, voids and refunds answer from the notifications recorded,
	// with an error until they arrived, and the suite asks again until
	// they can say; Capture, Void and Refund answer "received" (unknown,
	// with the gateway's id for it), and the suite settles each by its
	// lookup; a capture, void or refund never sent is never reported not
	// found (silence proves nothing), while an attempt never sent is, once
	// the gateway confirmed its cancel past the no-show horizon; and
	// Lookup reports a hold as the authorization's own notifications have
	// it, what captures and voids made of it being for their lookups.
	Notified bool
	// Skip names cases of the suite the harness's fake cannot run yet,
	// each with the reason, which the test's output shows. It is for a
	// fake's known deviation from its gateway, never for the adapter's.
	Skip map[string]string
	// LookupReplays says that LookupCapture and LookupVoid of a capture or
	// void never sent, while it is young, send it under its key (Stripe):
	// the lookup makes it, once, and reports what it came to, instead of
	// not found.
	LookupReplays bool
	// OpenDispute opens, at the fake, a chargeback of amount (all of it
	// when 0) of the succeeded charge chargeID (as the adapter reported
	// it), and returns the dispute's id; DecideDispute has the network
	// decide it (won or lost); UnknownDispute is a dispute id of the
	// gateway's form that the fake does not have. All three are required
	// of a Gateway that is an order.DisputeGateway; disputes.go lists what
	// the suite checks.
	OpenDispute    func(t *testing.T, chargeID string, amount int64) string
	DecideDispute  func(t *testing.T, id string, won bool)
	UnknownDispute string
	// Lister, when set, is the adapter configured to read its listings in
	// small pages (two records, say), so that a listing takes several;
	// the suite's listing cases (listing.go) run against it.
	Lister order.ChargeLister
}

// Entry is one charge (successful or declined) in a fake's ledger.
type Entry struct {
	// ChargeID is the gateway's id for it, as the adapter reports it.
	ChargeID string
	// Succeeded says that money moved.
	Succeeded bool
	// Open says that the charge waits for the customer to act: it can
	// still be completed, and money still move.
	Open bool
}

// Run runs the suite. newHarness is called once per test, from the test's
// goroutine; the tests run in parallel.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"charge succeeds", testChargeSucceeds},
		{"charge declined", testChargeDeclined},
		{"charge past the timeout is unknown", testChargeTimeout},
		{"lookup of a charged attempt", testLookupCharged},
		{"lookup of a declined attempt", testLookupDeclined},
		{"lookup after an unknown outcome", testLookupAfterTimeout},
		{"lookup of an attempt never sent", testLookupNeverSent},
		{"repeated charge of one attempt", testRepeatedCharge},
		{"unreachable gateway", testUnreachable},
		{"off-session charge needing authentication", testOffSessionAction},
		{"every call is observed", testObserved},
	}
	for _, tt := range refundTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if why, ok := h.Skip[tt.name]; ok {
				t.Skip(why)
			}
			r, ok := h.Gateway.(order.Refunder)
			if !ok {
				t.Skip("the gateway does not refund")
			}
			if h.RefundFailLater == "" || h.RefundLedger == nil {
				t.Fatal("gatewaytest: a harness of a gateway that refunds must set RefundFailLater and RefundLedger")
			}
			tt.run(t, h, r)
		})
	}
	for _, tt := range disputeTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if why, ok := h.Skip[tt.name]; ok {
				t.Skip(why)
			}
			g, ok := h.Gateway.(order.DisputeGateway)
			if !ok {
				t.Skip("the gateway's disputes cannot be read")
			}
			if h.OpenDispute == nil || h.DecideDispute == nil || h.UnknownDispute == "" {
				t.Fatal("gatewaytest: a harness of a gateway whose disputes can be read must set OpenDispute, DecideDispute and UnknownDispute")
			}
			tt.run(t, h, g)
		})
	}
	for _, tt := range listingTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if why, ok := h.Skip[tt.name]; ok {
				t.Skip(why)
			}
			if h.Lister == nil {
				t.Skip("the harness lists nothing (no Lister)")
			}
			tt.run(t, h, h.Lister)
		})
	}
	for _, tt := range captureTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if why, ok := h.Skip[tt.name]; ok {
				t.Skip(why)
			}
			if !h.Captures {
				t.Skip("the harness does not opt in to the capture cases")
			}
			c, ok := h.Gateway.(order.Capturer)
			if !ok || h.CaptureLedger == nil {
				t.Fatal("gatewaytest: a harness with Captures must have a Gateway that is an order.Capturer, and set CaptureLedger")
			}
			tt.run(t, h, c)
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if why, ok := h.Skip[tt.name]; ok {
				t.Skip(why)
			}
			if h.Gateway == nil || h.Ledger == nil || h.OK == "" || h.Decline == "" || h.Timeout == "" || h.CallTimeout <= 0 {
				t.Fatal("gatewaytest: the harness must set Gateway, Ledger, OK, Decline, Timeout and CallTimeout")
			}
			tt.run(t, h)
		})
	}
}

// request returns a request for a new attempt paid with token.
func request(token string) order.ChargeRequest {
	id := order.NewID()
	return order.ChargeRequest{
		AttemptID:         id,
		OrderID:           order.NewID(),
		MerchantReference: "conformance-" + id,
		Amount:            order.Money{Currency: "GBP", AmountMinor: 1250},
		PaymentMethod:     token,
		CreatedAt:         time.Now(),
	}
}

func testChargeSucceeds(t *testing.T, h Harness) {
	req := request(h.OK)
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID == "" {
		t.Fatalf("Charge = %+v, %v; want succeeded with a charge id", res, err)
	}
	checkLedger(t, h, req, Entry{ChargeID: res.ChargeID, Succeeded: true})
}

func testChargeDeclined(t *testing.T, h Harness) {
	req := request(h.Decline)
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode == "" {
		t.Fatalf("Charge = %+v, %v; want declined with a decline code", res, err)
	}
	checkNothingCharged(t, h, req)
}

func testChargeTimeout(t *testing.T, h Harness) {
	req := request(h.Timeout)
	start := time.Now()
	res, err := charge(t, h, req)
	if res.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Charge = %+v, %v; want unknown with an error", res, err)
	}
	if took, limit := time.Since(start), h.CallTimeout+2*time.Second; took > limit {
		t.Errorf("Charge took %s, more than its timeout %s allows", took, h.CallTimeout)
	}
}

func testLookupCharged(t *testing.T, h Harness) {
	req := request(h.OK)
	first, err := charge(t, h, req)
	if err != nil || first.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", first, err)
	}
	res, err := lookup(t, h, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != first.ChargeID {
		t.Fatalf("Lookup = %+v, %v; want succeeded with charge %s", res, err, first.ChargeID)
	}
	checkLedger(t, h, req, Entry{ChargeID: first.ChargeID, Succeeded: true})
}

func testLookupDeclined(t *testing.T, h Harness) {
	req := request(h.Decline)
	if res, err := charge(t, h, req); err != nil || res.Outcome != order.OutcomeDeclined {
		t.Fatalf("Charge = %+v, %v; want declined", res, err)
	}
	res, err := lookup(t, h, req)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode == "" {
		t.Fatalf("Lookup = %+v, %v; want declined with a decline code", res, err)
	}
	checkNothingCharged(t, h, req)
}

// testLookupAfterTimeout is the reconciler's path: the charge's outcome is
// unknown, and Lookup, retried while the gateway cannot say yet, finds the
// one charge that was made.
func testLookupAfterTimeout(t *testing.T, h Harness) {
	req := request(h.Timeout)
	res, err := charge(t, h, req)
	if res.Outcome != order.OutcomeUnknown {
		t.Fatalf("Charge = %+v, %v; want unknown", res, err)
	}
	// As the reconciler does: the charge's settle recorded the gateway's
	// id for the attempt, if the gateway told it one.
	req.GatewayChargeID = res.ChargeID
	deadline := time.Now().Add(h.CallTimeout + 15*time.Second)
	for {
		res, err := lookup(t, h, req)
		if err == nil {
			if res.Outcome != order.OutcomeSucceeded || res.ChargeID == "" {
				t.Fatalf("Lookup = %+v; want succeeded with a charge id", res)
			}
			checkLedger(t, h, req, Entry{ChargeID: res.ChargeID, Succeeded: true})
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup still cannot say: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testLookupNeverSent(t *testing.T, h Harness) {
	req := request(h.OK)
	res, err := lookup(t, h, req)
	if !h.LookupCancels {
		if err != nil || res.Outcome != order.OutcomeNotFound {
			t.Fatalf("Lookup = %+v, %v; want not found", res, err)
		}
		if got := h.Ledger(req.AttemptID); len(got) != 0 {
			t.Fatalf("ledger = %+v; want nothing for an attempt never sent", got)
		}
		return
	}
	// Asking proves it: the attempt is canceled, and stays uncharged.
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode == "" {
		t.Fatalf("Lookup = %+v, %v; want declined (canceled, never charged)", res, err)
	}
	again, err := lookup(t, h, req)
	if err != nil || again.Outcome != order.OutcomeDeclined {
		t.Fatalf("second Lookup = %+v, %v; want declined again", again, err)
	}
	// A charge request of the attempt that arrives late cannot charge it.
	if res, err := charge(t, h, req); res.Outcome == order.OutcomeSucceeded {
		t.Fatalf("Charge after Lookup = %+v, %v; want no charge", res, err)
	}
	checkNothingCharged(t, h, req)
}

func testRepeatedCharge(t *testing.T, h Harness) {
	if !h.DedupesCharges {
		t.Skip("the gateway does not deduplicate a repeated charge; Settle sends each attempt once")
	}
	req := request(h.OK)
	first, err := charge(t, h, req)
	if err != nil || first.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", first, err)
	}
	second, err := charge(t, h, req)
	if err != nil || second != first {
		t.Fatalf("second Charge = %+v, %v; want %+v again", second, err, first)
	}
	checkLedger(t, h, req, Entry{ChargeID: first.ChargeID, Succeeded: true})
}

func testUnreachable(t *testing.T, h Harness) {
	if h.Unreachable == nil {
		t.Skip("the harness has no unreachable gateway")
	}
	req := request(h.OK)
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	res, err := h.Unreachable.Charge(ctx, req)
	if res.Outcome != order.OutcomeNotSent || err == nil {
		t.Errorf("Charge = %+v, %v; want not sent with an error: the connection was refused", res, err)
	}
	res, err = h.Unreachable.Lookup(ctx, req)
	if err == nil || definite(res) {
		t.Errorf("Lookup = %+v, %v; want an error and no outcome", res, err)
	}
}

// charge calls Charge and checks the interface's promise about errors.
func charge(t *testing.T, h Harness, req order.ChargeRequest) (order.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	res, err := h.Gateway.Charge(ctx, req)
	if err != nil && res.Outcome == order.OutcomeSucceeded {
		t.Errorf("Charge = %+v with error %v: an error must not come with a success", res, err)
	}
	switch res.Outcome {
	case order.OutcomeSucceeded, order.OutcomeDeclined, order.OutcomeUnknown, order.OutcomeNotSent:
	default:
		t.Errorf("Charge outcome %q is not one a charge can have", res.Outcome)
	}
	return res, err
}

// lookup calls Lookup and checks the interface's promise about errors.
// For a Notified gateway it asks again while Lookup cannot say, until the
// notifications had time to arrive.
func lookup(t *testing.T, h Harness, req order.ChargeRequest) (order.Result, error) {
	t.Helper()
	return notified(t, h, func() (order.Result, error) {
		ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
		defer cancel()
		res, err := h.Gateway.Lookup(ctx, req)
		checkLookup(t, "Lookup", res, err)
		return res, err
	})
}

// notified calls ask once, or, for a Notified gateway, until it answers
// without an error or the notifications should long have arrived.
func notified(t *testing.T, h Harness, ask func() (order.Result, error)) (order.Result, error) {
	t.Helper()
	deadline := time.Now().Add(h.CallTimeout + 30*time.Second)
	for {
		res, err := ask()
		if err == nil || !h.Notified || time.Now().After(deadline) {
			return res, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func definite(res order.Result) bool {
	switch res.Outcome {
	case order.OutcomeSucceeded, order.OutcomeDeclined, order.OutcomeNotFound:
		return true
	default:
		return false
	}
}

func testOffSessionAction(t *testing.T, h Harness) {
	if h.Action == "" {
		t.Skip("the harness names no payment method that needs authentication")
	}
	req := request(h.Action) // CustomerPresent false: merchant-initiated
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != order.DeclineAuthenticationRequired {
		t.Fatalf("off-session Charge = %+v, %v; want declined %s", res, err, order.DeclineAuthenticationRequired)
	}
	checkNothingOpen(t, h, req)
	req.GatewayChargeID = res.ChargeID
	got, err := lookup(t, h, req)
	// A Notified gateway proves it by its cancel's notification: not found.
	proven := got.Outcome == order.OutcomeDeclined || (h.Notified && got.Outcome == order.OutcomeNotFound)
	if err != nil || !proven {
		t.Fatalf("Lookup = %+v, %v; want declined", got, err)
	}
	checkNothingOpen(t, h, req)
}

// checkNothingOpen checks that no money moved for req, and that nothing
// the gateway holds for it can still be completed.
func checkNothingOpen(t *testing.T, h Harness, req order.ChargeRequest) {
	t.Helper()
	checkNothingCharged(t, h, req)
	for _, e := range h.Ledger(req.AttemptID) {
		if e.Open {
			t.Fatalf("ledger for attempt %s holds a charge %s still waiting for the customer", req.AttemptID, e.ChargeID)
		}
	}
}

// checkLedger checks that the fake recorded exactly want for req.
func checkLedger(t *testing.T, h Harness, req order.ChargeRequest, want ...Entry) {
	t.Helper()
	got := h.Ledger(req.AttemptID)
	if len(got) != len(want) {
		t.Fatalf("ledger for attempt %s = %+v, want %+v", req.AttemptID, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("ledger for attempt %s = %+v, want %+v", req.AttemptID, got, want)
		}
	}
}

// checkNothingCharged checks that no money moved for req.
func checkNothingCharged(t *testing.T, h Harness, req order.ChargeRequest) {
	t.Helper()
	for _, e := range h.Ledger(req.AttemptID) {
		if e.Succeeded {
			t.Fatalf("ledger for attempt %s holds a successful charge %s", req.AttemptID, e.ChargeID)
		}
	}
}

// ClosedAddr returns a loopback address on which nothing listens, so that
// dialing it is refused: a gateway that cannot be reached.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
