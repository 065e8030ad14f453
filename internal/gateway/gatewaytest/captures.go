package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// What the suite holds every gateway that authorizes (an order.Capturer
// whose harness sets Captures) to:
//
//   - a charge with CaptureManual succeeds with an open Hold of the whole
//     amount, nothing captured, and a capture_before in the future; Lookup
//     reports the same hold;
//   - a capture of all of it, or of part of it with Final, succeeds with
//     the hold captured (CapturedMinor what was taken), and nothing more
//     can be captured or voided;
//   - captures with Final false add up while the hold stays open, until a
//     final one closes it;
//   - a capture of more than is still held, a capture after a void and a
//     void after a capture are declined with a decline code, and move
//     nothing;
//   - a void succeeds with the hold voided;
//   - LookupCapture and LookupVoid say what became of each by its
//     reference, as often as asked, and not found for one never sent;
//   - a capture that outlives its timeout is unknown, and LookupCapture
//     then finds the one capture made;
//   - a hold that lapses (where the harness can make one lapse) is
//     reported expired, and can no longer be captured.
//
// Where a gateway legitimately differs, its harness says so (SingleCapture,
// VoidEndsCapturedHold, LookupReplays) and the case checks that behaviour
// instead.

// captureTests are the capture and void tests of Run.
var captureTests = []struct {
	name string
	run  func(t *testing.T, h Harness, c order.Capturer)
}{
	{"authorize holds the amount", testAuthorize},
	{"full capture", testFullCapture},
	{"partial final capture releases the rest", testPartialFinalCapture},
	{"several captures, then a final one", testSeveralCaptures},
	{"capture over the hold is declined", testCaptureOverHold},
	{"void releases the hold", testVoid},
	{"capture after a void is declined", testCaptureAfterVoid},
	{"void after a capture is declined", testVoidAfterCapture},
	{"lookups of captures and voids never sent", testLookupHoldNeverSent},
	{"capture past the timeout is unknown, then found", testCaptureTimeout},
	{"a lapsed hold expires", testHoldExpires},
}

// authorized authorizes h.OK (or token) for the suite's amount, 1250, and
// checks the open hold.
func authorized(t *testing.T, h Harness, token string) (order.ChargeRequest, order.Result) {
	t.Helper()
	req := request(token)
	req.Capture = order.CaptureManual
	res, err := charge(t, h, req)
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID == "" {
		t.Fatalf("Charge with manual capture = %+v, %v; want succeeded with a charge id", res, err)
	}
	checkHold(t, "Charge", res, order.HoldOpen, 1250, 0)
	req.GatewayChargeID = res.ChargeID
	return req, res
}

// captureOf is a request to capture amount of the authorization req.
func captureOf(req order.ChargeRequest, res order.Result, amount int64, final bool) order.CaptureRequest {
	return order.CaptureRequest{CaptureID: order.NewID(), OrderID: req.OrderID, ChargeAttemptID: req.AttemptID,
		ChargeID: res.ChargeID, Amount: order.Money{Currency: req.Amount.Currency, AmountMinor: amount},
		Final: final, CreatedAt: time.Now()}
}

// voidOf is a request to void the authorization req.
func voidOf(req order.ChargeRequest, res order.Result) order.VoidRequest {
	return order.VoidRequest{VoidID: order.NewID(), OrderID: req.OrderID, ChargeAttemptID: req.AttemptID,
		ChargeID: res.ChargeID, CreatedAt: time.Now()}
}

func testAuthorize(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	if !res.Hold.CaptureBefore.After(time.Now()) {
		t.Errorf("Charge's hold has capture_before %s; want a time in the future", res.Hold.CaptureBefore)
	}
	got, err := lookup(t, h, req)
	if err != nil || got.Outcome != order.OutcomeSucceeded || got.ChargeID != res.ChargeID {
		t.Fatalf("Lookup = %+v, %v; want succeeded with charge %s", got, err, res.ChargeID)
	}
	checkHold(t, "Lookup", got, order.HoldOpen, 1250, 0)
	if !got.Hold.CaptureBefore.Equal(res.Hold.CaptureBefore) {
		t.Errorf("Lookup's capture_before %s, want the charge's %s", got.Hold.CaptureBefore, res.Hold.CaptureBefore)
	}
}

