package order_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// callTimeout is the gateway deadline of the capture tests that wait for
// no timeout: many calls at once on one order queue on its row lock, and
// the deadline is fixed before the claim.
const callTimeout = 30 * time.Second

// holdFixture is the charge path with the simulator as its gateway, for
// captures and voids. Every test's end checks the simulator's ledger
// against the protocol's rules and against Settle (checkLedger).
type holdFixture struct{ *fixture }

func newHoldFixture(t *testing.T, timeout time.Duration) *holdFixture {
	t.Helper()
	f := &holdFixture{newFixtureTimeout(t, timeout)}
	t.Cleanup(func() { f.checkLedger(t) })
	return f
}

// checkLedger checks what the gateway did: no authorization captured past
// what it held, none both voided and captured, and each capture-manual
// order's captured total the gateway's, give or take what is still in
// flight (captured ≤ gateway's ≤ captured + capturing), and voided at the
// gateway only when Settle voided it or has a void in flight.
func (f *holdFixture) checkLedger(t *testing.T) {
	t.Helper()
	voided := map[string]bool{}
	for _, v := range f.sim.Voids() {
		if v.Status == refpsp.OpSucceeded {
			voided[v.ChargeReference] = true
		}
	}
	for _, c := range f.sim.Ledger() {
		if !c.Manual {
			continue
		}
		got := f.sim.Captured(c.Reference)
		if got > c.Amount || got != c.AmountCaptured {
			t.Errorf("gateway: authorization %s of %d captured %d (its ledger says %d)", c.Reference, c.Amount, got, c.AmountCaptured)
		}
		if voided[c.Reference] && got > 0 {
			t.Errorf("gateway: authorization %s both voided and captured (%d)", c.Reference, got)
		}
	}
	rows, err := f.pool.Query(context.Background(), `SELECT id::text, current_attempt::text, state, captured_minor, capturing_minor, voiding
		FROM orders WHERE capture_mode = 'manual' AND current_attempt IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, attempt, state string
		var captured, capturing int64
		var voiding bool
		if err := rows.Scan(&id, &attempt, &state, &captured, &capturing, &voiding); err != nil {
			t.Fatal(err)
		}
		if got := f.sim.Captured(attempt); got < captured || got > captured+capturing {
			t.Errorf("order %s: Settle captured %d with %d in flight, the gateway %d", id, captured, capturing, got)
		}
		if voided[attempt] && state != string(order.StateVoided) && !voiding {
			t.Errorf("order %s is %s with no void in flight, but the gateway voided it", id, state)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// voided reports whether the gateway voided the authorization attemptID.
func (f *holdFixture) voided(attemptID string) bool {
	for _, v := range f.sim.Voids() {
		if v.ChargeReference == attemptID && v.Status == refpsp.OpSucceeded {
			return true
		}
	}
	return false
}

// reconcileNow makes every lease and recheck due and runs the reconciler
// once.
func (f *holdFixture) reconcileNow(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`UPDATE orders SET reconcile_at = now() WHERE reconcile_at IS NOT NULL`,
		`UPDATE captures SET reconcile_at = now() WHERE state = 'CAPTURING'`,
		`UPDATE voids SET reconcile_at = now() WHERE state = 'VOIDING'`,
	} {
		if _, err := f.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.rec.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
}

// authorized creates a capture-manual order of 1250 GBP paid with token
// and charges it to AUTHORIZED.
func (f *holdFixture) authorized(t *testing.T, ref, token string) (order.Order, order.Attempt) {
	t.Helper()
	ctx := context.Background()
	n := newOrder(ref, token)
	n.Capture = order.CaptureManual
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "charge-" + ref})
	if err != nil || o.State != order.StateAuthorized || a == nil {
		t.Fatalf("authorize %s: %+v, %v", ref, o, err)
	}
	o, err = f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || o.AuthorizedMinor != 1250 || o.CaptureBefore.IsZero() || o.Capture != order.CaptureManual {
		t.Fatalf("authorized order: %+v, %v", o, err)
	}
	return o, *a
}

func (f *holdFixture) capture(orderID, requestID string, amount int64, final bool) (order.Order, order.Capture, error) {
	return f.svc.Capture(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.CaptureInput{OrderID: orderID, RequestID: requestID, AmountMinor: amount, Final: final})
}

func (f *holdFixture) void(orderID, requestID string) (order.Order, order.Void, error) {
	return f.svc.Void(context.Background(), order.ForMerchant(merchant), order.ActorAPI,
		order.VoidInput{OrderID: orderID, RequestID: requestID})
}

// waitPast waits until the clock is past tm.
func waitPast(tm time.Time) {
	time.Sleep(time.Until(tm) + 10*time.Millisecond)
}

// TestCaptureReplayAndConflict: the same request again returns the same
// capture and captures nothing more; the same request id with another
// amount or finality is ALREADY_EXISTS.
func TestCaptureReplayAndConflict(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, a := f.authorized(t, "cap-replay", "tok_ok")
	o1, c1, err := f.capture(o.ID, "capture-1", 500, true)
	if err != nil || c1.State != order.CaptureSucceeded || o1.State != order.StatePaid || o1.CapturedMinor != 500 {
		t.Fatalf("capture: %+v %+v, %v", o1, c1, err)
	}
	o2, c2, err := f.capture(o.ID, "capture-1", 500, true)
	if err != nil || c2.ID != c1.ID || c2.State != order.CaptureSucceeded || o2.CapturedMinor != 500 {
		t.Fatalf("replay: %+v %+v, %v", o2, c2, err)
	}
	for _, in := range []struct {
		amount int64
		final  bool
	}{{400, true}, {500, false}} {
		_, _, err = f.capture(o.ID, "capture-1", in.amount, in.final)
		var ce *order.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("capture-1 again with %d final=%v: %v, want a *ConflictError", in.amount, in.final, err)
		}
	}
	if got := f.sim.Captured(a.ID); got != 500 {
		t.Fatalf("gateway captured %d, want 500", got)
	}
}

// TestConcurrentCapturesOverTheHold: twenty concurrent captures of 100
// against a hold of 1250: exactly twelve succeed, at the gateway too, and
// each other one is refused naming what is left.
func TestConcurrentCapturesOverTheHold(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, a := f.authorized(t, "cap-race", "tok_ok")
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		succeeded int
	)
	for i := range 20 {
		wg.Go(func() {
			_, c, err := f.capture(o.ID, fmt.Sprintf("capture-%02d", i), 100, false)
			mu.Lock()
			defer mu.Unlock()
			var le *order.CaptureLimitError
			switch {
			case err == nil && c.State == order.CaptureSucceeded:
				succeeded++
			case errors.As(err, &le):
				if le.Left != 50 || !strings.Contains(le.Error(), "GBP") {
					t.Errorf("refusal %q names %d left, want 50 GBP minor units", le.Error(), le.Left)
				}
			default:
				t.Errorf("capture %d: %+v, %v", i, c, err)
			}
		})
	}
	wg.Wait()
	got := f.sim.Captured(a.ID)
	if succeeded != 12 || got != 1200 {
		t.Fatalf("%d captures succeeded, gateway captured %d; want 12 and 1200", succeeded, got)
	}
	o, err := f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
	if err != nil || o.CapturedMinor != 1200 || o.CapturingMinor != 0 || o.State != order.StatePaid {
		t.Fatalf("order: %+v, %v", o, err)
	}
}

// TestCaptureRacingVoid: a capture and a void of one authorization sent
// at once never both succeed, at Settle or at the gateway.
func TestCaptureRacingVoid(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	for i := range 10 {
		o, a := f.authorized(t, fmt.Sprintf("race-%d", i), "tok_ok")
		var (
			wg      sync.WaitGroup
			c       order.Capture
			v       order.Void
			cerr    error
			verr    error
			ordered = make(chan struct{})
		)
		wg.Go(func() { <-ordered; _, c, cerr = f.capture(o.ID, fmt.Sprintf("capture-req-%d", i), 0, true) })
		wg.Go(func() { <-ordered; _, v, verr = f.void(o.ID, fmt.Sprintf("void-req-%d", i)) })
		close(ordered)
		wg.Wait()
		captured := cerr == nil && c.State == order.CaptureSucceeded
		voided := verr == nil && v.State == order.VoidSucceeded
		if captured == voided {
			t.Fatalf("round %d: captured %v (%v), voided %v (%v); want exactly one", i, captured, cerr, voided, verr)
		}
		var he *order.HoldError
		var se *order.StateError
		if loser := raceLoser(captured, verr, cerr); !errors.As(loser, &he) && !errors.As(loser, &se) {
			t.Fatalf("round %d: the loser's error %v, want a *HoldError or a *StateError", i, loser)
		}
		amount, gwVoided := f.sim.Captured(a.ID), f.voided(a.ID)
		if (amount > 0) == gwVoided {
			t.Fatalf("round %d: gateway captured %d and voided %v", i, amount, gwVoided)
		}
		got, err := f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
		want := order.StateVoided
		if captured {
			want = order.StatePaid
		}
		if err != nil || got.State != want {
			t.Fatalf("round %d: order %s, %v; want %s", i, got.State, err, want)
		}
	}
}

// raceLoser returns the loser's error of a capture racing a void.
func raceLoser(captured bool, verr, cerr error) error {
	if captured {
		return verr
	}
	return cerr
}

// TestPartialFinalCapture: a final capture of less than the hold makes
// the order PAID for what was captured, refunds reach only that, and no
// capture follows.
func TestPartialFinalCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, _ := f.authorized(t, "cap-partial", "tok_ok")
	o, c, err := f.capture(o.ID, "capture-1", 800, true)
	if err != nil || c.State != order.CaptureSucceeded || o.State != order.StatePaid || o.CapturedMinor != 800 || !o.HoldClosed {
		t.Fatalf("partial final capture: %+v %+v, %v", o, c, err)
	}
	_, _, err = f.capture(o.ID, "capture-2", 100, true)
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("capture after a final one: %v, want a *HoldError", err)
	}
	_, _, err = f.void(o.ID, "void-req-1")
	if !errors.As(err, &he) || !strings.Contains(err.Error(), "refund") {
		t.Fatalf("void after a capture: %v, want a *HoldError that says to refund", err)
	}
}

// TestMultiCaptureNotFinal: captures with final=false add up to the hold;
// the first makes the order PAID, and past the hold nothing is admitted.
func TestMultiCaptureNotFinal(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, a := f.authorized(t, "cap-multi", "tok_ok")
	for i, amount := range []int64{500, 500, 250} {
		var c order.Capture
		var err error
		o, c, err = f.capture(o.ID, fmt.Sprintf("capture-%d", i), amount, false)
		if err != nil || c.State != order.CaptureSucceeded || o.State != order.StatePaid {
			t.Fatalf("capture %d: %+v %+v, %v", i, o, c, err)
		}
	}
	if o.CapturedMinor != 1250 || o.HoldClosed {
		t.Fatalf("after three captures: %+v", o)
	}
	_, _, err := f.capture(o.ID, "capture-3", 0, false)
	var le *order.CaptureLimitError
	if !errors.As(err, &le) || le.Left != 0 {
		t.Fatalf("capture past the hold: %v, want a *CaptureLimitError with 0 left", err)
	}
	if got := f.sim.Captured(a.ID); got != 1250 {
		t.Fatalf("gateway captured %d, want 1250", got)
	}
}

// TestCaptureAfterExpiryAsksTheGateway: a capture past capture_before (the
// hold lapsed at the gateway: tok_lapse_1 lapses a millisecond after it is
// made) is still sent, and the gateway's refusal decides: the capture
// fails, the order stays AUTHORIZED.
func TestCaptureAfterExpiryAsksTheGateway(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, a := f.authorized(t, "cap-expired", "tok_lapse_1")
	waitPast(o.CaptureBefore)
	o, c, err := f.capture(o.ID, "capture-1", 0, true)
	if err != nil || c.State != order.CaptureFailed || c.Outcome != order.OutcomeDeclined || o.State != order.StateAuthorized ||
		o.CapturingMinor != 0 || c.DeclineCode != refpsp.FailureExpired {
		t.Fatalf("capture after expiry: %+v %+v, %v; want the gateway's decline %s", o, c, err, refpsp.FailureExpired)
	}
	var sent bool
	for _, gc := range f.sim.Captures() {
		sent = sent || (gc.Reference == c.ID && gc.ChargeReference == a.ID && gc.Status == refpsp.OpFailed)
	}
	if !sent {
		t.Fatal("the capture was never sent to the gateway")
	}
}

// TestCaptureUnknownOutcomeStaysInFlight: a capture whose response is lost
// (tok_capture_drop: the gateway captures, then drops the connection) is
// returned CAPTURING with its amount reserved, and blocks a void; the
// gateway captured it once.
func TestCaptureUnknownOutcomeStaysInFlight(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, a := f.authorized(t, "cap-unknown", "tok_capture_drop")
	o, c, err := f.capture(o.ID, "capture-1", 600, false)
	if err != nil || c.State != order.CaptureCapturing || o.CapturingMinor != 600 || o.State != order.StateAuthorized {
		t.Fatalf("capture with its response lost: %+v %+v, %v", o, c, err)
	}
	_, _, err = f.void(o.ID, "void-req-1")
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("void beside a capture of unknown outcome: %v, want a *HoldError", err)
	}
	if got := f.sim.Captured(a.ID); got != 600 {
		t.Fatalf("gateway captured %d, want 600", got)
	}
	if n := len(f.sim.Voids()); n != 0 {
		t.Fatalf("%d voids reached the gateway, want 0", n)
	}
}

// TestVoidThenNoCapture: a void releases the hold and the order is VOIDED;
// a capture after it is refused by the state.
func TestVoidThenNoCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, _ := f.authorized(t, "void-ok", "tok_ok")
	o, v, err := f.void(o.ID, "void-req-1")
	if err != nil || v.State != order.VoidSucceeded || o.State != order.StateVoided {
		t.Fatalf("void: %+v %+v, %v", o, v, err)
	}
	_, _, err = f.capture(o.ID, "capture-1", 0, true)
	var se *order.StateError
	if !errors.As(err, &se) || se.Current != order.StateVoided {
		t.Fatalf("capture of a VOIDED order: %v, want a *StateError", err)
	}
	if _, _, err := f.void(o.ID, "void-req-1"); err != nil {
		t.Fatalf("replay of the void: %v", err)
	}
}

// TestCaptureOfAnAutomaticOrderIsRefused: only a capture-manual order can
// be captured or voided.
func TestCaptureOfAnAutomaticOrderIsRefused(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	o, err := f.svc.Create(context.Background(), merchant, newOrder("automatic", "tok_ok"))
	if err != nil || o.Capture != order.CaptureAutomatic {
		t.Fatalf("create: %+v, %v", o, err)
	}
	if _, _, err := f.capture(o.ID, "capture-1", 0, true); !errors.Is(err, order.ErrCapturesUnsupported) {
		t.Fatalf("capture of an automatic order: %v", err)
	}
	// The same reference with capture MANUAL is another order.
	n := newOrder("automatic", "tok_ok")
	n.Capture = order.CaptureManual
	var ce *order.ConflictError
	if _, err := f.svc.Create(context.Background(), merchant, n); !errors.As(err, &ce) {
		t.Fatalf("the reference again with capture MANUAL: %v, want a *ConflictError", err)
	}
}

// TestTimeoutsSettledByTheReconciler: an authorization, a capture and a
// void whose responses came too late (tok_timeout_silent,
// tok_capture_timeout, tok_void_timeout: the gateway acted, then answered
// after the deadline) stay in flight, and the reconciler's lookups settle
// each as the gateway has it.
func TestTimeoutsSettledByTheReconciler(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, gatewayTimeout)
	ctx := context.Background()
	scope := order.ForMerchant(merchant)

	n := newOrder("lost-auth", "tok_timeout_silent")
	n.Capture = order.CaptureManual
	o, _, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "charge-lost-auth"})
	if err != nil || o.State != order.StateCharging {
		t.Fatalf("authorize with its response lost: %+v, %v", o, err)
	}
	f.reconcileNow(t)
	o, err = f.svc.Get(ctx, scope, o.ID)
	if err != nil || o.State != order.StateAuthorized || o.AuthorizedMinor != 1250 || o.CaptureBefore.IsZero() {
		t.Fatalf("after the reconciler: %+v, %v; want AUTHORIZED holding 1250 with capture_before", o, err)
	}

	o, a := f.authorized(t, "lost-capture", "tok_capture_timeout")
	o, c, err := f.capture(o.ID, "capture-lost", 600, false)
	if err != nil || c.State != order.CaptureCapturing {
		t.Fatalf("capture with its response lost: %+v, %v", c, err)
	}
	f.reconcileNow(t)
	o, err = f.svc.Get(ctx, scope, o.ID)
	if err != nil || o.State != order.StatePaid || o.CapturedMinor != 600 || o.CapturingMinor != 0 {
		t.Fatalf("after the reconciler: %+v, %v; want PAID with 600 captured", o, err)
	}
	if got := f.sim.Captured(a.ID); got != 600 {
		t.Fatalf("gateway captured %d, want 600", got)
	}

	v, va := f.authorized(t, "lost-void", "tok_void_timeout")
	v, vd, err := f.void(v.ID, "void-lost-1")
	if err != nil || vd.State != order.VoidVoiding || !v.Voiding {
		t.Fatalf("void with its response lost: %+v %+v, %v", v, vd, err)
	}
	f.reconcileNow(t)
	v, err = f.svc.Get(ctx, scope, v.ID)
	if err != nil || v.State != order.StateVoided || v.Voiding || !f.voided(va.ID) {
		t.Fatalf("after the reconciler: %+v, %v; want VOIDED, at the gateway too", v, err)
	}
}

// TestExpiryIsTheGatewaysWord: past capture_before the reconciler asks the
// gateway; an open hold stays AUTHORIZED (the clock moves nothing: here
// Settle's capture_before is put in the past while the gateway's is a week
// away, as a clock ahead of the gateway's would have it), a lapsed one
// (tok_lapse_1) becomes EXPIRED.
func TestExpiryIsTheGatewaysWord(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	ctx := context.Background()
	held, _ := f.authorized(t, "expiry-open", "tok_ok")
	if _, err := f.pool.Exec(ctx, `UPDATE orders SET capture_before = now() - interval '1 minute' WHERE id = $1`, held.ID); err != nil {
		t.Fatal(err)
	}
	lookups := f.sim.Lookups()
	f.reconcileNow(t)
	got, err := f.svc.Get(ctx, order.ForMerchant(merchant), held.ID)
	if err != nil || got.State != order.StateAuthorized || f.sim.Lookups() == lookups {
		t.Fatalf("open hold past capture_before: %s, %v, %d lookups; want AUTHORIZED after a lookup", got.State, err,
			f.sim.Lookups()-lookups)
	}
	o, _ := f.authorized(t, "expiry", "tok_lapse_1")
	waitPast(o.CaptureBefore)
	f.reconcileNow(t)
	got, err = f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || got.State != order.StateExpired {
		t.Fatalf("lapsed hold: %s, %v; want EXPIRED", got.State, err)
	}
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM order_events WHERE order_id = $1 AND type = 'order.authorization_expired'`,
		o.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("order.authorization_expired events: %d, %v; want 1", n, err)
	}
	if got, err = f.svc.Get(ctx, order.ForMerchant(merchant), held.ID); err != nil || got.State != order.StateAuthorized {
		t.Fatalf("open hold after a second look: %s, %v; want AUTHORIZED", got.State, err)
	}
}

