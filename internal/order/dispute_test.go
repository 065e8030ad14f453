package order_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// disputeWord is what a gateway says of dispute dp at one point.
func disputeWord(dp string, stage order.DisputeStage, status order.DisputeStatus, withdrawn, reinstated int64) order.GatewayDispute {
	return order.GatewayDispute{ID: dp, Status: status, Stage: stage, Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
		Reason: "fraudulent", NetworkReasonCode: "10.4", DueBy: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC),
		Withdrawn: withdrawn, Reinstated: reinstated}
}

// disputeEventOf is the gateway's event id about attempt's charge carrying d.
func disputeEventOf(gateway, id, attempt string, d order.GatewayDispute) order.GatewayEvent {
	return order.GatewayEvent{Gateway: gateway, ID: id, Type: "dispute." + strings.ToLower(string(d.Status)),
		ObjectID: d.ID, AttemptID: attempt, Dispute: &d}
}

func (f *fixture) recordDispute(t *testing.T, ev order.GatewayEvent) order.RecordedEvent {
	t.Helper()
	rec, err := f.svc.RecordGatewayEvent(context.Background(), ev)
	if err != nil {
		t.Fatalf("record %s: %v", ev.ID, err)
	}
	return rec
}

// onlyDispute returns the order's one dispute.
func (f *fixture) onlyDispute(t *testing.T, orderID string) order.Dispute {
	t.Helper()
	ds, err := f.store.OrderDisputes(context.Background(), merchant, orderID)
	if err != nil || len(ds) != 1 {
		t.Fatalf("disputes of %s: %+v %v", orderID, ds, err)
	}
	return ds[0]
}

// TestDisputeEventsConverge: whatever order a gateway's events about a
// dispute arrive in, however often each arrives, and whichever of them are
// lost, the dispute ends as the gateway's last word says (each event
// carries the dispute as it then stood), and the order's totals with it.
func TestDisputeEventsConverge(t *testing.T) {
	t.Parallel()
	won := []order.GatewayDispute{
		disputeWord("dp", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeNeedsResponse, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeUnderReview, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeWon, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeWon, 1250, 1250),
	}
	lost := []order.GatewayDispute{
		disputeWord("dp", order.DisputeInquiry, order.DisputeNeedsResponse, 0, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeNeedsResponse, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeUnderReview, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeLost, 1250, 0),
	}
	// Adyen's: a reversal, then a second chargeback, which is final.
	second := []order.GatewayDispute{
		disputeWord("dp", order.DisputeChargeback, order.DisputeLost, 1250, 0),
		disputeWord("dp", order.DisputeChargeback, order.DisputeWon, 1250, 1250),
		disputeWord("dp", order.DisputeSecondChargeback, order.DisputeLost, 2500, 1250),
	}
	for _, tc := range []struct {
		name   string
		words  []order.GatewayDispute
		charge int64 // the order's charged back amount at the end
	}{
		{"won", won, 0},
		{"lost", lost, 1250},
		{"second_chargeback", second, 1250},
	} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, seed), func(t *testing.T) {
				t.Parallel()
				f := newWordFixture(t)
				o := f.paid(t, fmt.Sprintf("dispute-%s-%d", tc.name, seed), "tok_ok")
				rng := rand.New(rand.NewPCG(seed, 32))
				// Each word is its own event; the last always arrives, the
				// others may be lost, repeated, and come in any order.
				var evs []order.GatewayEvent
				for i, w := range tc.words {
					ev := disputeEventOf("sim", fmt.Sprintf("evt_%d", i), o.CurrentAttempt, w)
					last := i == len(tc.words)-1
					if !last && seed > 0 && rng.IntN(3) == 0 {
						continue // lost
					}
					for range 1 + rng.IntN(3) {
						evs = append(evs, ev)
					}
				}
				if seed > 0 {
					rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
				}
				seen := map[string]bool{}
				for _, ev := range evs {
					rec := f.recordDispute(t, ev)
					switch {
					case seen[ev.ID] && rec.Result != order.EventDuplicate:
						t.Fatalf("repeat of %s: %s, want duplicate", ev.ID, rec.Result)
					case !seen[ev.ID] && rec.Result != order.EventDispute && rec.Result != order.EventDisputeStale:
						t.Fatalf("first %s: %s", ev.ID, rec.Result)
					case !seen[ev.ID] && rec.OrderID != o.ID:
						t.Fatalf("%s matched order %q, want %s", ev.ID, rec.OrderID, o.ID)
					}
					seen[ev.ID] = true
				}
				want := tc.words[len(tc.words)-1]
				d := f.onlyDispute(t, o.ID)
				if d.Status != want.Status || d.Stage != want.Stage || d.Withdrawn != want.Withdrawn ||
					d.Reinstated != want.Reinstated || d.GatewayDisputeID != "dp" || d.Amount != want.Amount {
					t.Fatalf("dispute after %d events: %+v, want %+v", len(evs), d, want)
				}
				got, err := f.svc.Get(context.Background(), order.ForMerchant(merchant), o.ID)
				if err != nil || got.State != order.StatePaid || got.OpenDisputes != 0 || got.ChargedBack != tc.charge {
					t.Fatalf("order: %+v %v, want PAID with %d charged back", got, err, tc.charge)
				}
			})
		}
	}
}