func testFullCapture(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	creq := captureOf(req, res, 1250, true)
	got := mustCapture(t, h, c, creq, order.HoldCaptured, 1250)
	again, err := lookupCapture(t, h, c, creq)
	if err != nil || again.Outcome != order.OutcomeSucceeded || again.ChargeID != got.ChargeID {
		t.Fatalf("LookupCapture = %+v, %v; want succeeded with capture %s", again, err, got.ChargeID)
	}
	checkHold(t, "LookupCapture", again, order.HoldCaptured, 1250, 1250)
	if again, err := lookupCapture(t, h, c, creq); err != nil || again.ChargeID != got.ChargeID {
		t.Fatalf("second LookupCapture = %+v, %v; want the same capture", again, err)
	}
	checkCaptures(t, h, creq.CaptureID, Entry{ChargeID: got.ChargeID, Succeeded: true})
	checkLookupHold(t, h, req, order.HoldCaptured, 1250)
}

func testPartialFinalCapture(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	mustCapture(t, h, c, captureOf(req, res, 500, true), order.HoldCaptured, 500)
	checkLookupHold(t, h, req, order.HoldCaptured, 500)
	// The rest was released: nothing more can be captured.
	more := captureOf(req, res, 100, true)
	got, err := capture(t, h, c, more)
	mustDecline(t, "capture after a final one", got, err)
	checkNoCapture(t, h, more.CaptureID)
	checkLookupHold(t, h, req, order.HoldCaptured, 500)
}

func testSeveralCaptures(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	if h.SingleCapture {
		more := captureOf(req, res, 300, false)
		got, err := capture(t, h, c, more)
		mustDecline(t, "capture that is not final", got, err)
		checkNoCapture(t, h, more.CaptureID)
		checkLookupHold(t, h, req, order.HoldOpen, 0)
		mustCapture(t, h, c, captureOf(req, res, 1250, true), order.HoldCaptured, 1250)
		return
	}
	mustCapture(t, h, c, captureOf(req, res, 300, false), order.HoldOpen, 300)
	mustCapture(t, h, c, captureOf(req, res, 400, false), order.HoldOpen, 700)
	checkLookupHold(t, h, req, order.HoldOpen, 700)
	mustCapture(t, h, c, captureOf(req, res, 550, true), order.HoldCaptured, 1250)
	checkLookupHold(t, h, req, order.HoldCaptured, 1250)
}

func testCaptureOverHold(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	over := captureOf(req, res, 1251, true)
	got, err := capture(t, h, c, over)
	mustDecline(t, "capture of more than is held", got, err)
	checkNoCapture(t, h, over.CaptureID)
	checkLookupHold(t, h, req, order.HoldOpen, 0)
	if h.SingleCapture {
		mustCapture(t, h, c, captureOf(req, res, 1250, true), order.HoldCaptured, 1250)
		return
	}
	// After part of it is captured, "more than is held" is what is left.
	mustCapture(t, h, c, captureOf(req, res, 1000, false), order.HoldOpen, 1000)
	over = captureOf(req, res, 251, true)
	got, err = capture(t, h, c, over)
	mustDecline(t, "capture of more than is left", got, err)
	checkLookupHold(t, h, req, order.HoldOpen, 1000)
	// What is left can be.
	mustCapture(t, h, c, captureOf(req, res, 250, true), order.HoldCaptured, 1250)
}

func testVoid(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	vreq := voidOf(req, res)
	got, err := void(t, h, c, vreq)
	if err != nil || got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Void = %+v, %v; want succeeded", got, err)
	}
	for range 2 {
		again, err := lookupVoid(t, h, c, vreq)
		if err != nil || again.Outcome != order.OutcomeSucceeded || again.ChargeID != got.ChargeID {
			t.Fatalf("LookupVoid = %+v, %v; want succeeded with void %s", again, err, got.ChargeID)
		}
	}
	checkLookupHold(t, h, req, order.HoldVoided, 0)
}

func testCaptureAfterVoid(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	if got, err := void(t, h, c, voidOf(req, res)); err != nil || got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Void = %+v, %v; want succeeded", got, err)
	}
	creq := captureOf(req, res, 1250, true)
	got, err := capture(t, h, c, creq)
	mustDecline(t, "capture after a void", got, err)
	if got, err := lookupCapture(t, h, c, creq); err != nil || got.Outcome == order.OutcomeSucceeded {
		t.Fatalf("LookupCapture = %+v, %v; want no succeeded capture", got, err)
	}
	checkNoCapture(t, h, creq.CaptureID)
	checkLookupHold(t, h, req, order.HoldVoided, 0)
}