// TestThreeDSecureThenCapture: a capture-manual charge that asks the
// customer to authenticate is REQUIRES_ACTION; once they are back, the
// same request settles it to AUTHORIZED, and it captures.
func TestThreeDSecureThenCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	ctx := context.Background()
	n := newOrder("cap-3ds", "tok_3ds")
	n.Capture = order.CaptureManual
	in := order.ChargeInput{RequestID: "charge-cap-3ds", CustomerPresent: true, ReturnURL: "https://shop.test/back"}
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil || o.State != order.StateRequiresAction || a == nil || a.NextAction.RedirectURL == "" {
		t.Fatalf("charge: %+v %+v, %v; want REQUIRES_ACTION with a redirect", o, a, err)
	}
	open(t, a.NextAction.RedirectURL)
	in.OrderID = o.ID
	o, _, err = f.svc.Charge(ctx, merchant, in)
	if err != nil || o.State != order.StateAuthorized {
		t.Fatalf("the customer is back: %+v, %v; want AUTHORIZED", o, err)
	}
	o, c, err := f.capture(o.ID, "capture-3ds", 0, true)
	if err != nil || c.State != order.CaptureSucceeded || o.State != order.StatePaid || o.CapturedMinor != 1250 {
		t.Fatalf("capture: %+v %+v, %v", o, c, err)
	}
}

// TestResolvePaidRefusedForAnAuthorization: an operator cannot resolve a
// capture-manual order in review as PAID: its charge only held the money.
func TestResolvePaidRefusedForAnAuthorization(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t, callTimeout)
	ctx := context.Background()
	o, _ := f.authorized(t, "resolve-held", "tok_ok")
	if _, err := f.pool.Exec(ctx, `UPDATE orders SET state = 'NEEDS_REVIEW' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Resolve(ctx, order.AnyMerchant, o.ID, order.EventResolvePaid, "auth_1", "found it", order.Operator("ops-1"))
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("resolve PAID of an authorization: %v, want a *HoldError", err)
	}
}