// TestRefundRefusedWhileDisputeOpen: a refund of an order whose dispute is
// open is a *DisputeOpenError naming the dispute, and nothing is sent to
// the gateway; once the dispute is lost, what was charged back is no
// longer refundable, and the rest is.
func TestRefundRefusedWhileDisputeOpen(t *testing.T) {
	t.Parallel()
	f, gw := newReadableFixture(t)
	ctx := context.Background()
	o := f.paid(t, "dispute-refund", "tok_ok")
	open := disputeWord("dp_r", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)
	gw.set(open)
	f.recordDispute(t, disputeEventOf("sim", "evt_open", o.CurrentAttempt, open))
	d := f.onlyDispute(t, o.ID)

	_, _, err := f.svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "refund-during", AmountMinor: 100})
	var openErr *order.DisputeOpenError
	if !errors.As(err, &openErr) || openErr.DisputeID != d.ID || !strings.Contains(err.Error(), d.ID) {
		t.Fatalf("refund during a dispute: %v, want a *DisputeOpenError naming %s", err, d.ID)
	}
	if got := f.sim.Refunded(o.CurrentAttempt); got != 0 {
		t.Fatalf("the gateway refunded %d during the dispute", got)
	}

	// Lost, with 1000 of 1250 taken back (a partial chargeback).
	lost := disputeWord("dp_r", order.DisputeChargeback, order.DisputeLost, 1000, 0)
	lost.Amount.AmountMinor = 1000
	gw.set(lost)
	f.recordDispute(t, disputeEventOf("sim", "evt_lost", o.CurrentAttempt, lost))
	_, _, err = f.svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "refund-after", AmountMinor: 251})
	wantLimit(t, err, 250)
	got, r := f.refund(t, o.ID, "refund-rest", 0)
	if r.Amount.AmountMinor != 250 || r.State != order.RefundSucceeded || got.ChargedBack != 1000 {
		t.Fatalf("the rest: refund %+v, order %+v", r, got)
	}
}