func testVoidAfterCapture(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	// Even a capture that leaves the hold open rules a void out: what
	// was captured is refunded, never voided.
	state := order.HoldOpen
	if h.SingleCapture {
		state = order.HoldCaptured
	}
	mustCapture(t, h, c, captureOf(req, res, 400, h.SingleCapture), state, 400)
	vreq := voidOf(req, res)
	got, err := void(t, h, c, vreq)
	mustDecline(t, "void after a capture", got, err)
	if got, err := lookupVoid(t, h, c, vreq); err != nil || got.Outcome == order.OutcomeSucceeded {
		t.Fatalf("LookupVoid = %+v, %v; want no succeeded void", got, err)
	}
	if h.VoidEndsCapturedHold {
		// The rest was released; the capture stands.
		state = order.HoldCaptured
	}
	checkLookupHold(t, h, req, state, 400)
}

func testLookupHoldNeverSent(t *testing.T, h Harness, c order.Capturer) {
	req, res := authorized(t, h, h.OK)
	creq := captureOf(req, res, 1250, true)
	if h.LookupReplays {
		testLookupReplays(t, h, c, creq)
		return
	}
	if h.Notified {
		// Silence proves nothing: it cannot say.
		if got, err := c.LookupCapture(t.Context(), creq); err == nil || definite(got) {
			t.Fatalf("LookupCapture = %+v, %v; want an error", got, err)
		}
		if got, err := c.LookupVoid(t.Context(), voidOf(req, res)); err == nil || definite(got) {
			t.Fatalf("LookupVoid = %+v, %v; want an error", got, err)
		}
		checkCaptures(t, h, creq.CaptureID)
		checkLookupHold(t, h, req, order.HoldOpen, 0)
		return
	}
	if got, err := lookupCapture(t, h, c, creq); err != nil || got.Outcome != order.OutcomeNotFound {
		t.Fatalf("LookupCapture = %+v, %v; want not found", got, err)
	}
	if got, err := lookupVoid(t, h, c, voidOf(req, res)); err != nil || got.Outcome != order.OutcomeNotFound {
		t.Fatalf("LookupVoid = %+v, %v; want not found", got, err)
	}
	checkCaptures(t, h, creq.CaptureID)
	checkLookupHold(t, h, req, order.HoldOpen, 0)
}

// testLookupReplays is testLookupHoldNeverSent for a gateway whose
// lookups replay: each lookup of one never sent makes it, exactly once.
func testLookupReplays(t *testing.T, h Harness, c order.Capturer, creq order.CaptureRequest) {
	t.Helper()
	var first order.Result
	for i := range 2 {
		got, err := lookupCapture(t, h, c, creq)
		if err != nil || got.Outcome != order.OutcomeSucceeded || got.ChargeID == "" || (i > 0 && got.ChargeID != first.ChargeID) {
			t.Fatalf("LookupCapture #%d of a capture never sent = %+v, %v; want the replay's one succeeded capture", i+1, got, err)
		}
		checkHold(t, "LookupCapture", got, order.HoldCaptured, 1250, 1250)
		first = got
	}
	checkCaptures(t, h, creq.CaptureID, Entry{ChargeID: first.ChargeID, Succeeded: true})
	req, res := authorized(t, h, h.OK)
	vreq := voidOf(req, res)
	for i := range 2 {
		if got, err := lookupVoid(t, h, c, vreq); err != nil || got.Outcome != order.OutcomeSucceeded {
			t.Fatalf("LookupVoid #%d of a void never sent = %+v, %v; want the replay's void succeeded", i+1, got, err)
		}
	}
	checkLookupHold(t, h, req, order.HoldVoided, 0)
}

