package order_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

// holdLedger is a test double of a gateway that authorizes, captures and
// voids (order.Gateway and order.Capturer), with an in-memory ledger of
// every authorization, capture and void by reference. It stands in for the
// refpsp simulator until that speaks authorize, capture and void; the
// tests here switch to the simulator then. A call whose kind is in
// lose records its effect and then answers OutcomeUnknown: a timeout
// after the gateway acted.
type holdLedger struct {
	mu    sync.Mutex
	holds map[string]*ledgerHold // by attempt id
	// captures and voids are by their own ids.
	captures map[string]ledgerOp
	voids    map[string]ledgerOp
	lose     map[string]bool // "charge", "capture", "void"
	// captureBefore is the capture_before the ledger gives an
	// authorization, from its creation.
	captureBefore time.Duration
}

type ledgerHold struct {
	order.Hold
	voided bool
}

type ledgerOp struct {
	attemptID string
	amount    int64
	ok        bool
}

func newHoldLedger() *holdLedger {
	return &holdLedger{holds: map[string]*ledgerHold{}, captures: map[string]ledgerOp{}, voids: map[string]ledgerOp{},
		lose: map[string]bool{}, captureBefore: 7 * 24 * time.Hour}
}

func (g *holdLedger) answer(kind string, res order.Result) (order.Result, error) {
	if g.lose[kind] {
		return order.Result{Outcome: order.OutcomeUnknown}, errors.New(kind + ": the response was lost")
	}
	return res, nil
}

func (g *holdLedger) hold(id string) *order.Hold {
	h := g.holds[id].Hold
	return &h
}

func (g *holdLedger) Charge(_ context.Context, req order.ChargeRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if req.Capture != order.CaptureManual {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "test_ledger_authorizes_only"}, nil
	}
	if req.PaymentMethod == "tok_3ds" {
		// The customer must authenticate first; the lookup after their
		// return finds the authorization.
		g.holds[req.AttemptID] = &ledgerHold{Hold: order.Hold{State: order.HoldOpen, AuthorizedMinor: req.Amount.AmountMinor,
			CaptureBefore: time.Now().Add(g.captureBefore).Truncate(time.Microsecond)}}
		return order.Result{Outcome: order.OutcomeRequiresAction, ChargeID: "auth_" + req.AttemptID,
			NextAction: order.NextAction{RedirectURL: "https://gateway.test/3ds"}}, nil
	}
	if _, ok := g.holds[req.AttemptID]; !ok {
		g.holds[req.AttemptID] = &ledgerHold{Hold: order.Hold{State: order.HoldOpen, AuthorizedMinor: req.Amount.AmountMinor,
			CaptureBefore: time.Now().Add(g.captureBefore).Truncate(time.Microsecond)}}
	}
	return g.answer("charge", order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "auth_" + req.AttemptID,
		Hold: g.hold(req.AttemptID)})
}

func (g *holdLedger) Lookup(_ context.Context, req order.ChargeRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.holds[req.AttemptID]; !ok {
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	}
	return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "auth_" + req.AttemptID, Hold: g.hold(req.AttemptID)}, nil
}

func (g *holdLedger) Capture(_ context.Context, req order.CaptureRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if op, ok := g.captures[req.CaptureID]; ok {
		return g.answer("capture", g.opResult(op))
	}
	h, ok := g.holds[req.ChargeAttemptID]
	op := ledgerOp{attemptID: req.ChargeAttemptID, amount: req.Amount.AmountMinor}
	if ok && h.State == order.HoldOpen && !h.voided && h.CapturedMinor+op.amount <= h.AuthorizedMinor {
		op.ok = true
		h.CapturedMinor += op.amount
		if req.Final {
			h.State = order.HoldCaptured
		}
	}
	g.captures[req.CaptureID] = op
	return g.answer("capture", g.opResult(op))
}

func (g *holdLedger) opResult(op ledgerOp) order.Result {
	if !op.ok {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "hold_not_capturable"}
	}
	return order.Result{Outcome: order.OutcomeSucceeded, Hold: g.hold(op.attemptID)}
}

func (g *holdLedger) LookupCapture(_ context.Context, req order.CaptureRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	op, ok := g.captures[req.CaptureID]
	if !ok {
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	}
	return g.opResult(op), nil
}

func (g *holdLedger) Void(_ context.Context, req order.VoidRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if op, ok := g.voids[req.VoidID]; ok {
		return g.answer("void", g.voidResult(op))
	}
	h, ok := g.holds[req.ChargeAttemptID]
	op := ledgerOp{attemptID: req.ChargeAttemptID}
	if ok && h.State == order.HoldOpen && h.CapturedMinor == 0 {
		op.ok, h.voided, h.State = true, true, order.HoldVoided
	}
	g.voids[req.VoidID] = op
	return g.answer("void", g.voidResult(op))
}

func (g *holdLedger) voidResult(op ledgerOp) order.Result {
	if !op.ok {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "hold_not_voidable"}
	}
	return order.Result{Outcome: order.OutcomeSucceeded}
}