// TestRefundsRacingADisputeOpening: refunds sent while a dispute opens are
// each either admitted before it opened (by the order's row lock, which
// numbers the refund's claim and the dispute's row in one sequence) or
// refused naming it; none is admitted after, and once the dispute is lost
// nothing is paid out past what was paid less what was charged back.
func TestRefundsRacingADisputeOpening(t *testing.T) {
	t.Parallel()
	f, gw := newReadableFixture(t)
	ctx := context.Background()
	o := f.paid(t, "dispute-race", "tok_ok")
	opening := disputeWord("dp_race", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)
	gw.set(opening)

	const refunds = 10
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, refunds)
	for i := range refunds {
		wg.Go(func() {
			<-start
			_, _, errs[i] = f.svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
				order.RefundInput{OrderID: o.ID, RequestID: fmt.Sprintf("race-refund-%d", i), AmountMinor: 100})
		})
	}
	var openErr error
	wg.Go(func() {
		<-start
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		_, openErr = f.svc.RecordGatewayEvent(ctx, disputeEventOf("sim", "evt_race", o.CurrentAttempt, opening))
	})
	close(start)
	wg.Wait()
	if openErr != nil {
		t.Fatal(openErr)
	}
	d := f.onlyDispute(t, o.ID)
	admitted := 0
	for i, err := range errs {
		var open *order.DisputeOpenError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &open) && open.DisputeID == d.ID:
		default:
			t.Fatalf("refund %d: %v", i, err)
		}
	}
	// Each admitted refund's claim is numbered before the dispute's row.
	var after int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM refund_events r
		WHERE r.order_id = $1 AND r.to_state = 'REFUNDING'
		AND r.event_id > (SELECT min(id) FROM order_events WHERE order_id = $1 AND dispute_id IS NOT NULL)`,
		o.ID).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != 0 {
		t.Fatalf("%d refunds were admitted after the dispute opened", after)
	}
	got, err := f.svc.Get(ctx, order.ForMerchant(merchant), o.ID)
	if err != nil || got.Refunded != int64(admitted)*100 || got.Refunding != 0 {
		t.Fatalf("order %+v %v, want %d refunded", got, err, admitted*100)
	}
	// The network takes back what was not refunded, and the dispute is lost.
	rest := 1250 - got.Refunded
	lost := disputeWord("dp_race", order.DisputeChargeback, order.DisputeLost, rest, 0)
	gw.set(lost)
	f.recordDispute(t, disputeEventOf("sim", "evt_race_lost", o.CurrentAttempt, lost))
	_, _, err = f.svc.Refund(ctx, order.ForMerchant(merchant), order.ActorAPI,
		order.RefundInput{OrderID: o.ID, RequestID: "race-refund-after", AmountMinor: 0})
	wantLimit(t, err, 0)
	if paid := f.sim.Refunded(o.CurrentAttempt) + rest; paid > 1250 {
		t.Fatalf("paid out %d of 1250 (refunds %d, charged back %d)", paid, f.sim.Refunded(o.CurrentAttempt), rest)
	}
}

// readableGateway is the simulator's refpsp gateway with a dispute read
// and accept of its own (order.DisputeGateway), holding each dispute as the
// gateway would; failAccept makes AcceptDispute's outcome unknown.
type readableGateway struct {
	*refpsp.Client
	mu         sync.Mutex
	disputes   map[string]order.GatewayDispute
	reads      int
	failAccept bool
}

func (g *readableGateway) set(d order.GatewayDispute) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.disputes[d.ID] = d
}

func (g *readableGateway) GetDispute(_ context.Context, id string) (order.GatewayDispute, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	d, ok := g.disputes[id]
	if !ok {
		return order.GatewayDispute{}, fmt.Errorf("no dispute %s", id)
	}
	return d, nil
}

func (g *readableGateway) AcceptDispute(_ context.Context, id string) (order.GatewayDispute, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failAccept {
		return order.GatewayDispute{}, errors.New("timeout")
	}
	d := g.disputes[id]
	d.Status = order.DisputeLost
	g.disputes[id] = d
	return d, nil
}

// newReadableFixture is newFixture whose default gateway reads and
// accepts disputes from a state the test sets, so that a test decides what
// the read says when.
func newReadableFixture(t *testing.T) (*fixture, *readableGateway) {
	t.Helper()
	f := newFixture(t)
	rg := &readableGateway{Client: f.simClient(t), disputes: map[string]order.GatewayDispute{}}
	f.useGateway(t, rg)
	return f, rg
}

// wordGateway is a gateway whose dispute events are its word, as Adyen's
// notifications are: it charges and looks up, but has no dispute read or
// accept (it is no order.DisputeGateway).
type wordGateway struct{ order.Gateway }

// newWordFixture is newFixture whose default gateway is a wordGateway over
// the simulator.
func newWordFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.useGateway(t, wordGateway{f.simClient(t)})
	return f
}

// simClient is a refpsp client of the fixture's simulator.
func (f *fixture) simClient(t *testing.T) *refpsp.Client {
	t.Helper()
	gw, err := refpsp.New(refpsp.Config{BaseURL: f.simURL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// useGateway makes gw the fixture Service's only gateway, "sim".
func (f *fixture) useGateway(t *testing.T, gw order.Gateway) {
	t.Helper()
	var err error
	f.svc, err = order.NewService(f.store, map[string]order.Gateway{"sim": gw}, order.Config{
		DefaultGateway: "sim", GatewayTimeout: gatewayTimeout, Grace: time.Second, FirstRecheck: time.Minute,
	}, f.logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
}

// TestDisputeReadDecides: for a gateway that can read its disputes, an
// event is a hint: the dispute is read and the read applied, whatever the
// event says.
func TestDisputeReadDecides(t *testing.T) {
	t.Parallel()
	f, gw := newReadableFixture(t)
	o := f.paid(t, "dispute-read", "tok_ok")
	gw.set(disputeWord("dp_read", order.DisputeChargeback, order.DisputeUnderReview, 1250, 0))
	// The event is older than the gateway's state.
	f.recordDispute(t, disputeEventOf("sim", "evt_hint", o.CurrentAttempt,
		disputeWord("dp_read", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)))
	d := f.onlyDispute(t, o.ID)
	if d.Status != order.DisputeUnderReview || d.Withdrawn != 1250 || gw.reads != 1 {
		t.Fatalf("dispute %+v after %d reads, want the read's UNDER_REVIEW", d, gw.reads)
	}
}

// TestAcceptDispute: an operator's accept is sent to the gateway, the
// answer applied and the operator recorded in the history; an unknown
// outcome leaves the dispute as it is and is ErrDisputeOutcomeUnknown; a gateway
// without the call is a *DisputeUnsupportedError.
func TestAcceptDispute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, gw := newReadableFixture(t)
	o := f.paid(t, "dispute-accept", "tok_ok")
	gw.set(disputeWord("dp_acc", order.DisputeChargeback, order.DisputeNeedsResponse, 1250, 0))
	f.recordDispute(t, disputeEventOf("sim", "evt_acc", o.CurrentAttempt, order.GatewayDispute{ID: "dp_acc"}))
	d := f.onlyDispute(t, o.ID)

	gw.failAccept = true
	if _, err := f.svc.AcceptDispute(ctx, order.AnyMerchant, order.Operator("alice"), d.ID); !errors.Is(err, order.ErrDisputeOutcomeUnknown) {
		t.Fatalf("accept with an unknown outcome: %v, want ErrDisputeOutcomeUnknown", err)
	}
	if got := f.onlyDispute(t, o.ID); got.Status != order.DisputeNeedsResponse {
		t.Fatalf("after an unknown accept: %s", got.Status)
	}
	gw.failAccept = false
	got, err := f.svc.AcceptDispute(ctx, order.AnyMerchant, order.Operator("alice"), d.ID)
	if err != nil || got.Status != order.DisputeLost {
		t.Fatalf("accept: %+v %v", got, err)
	}
	_, hist, err := f.svc.Dispute(ctx, order.AnyMerchant, d.ID)
	if err != nil || len(hist) != 2 || hist[1].Name != order.DisputeAccept || hist[1].Actor != order.Operator("alice") ||
		hist[1].To != order.DisputeLost {
		t.Fatalf("history %+v %v", hist, err)
	}

	// A gateway whose events are its word cannot accept.
	plain := newWordFixture(t)
	po := plain.paid(t, "dispute-plain", "tok_ok")
	plain.recordDispute(t, disputeEventOf("sim", "evt_plain", po.CurrentAttempt,
		disputeWord("dp_plain", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)))
	pd := plain.onlyDispute(t, po.ID)
	var unsup *order.DisputeUnsupportedError
	if _, err := plain.svc.AcceptDispute(ctx, order.AnyMerchant, order.Operator("alice"), pd.ID); !errors.As(err, &unsup) {
		t.Fatalf("accept at a gateway without the call: %v", err)
	}
}