func testCaptureTimeout(t *testing.T, h Harness, c order.Capturer) {
	if h.CaptureTimeout == "" {
		t.Skip("the harness names no payment method whose captures outlive the timeout")
	}
	req, res := authorized(t, h, h.CaptureTimeout)
	creq := captureOf(req, res, 1250, true)
	start := time.Now()
	got, err := capture(t, h, c, creq)
	if got.Outcome != order.OutcomeUnknown || err == nil {
		t.Fatalf("Capture = %+v, %v; want unknown with an error", got, err)
	}
	if took, limit := time.Since(start), h.CallTimeout+2*time.Second; took > limit {
		t.Errorf("Capture took %s, more than its timeout %s allows", took, h.CallTimeout)
	}
	deadline := time.Now().Add(h.CallTimeout + 15*time.Second)
	for {
		found, err := lookupCapture(t, h, c, creq)
		if err == nil && found.Outcome != order.OutcomeNotFound {
			if found.Outcome != order.OutcomeSucceeded || found.ChargeID == "" {
				t.Fatalf("LookupCapture = %+v; want succeeded with a capture id", found)
			}
			checkHold(t, "LookupCapture", found, order.HoldCaptured, 1250, 1250)
			checkCaptures(t, h, creq.CaptureID, Entry{ChargeID: found.ChargeID, Succeeded: true})
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("LookupCapture still cannot say: %+v, %v", found, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testHoldExpires(t *testing.T, h Harness, c order.Capturer) {
	token := h.Lapse
	switch {
	case token != "":
	case h.Expire != nil:
		token = h.OK
	default:
		t.Skip("the harness cannot make a hold lapse (it sets neither Lapse nor Expire)")
	}
	req, res := authorized(t, h, token)
	if h.Lapse == "" {
		h.Expire(res.ChargeID)
	}
	deadline := time.Now().Add(h.CallTimeout + 30*time.Second)
	for {
		got, err := lookup(t, h, req)
		if err == nil && got.Outcome == order.OutcomeSucceeded && got.Hold != nil && got.Hold.State == order.HoldExpired {
			checkHold(t, "Lookup", got, order.HoldExpired, 1250, 0)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup = %+v, %v; still not expired", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	creq := captureOf(req, res, 1250, true)
	got, err := capture(t, h, c, creq)
	mustDecline(t, "capture of a lapsed hold", got, err)
	checkNoCapture(t, h, creq.CaptureID)
	got, err = void(t, h, c, voidOf(req, res))
	mustDecline(t, "void of a lapsed hold", got, err)
}

// mustCapture captures creq, checks it succeeded with the hold in state
// with captured taken so far, and returns its result.
func mustCapture(t *testing.T, h Harness, c order.Capturer, creq order.CaptureRequest, state order.HoldState, captured int64) order.Result {
	t.Helper()
	got, err := capture(t, h, c, creq)
	if err != nil || got.Outcome != order.OutcomeSucceeded || got.ChargeID == "" {
		t.Fatalf("Capture of %d (final %t) = %+v, %v; want succeeded with a capture id", creq.Amount.AmountMinor, creq.Final, got, err)
	}
	checkHold(t, "Capture", got, state, 1250, captured)
	return got
}

// mustDecline checks that a capture or a void (what) was declined with a
// decline code.
func mustDecline(t *testing.T, what string, res order.Result, err error) {
	t.Helper()
	if res.Outcome != order.OutcomeDeclined || res.DeclineCode == "" {
		t.Fatalf("%s = %+v, %v; want declined with a decline code", what, res, err)
	}
}

// checkHold checks the hold a call (what) reported.
func checkHold(t *testing.T, what string, res order.Result, state order.HoldState, authorized, captured int64) {
	t.Helper()
	if h := res.Hold; h == nil || h.State != state || h.AuthorizedMinor != authorized || h.CapturedMinor != captured {
		t.Fatalf("%s's hold = %+v; want %s, %d authorized, %d captured", what, res.Hold, state, authorized, captured)
	}
}

// checkLookupHold checks that Lookup of the authorization req reports its
// hold in state, with captured taken.
func checkLookupHold(t *testing.T, h Harness, req order.ChargeRequest, state order.HoldState, captured int64) {
	t.Helper()
	got, err := lookup(t, h, req)
	if err != nil || got.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Lookup = %+v, %v; want succeeded", got, err)
	}
	if h.Notified {
		// The authorization's own notifications do not tell its captures
		// and voids: the hold as it was authorized.
		if got.Hold == nil || got.Hold.AuthorizedMinor != 1250 {
			t.Fatalf("Lookup's hold = %+v; want 1250 authorized", got.Hold)
		}
		return
	}
	checkHold(t, "Lookup", got, state, 1250, captured)
}

// checkNoCapture checks that the fake took no money for the capture (it
// may keep a refused one).
func checkNoCapture(t *testing.T, h Harness, captureID string) {
	t.Helper()
	for _, e := range h.CaptureLedger(captureID) {
		if e.Succeeded {
			t.Fatalf("capture ledger for %s holds a successful capture %s", captureID, e.ChargeID)
		}
	}
}

// checkCaptures checks that the fake recorded exactly want for the capture.
func checkCaptures(t *testing.T, h Harness, captureID string, want ...Entry) {
	t.Helper()
	got := h.CaptureLedger(captureID)
	if len(got) != len(want) {
		t.Fatalf("capture ledger for %s = %+v, want %+v", captureID, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("capture ledger for %s = %+v, want %+v", captureID, got, want)
		}
	}
}

// capture calls Capture and checks the interface's promise about errors.
func capture(t *testing.T, h Harness, c order.Capturer, req order.CaptureRequest) (order.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	res, err := c.Capture(ctx, req)
	checkWrite(t, "Capture", res, err)
	if received(h, res) {
		return settled(t, "Capture", res, func() (order.Result, error) { return lookupCapture(t, h, c, req) })
	}
	return res, err
}

// received reports a Notified gateway's answer that it received a write
// (unknown, with its id for it): its lookup will say what it came to.
func received(h Harness, res order.Result) bool {
	return h.Notified && res.Outcome == order.OutcomeUnknown && res.ChargeID != ""
}

// settled is what a received write (what) came to, by its lookup: the
// same id, and an outcome.
func settled(t *testing.T, what string, res order.Result, look func() (order.Result, error)) (order.Result, error) {
	t.Helper()
	got, err := look()
	if err != nil || got.ChargeID != res.ChargeID {
		t.Fatalf("%s received as %s, and its lookup = %+v, %v; want its outcome, with the same id", what, res.ChargeID, got, err)
	}
	return got, nil
}

// void calls Void and checks the interface's promise about errors.
func void(t *testing.T, h Harness, c order.Capturer, req order.VoidRequest) (order.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
	defer cancel()
	res, err := c.Void(ctx, req)
	checkWrite(t, "Void", res, err)
	if received(h, res) {
		return settled(t, "Void", res, func() (order.Result, error) { return lookupVoid(t, h, c, req) })
	}
	return res, err
}

func checkWrite(t *testing.T, what string, res order.Result, err error) {
	t.Helper()
	if err != nil && res.Outcome == order.OutcomeSucceeded {
		t.Errorf("%s = %+v with error %v: an error must not come with a success", what, res, err)
	}
	switch res.Outcome {
	case order.OutcomeSucceeded, order.OutcomeDeclined, order.OutcomeUnknown, order.OutcomeNotSent:
	default:
		t.Errorf("%s outcome %q is not one it can have", what, res.Outcome)
	}
}

// lookupCapture calls LookupCapture and checks the interface's promise.
func lookupCapture(t *testing.T, h Harness, c order.Capturer, req order.CaptureRequest) (order.Result, error) {
	t.Helper()
	return notified(t, h, func() (order.Result, error) {
		ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
		defer cancel()
		res, err := c.LookupCapture(ctx, req)
		checkLookup(t, "LookupCapture", res, err)
		return res, err
	})
}

// lookupVoid calls LookupVoid and checks the interface's promise.
func lookupVoid(t *testing.T, h Harness, c order.Capturer, req order.VoidRequest) (order.Result, error) {
	t.Helper()
	return notified(t, h, func() (order.Result, error) {
		ctx, cancel := context.WithTimeout(t.Context(), h.CallTimeout+5*time.Second)
		defer cancel()
		res, err := c.LookupVoid(ctx, req)
		checkLookup(t, "LookupVoid", res, err)
		return res, err
	})
}

func checkLookup(t *testing.T, what string, res order.Result, err error) {
	t.Helper()
	if err != nil && definite(res) {
		t.Errorf("%s = %+v with error %v: an error must not come with an outcome", what, res, err)
	}
	if err == nil && !definite(res) {
		t.Errorf("%s = %+v without an error: want succeeded, declined or not found", what, res)
	}
}