func (g *holdLedger) LookupVoid(_ context.Context, req order.VoidRequest) (order.Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	op, ok := g.voids[req.VoidID]
	if !ok {
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	}
	return g.voidResult(op), nil
}

// expire lets attempt's hold lapse at the gateway.
func (g *holdLedger) expire(attemptID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds[attemptID].State = order.HoldExpired
}

// captured is what the gateway captured of attempt's hold, and whether it
// was voided.
func (g *holdLedger) captured(attemptID string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.holds[attemptID]
	return h.CapturedMinor, h.voided
}

// holdFixture is the charge path with the ledger as its one gateway.
type holdFixture struct {
	svc   *order.Service
	store *postgres.Store
	gw    *holdLedger
	pool  *pgxpool.Pool
	rec   *reconcile.Reconciler
	logs  logtest.Buffer
}

func newHoldFixture(t *testing.T) *holdFixture {
	t.Helper()
	f := &holdFixture{pool: postgrestest.Pool(t), gw: newHoldLedger()}
	f.store = postgres.NewStore(f.pool)
	gateways := map[string]order.Gateway{"held": f.gw}
	var err error
	f.svc, err = order.NewService(f.store, gateways, order.Config{
		DefaultGateway: "held", GatewayTimeout: gatewayTimeout, Grace: time.Second, FirstRecheck: time.Minute,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	f.rec, err = reconcile.New(f.store, gateways, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: gatewayTimeout, NoShowHorizon: time.Hour,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	return f
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

func (f *holdFixture) lose(kind string, lost bool) {
	f.gw.mu.Lock()
	defer f.gw.mu.Unlock()
	f.gw.lose[kind] = lost
}

// authorized creates a capture-manual order of 1250 GBP and charges it to
// AUTHORIZED.
func (f *holdFixture) authorized(t *testing.T, ref string) (order.Order, order.Attempt) {
	t.Helper()
	ctx := context.Background()
	n := newOrder(ref, "tok_ok")
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

// TestCaptureReplayAndConflict: the same request again returns the same
// capture and captures nothing more; the same request id with another
// amount or finality is ALREADY_EXISTS.
func TestCaptureReplayAndConflict(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	o, a := f.authorized(t, "cap-replay")
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
	if got, _ := f.gw.captured(a.ID); got != 500 {
		t.Fatalf("gateway captured %d, want 500", got)
	}
}

// TestConcurrentCapturesOverTheHold: twenty concurrent captures of 100
// against a hold of 1250: exactly twelve succeed, at the gateway too, and
// each other one is refused naming what is left.
func TestConcurrentCapturesOverTheHold(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	o, a := f.authorized(t, "cap-race")
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
	got, _ := f.gw.captured(a.ID)
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
	f := newHoldFixture(t)
	for i := range 10 {
		o, a := f.authorized(t, fmt.Sprintf("race-%d", i))
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
		amount, gwVoided := f.gw.captured(a.ID)
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
	f := newHoldFixture(t)
	o, _ := f.authorized(t, "cap-partial")
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
	f := newHoldFixture(t)
	o, a := f.authorized(t, "cap-multi")
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
	if got, _ := f.gw.captured(a.ID); got != 1250 {
		t.Fatalf("gateway captured %d, want 1250", got)
	}
}

// TestCaptureAfterExpiryAsksTheGateway: a capture past capture_before (the
// hold lapsed at the gateway) is still sent, and the gateway's refusal
// decides: the capture fails, the order stays AUTHORIZED.
func TestCaptureAfterExpiryAsksTheGateway(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	f.gw.captureBefore = -time.Minute // every hold is past its capture_before
	o, a := f.authorized(t, "cap-expired")
	if !o.CaptureBefore.Before(time.Now()) {
		t.Fatalf("capture_before %s is not past", o.CaptureBefore)
	}
	f.gw.expire(a.ID)
	o, c, err := f.capture(o.ID, "capture-1", 0, true)
	if err != nil || c.State != order.CaptureFailed || c.Outcome != order.OutcomeDeclined || o.State != order.StateAuthorized ||
		o.CapturingMinor != 0 {
		t.Fatalf("capture after expiry: %+v %+v, %v; want the gateway's decline", o, c, err)
	}
	f.gw.mu.Lock()
	_, sent := f.gw.captures[c.ID]
	f.gw.mu.Unlock()
	if !sent {
		t.Fatal("the capture was never sent to the gateway")
	}
}

// TestCaptureUnknownOutcomeStaysInFlight: a capture whose response is lost
// is returned CAPTURING with its amount reserved, and blocks a void; the
// gateway captured it once.
func TestCaptureUnknownOutcomeStaysInFlight(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	o, a := f.authorized(t, "cap-unknown")
	f.gw.mu.Lock()
	f.gw.lose["capture"] = true
	f.gw.mu.Unlock()
	o, c, err := f.capture(o.ID, "capture-1", 600, false)
	if err != nil || c.State != order.CaptureCapturing || o.CapturingMinor != 600 || o.State != order.StateAuthorized {
		t.Fatalf("capture with its response lost: %+v %+v, %v", o, c, err)
	}
	_, _, err = f.void(o.ID, "void-req-1")
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("void beside a capture of unknown outcome: %v, want a *HoldError", err)
	}
	if got, _ := f.gw.captured(a.ID); got != 600 {
		t.Fatalf("gateway captured %d, want 600", got)
	}
}

// TestVoidThenNoCapture: a void releases the hold and the order is VOIDED;
// a capture after it is refused by the state.
func TestVoidThenNoCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	o, _ := f.authorized(t, "void-ok")
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
	f := newHoldFixture(t)
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
// void whose responses were lost (the gateway acted) stay in flight, and
// the reconciler's lookups settle each as the gateway has it.
func TestTimeoutsSettledByTheReconciler(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	ctx := context.Background()
	scope := order.ForMerchant(merchant)

	f.lose("charge", true)
	n := newOrder("lost-auth", "tok_ok")
	n.Capture = order.CaptureManual
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, order.ChargeInput{RequestID: "charge-lost-auth"})
	if err != nil || o.State != order.StateCharging {
		t.Fatalf("authorize with its response lost: %+v, %v", o, err)
	}
	f.lose("charge", false)
	f.reconcileNow(t)
	o, err = f.svc.Get(ctx, scope, o.ID)
	if err != nil || o.State != order.StateAuthorized || o.AuthorizedMinor != 1250 || o.CaptureBefore.IsZero() {
		t.Fatalf("after the reconciler: %+v, %v; want AUTHORIZED holding 1250 with capture_before", o, err)
	}

	f.lose("capture", true)
	o, c, err := f.capture(o.ID, "capture-lost", 600, false)
	if err != nil || c.State != order.CaptureCapturing {
		t.Fatalf("capture with its response lost: %+v, %v", c, err)
	}
	f.lose("capture", false)
	f.reconcileNow(t)
	o, err = f.svc.Get(ctx, scope, o.ID)
	if err != nil || o.State != order.StatePaid || o.CapturedMinor != 600 || o.CapturingMinor != 0 {
		t.Fatalf("after the reconciler: %+v, %v; want PAID with 600 captured", o, err)
	}
	if got, _ := f.gw.captured(a.ID); got != 600 {
		t.Fatalf("gateway captured %d, want 600", got)
	}

	v, _ := f.authorized(t, "lost-void")
	f.lose("void", true)
	v, vd, err := f.void(v.ID, "void-lost-1")
	if err != nil || vd.State != order.VoidVoiding || !v.Voiding {
		t.Fatalf("void with its response lost: %+v %+v, %v", v, vd, err)
	}
	f.lose("void", false)
	f.reconcileNow(t)
	v, err = f.svc.Get(ctx, scope, v.ID)
	if err != nil || v.State != order.StateVoided || v.Voiding {
		t.Fatalf("after the reconciler: %+v, %v; want VOIDED", v, err)
	}
}

// TestExpiryIsTheGatewaysWord: past capture_before the reconciler asks the
// gateway; an open hold stays AUTHORIZED (the clock moves nothing), a
// lapsed one becomes EXPIRED.
func TestExpiryIsTheGatewaysWord(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	ctx := context.Background()
	f.gw.captureBefore = -time.Minute
	o, a := f.authorized(t, "expiry")
	f.reconcileNow(t)
	got, err := f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || got.State != order.StateAuthorized {
		t.Fatalf("open hold past capture_before: %s, %v; want AUTHORIZED", got.State, err)
	}
	f.gw.expire(a.ID)
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
}

// TestThreeDSecureThenCapture: a capture-manual charge that asks the
// customer to authenticate is REQUIRES_ACTION; once they are back, the
// same request settles it to AUTHORIZED, and it captures.
func TestThreeDSecureThenCapture(t *testing.T) {
	t.Parallel()
	f := newHoldFixture(t)
	ctx := context.Background()
	n := newOrder("cap-3ds", "tok_3ds")
	n.Capture = order.CaptureManual
	in := order.ChargeInput{RequestID: "charge-cap-3ds", CustomerPresent: true, ReturnURL: "https://shop.test/back"}
	o, a, err := f.svc.CreateAndCharge(ctx, merchant, n, in)
	if err != nil || o.State != order.StateRequiresAction || a == nil || a.NextAction.RedirectURL == "" {
		t.Fatalf("charge: %+v %+v, %v; want REQUIRES_ACTION with a redirect", o, a, err)
	}
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
	f := newHoldFixture(t)
	ctx := context.Background()
	o, _ := f.authorized(t, "resolve-held")
	if _, err := f.pool.Exec(ctx, `UPDATE orders SET state = 'NEEDS_REVIEW' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Resolve(ctx, order.AnyMerchant, o.ID, order.EventResolvePaid, "auth_1", "found it", order.Operator("ops-1"))
	var he *order.HoldError
	if !errors.As(err, &he) {
		t.Fatalf("resolve PAID of an authorization: %v, want a *HoldError", err)
	}
}
