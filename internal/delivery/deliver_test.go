package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/settlepay/settle/internal/delivery"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

const secret = "whsec_test_0123456789abcdef"

// receiver is a merchant's endpoint: it verifies each delivery with the
// documented snippet and answers with the status answer gives for the
// n-th delivery (0-based).
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	ids    []string // event ids in the order received, verified or not
	types  []string
	bodies [][]byte
	answer func(n int, r *http.Request) int
	*httptest.Server
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	rc := &receiver{t: t, answer: answer}
	// The Standard Webhooks headers are checked by the spec's own library.
	// secret starts with whsec_ but is no base64 key, so it signs as a raw
	// key, as docs/api.md says.
	std, err := standardwebhooks.NewWebhookRaw([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := VerifySettleSignature(r.Header.Get("Settle-Signature"), body, secret, 5*time.Minute); err != nil {
			t.Errorf("delivery does not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := std.Verify(body, r.Header); err != nil {
			t.Errorf("delivery does not verify as a Standard Webhook: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if id := r.Header.Get(delivery.HeaderWebhookID); id != r.Header.Get("Settle-Event-Id") {
			t.Errorf("webhook-id %q, Settle-Event-Id %q", id, r.Header.Get("Settle-Event-Id"))
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID != r.Header.Get("Settle-Event-Id") {
			t.Errorf("body %s, header id %s: %v", body, r.Header.Get("Settle-Event-Id"), err)
		}
		rc.mu.Lock()
		n := len(rc.ids)
		rc.ids = append(rc.ids, ev.ID)
		rc.types = append(rc.types, ev.Type)
		rc.bodies = append(rc.bodies, body)
		rc.mu.Unlock()
		w.WriteHeader(rc.answer(n, r))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...)
}

func ok(int, *http.Request) int { return http.StatusOK }

// pendingOrder creates a PENDING order of 1.00 GBP for merchant.
func pendingOrder(t *testing.T, s *postgres.Store, merchant, ref string) order.Order {
	t.Helper()
	o, err := s.CreateOrder(context.Background(), order.Order{ID: order.NewID(), MerchantID: merchant, MerchantReference: ref,
		Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok", Gateway: "sim", State: order.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// canceledOrder makes an order.canceled event for merchant and returns its id.
func canceledOrder(t *testing.T, s *postgres.Store, merchant, ref string) string {
	t.Helper()
	ctx := context.Background()
	o := pendingOrder(t, s, merchant, ref)
	if _, err := s.Transition(ctx, order.ForMerchant(merchant), o.ID, func(order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func newDeliverer(t *testing.T, s *postgres.Store, cfg delivery.Config) *delivery.Deliverer {
	t.Helper()
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, time.Millisecond
	}
	d, err := delivery.New(s, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func runOnce(t *testing.T, d *delivery.Deliverer) int {
	t.Helper()
	n, err := d.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoveredEndpointGetsTheEvent: an endpoint that answers 500 gets the
// event again, with the same id, and once it answers 200 the event is
// delivered and sent no more; the event's story keeps the failed try.
func TestRecoveredEndpointGetsTheEvent(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	rc := newReceiver(t, func(n int, _ *http.Request) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	id := canceledOrder(t, s, "m1", "ref-1")
	d := newDeliverer(t, s, delivery.Config{Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}}})
	if n := runOnce(t, d); n != 0 {
		t.Fatalf("delivered %d on a 500", n)
	}
	time.Sleep(5 * time.Millisecond) // the backoff
	if n := runOnce(t, d); n != 1 {
		t.Fatalf("delivered %d after the endpoint recovered, want 1", n)
	}
	time.Sleep(5 * time.Millisecond)
	if n := runOnce(t, d); n != 0 {
		t.Fatalf("delivered %d more", n)
	}
	ids := rc.received()
	if len(ids) != 2 || ids[0] != ids[1] || rc.types[0] != "order.canceled" {
		t.Fatalf("received %v %v, want one event twice", ids, rc.types)
	}
	story, err := s.OrderEventDeliveries(context.Background(), "m1", id)
	if err != nil || len(story) != 1 {
		t.Fatalf("events out: %+v, %v", story, err)
	}
	tries := story[0].FailedTries
	if story[0].Attempts != 2 || story[0].DeliveredAt.IsZero() || len(tries) != 1 || tries[0].Attempt != 1 ||
		tries[0].Status != http.StatusInternalServerError || tries[0].Error != "endpoint answered 500" ||
		!tries[0].At.Before(story[0].DeliveredAt) {
		t.Fatalf("the event's story: %+v", story[0])
	}
}

// TestHangingEndpointTimesOut: a POST that gets no answer is abandoned at
// the timeout and retried; meanwhile, under Run, another merchant's events
// are delivered (its lane does not wait for the hanging one).
func TestHangingEndpointTimesOut(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	release := make(chan struct{})
	hanging := newReceiver(t, func(n int, r *http.Request) int {
		if n == 0 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	healthy := newReceiver(t, ok)
	canceledOrder(t, s, "slow", "ref-slow")
	d := newDeliverer(t, s, delivery.Config{Timeout: 3 * time.Second, Endpoints: []delivery.Endpoint{
		{MerchantID: "slow", URL: hanging.URL, Secrets: []string{secret}}}})
	if n := runOnce(t, d); n != 0 {
		t.Fatalf("delivered %d to a hanging endpoint", n)
	}
	time.Sleep(5 * time.Millisecond)
	if n := runOnce(t, d); n != 1 {
		t.Fatalf("delivered %d on the retry, want 1", n)
	}

	// Under Run: the slow merchant's endpoint hangs (for as long as the
	// test wants); the other merchant's event arrives meanwhile.
	hanging2 := newReceiver(t, func(n int, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	canceledOrder(t, s, "slow2", "ref-slow2")
	canceledOrder(t, s, "fast", "ref-fast")
	d2 := newDeliverer(t, s, delivery.Config{Timeout: time.Hour, PollInterval: 10 * time.Millisecond, Endpoints: []delivery.Endpoint{
		{MerchantID: "slow2", URL: hanging2.URL, Secrets: []string{secret}},
		{MerchantID: "fast", URL: healthy.URL, Secrets: []string{secret}}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d2.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); len(healthy.received()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the healthy merchant got nothing while the other's endpoint hung")
		}
	}
	// The lanes run side by side: the hanging endpoint's request may come
	// after the healthy merchant's event, but it comes, once (it hangs for
	// the hour's timeout).
	for deadline := time.Now().Add(30 * time.Second); len(hanging2.received()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hanging endpoint was never tried")
		}
	}
	if got := hanging2.received(); len(got) != 1 {
		t.Fatalf("the hanging endpoint got %v", got)
	}
	close(release)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestKilledWorkerRedelivers: a worker that dies after the POST and
// before recording it leaves the event leased; once the lease ends,
// another worker delivers it again with the same id.
func TestKilledWorkerRedelivers(t *testing.T) {
	t.Parallel()
	pool := postgrestest.Pool(t)
	s := postgres.NewStore(pool)
	rc := newReceiver(t, ok)
	canceledOrder(t, s, "m1", "ref-1")
	eps := []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}}
	// runtime.Goexit ends the lane's goroutine at the failpoint, as a
	// SIGKILL would end the process: nothing after it runs.
	dying := newDeliverer(t, s, delivery.Config{Endpoints: eps, Lease: time.Minute,
		Failpoint: func(string) { runtime.Goexit() }})
	runOnce(t, dying)
	if got := rc.received(); len(got) != 1 {
		t.Fatalf("received %v", got)
	}
	d := newDeliverer(t, s, delivery.Config{Endpoints: eps})
	if n := runOnce(t, d); n != 0 {
		t.Fatalf("delivered %d while the dead worker's lease holds", n)
	}
	// The lease ends (a minute later, as far as the outbox can tell).
	if _, err := pool.Exec(context.Background(), `UPDATE order_events SET deliver_at = now() WHERE deliver_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if n := runOnce(t, d); n != 1 {
		t.Fatalf("delivered %d after the lease, want 1", n)
	}
	if got := rc.received(); len(got) != 2 || got[0] != got[1] {
		t.Fatalf("received %v, want the same event twice", got)
	}
}

// TestFailsAfterRetryWindow: an endpoint that never takes the event has
// it marked failed when the retry window ends, counted, and no longer
// sent.
func TestFailsAfterRetryWindow(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusServiceUnavailable })
	canceledOrder(t, s, "m1", "ref-1")
	var failed int
	d := newDeliverer(t, s, delivery.Config{RetryFor: time.Millisecond, BackoffBase: time.Second, BackoffMax: time.Second,
		Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}},
		OnRecord: func(r order.DeliveryRecord) {
			if r.Failed {
				failed++
			}
		}})
	runOnce(t, d)
	if failed != 1 {
		t.Fatalf("failed %d, want 1", failed)
	}
	runOnce(t, d)
	if got := rc.received(); len(got) != 1 {
		t.Fatalf("a failed event was sent again: %v", got)
	}
}

// TestDownEndpointIsNotAskedPerEvent: after one failure in a lane, the
// rest of the lane is put back untried.
func TestDownEndpointIsNotAskedPerEvent(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusBadGateway })
	for _, ref := range []string{"a", "b", "c"} {
		canceledOrder(t, s, "m1", ref)
	}
	d := newDeliverer(t, s, delivery.Config{Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}}})
	runOnce(t, d)
	if got := rc.received(); len(got) != 1 {
		t.Fatalf("a down endpoint was asked %d times in one lane", len(got))
	}
}

// refundedOrder makes an order.paid (the merchant's charge), a
// refund.succeeded and an order.refunded event (an operator's refund) for
// merchant and returns the refund's id.
func refundedOrder(t *testing.T, s *postgres.Store, merchant, ref string) string {
	t.Helper()
	ctx := context.Background()
	o := pendingOrder(t, s, merchant, ref)
	c, err := s.Claim(ctx, order.Claim{MerchantID: merchant, OrderID: o.ID, RequestID: "req-" + ref, AttemptID: order.NewID(),
		From: order.StatePending, To: order.StateCharging, Event: order.EventCharge, Lease: time.Minute, Actor: order.ActorAPI})
	if err != nil || !c.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if _, _, err := s.SettleMany(ctx, []order.Settlement{{MerchantID: merchant, OrderID: o.ID, AttemptID: c.Attempt.ID,
		Event: order.EventSucceed, To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"},
		Actor: order.ActorAPI}}); err != nil {
		t.Fatal(err)
	}
	rc, err := s.ClaimRefund(ctx, order.RefundClaim{MerchantID: merchant, OrderID: o.ID, RequestID: "refund-" + ref,
		RefundID: order.NewID(), Actor: order.Operator("a-ops"), Reason: "goodwill", Lease: time.Minute})
	if err != nil || !rc.Claimed {
		t.Fatalf("claim refund: %+v %v", rc, err)
	}
	st := order.RefundSettlementFor(merchant, rc.Refund.OrderID, rc.Refund.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_1"}, time.Minute)
	st.Actor = order.Operator("a-ops")
	if _, _, ok, err := s.SettleRefund(ctx, st); err != nil || !ok {
		t.Fatalf("settle refund: %v %v", ok, err)
	}
	return rc.Refund.ID
}

// TestRefundEventsAreDelivered: a refund's event goes out with its order's,
// signed the same way (the receiver verifies each with the documented
// snippet), its payload the refund with its order's id. Each event says
// what kind of actor made it, and the refund who asked for it: here an
// operator, whose reason it carries; never the operator's key name.
func TestRefundEventsAreDelivered(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	rc := newReceiver(t, ok)
	refundID := refundedOrder(t, s, "m1", "ref-1")
	d := newDeliverer(t, s, delivery.Config{Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}}})
	if n := runOnce(t, d); n != 3 {
		t.Fatalf("delivered %d, want 3 (order.paid, refund.succeeded, order.refunded); received %v", n, rc.types)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	bodies := map[string][]byte{}
	for i, typ := range rc.types {
		bodies[typ] = rc.bodies[i]
		if bytes.Contains(rc.bodies[i], []byte("a-ops")) {
			t.Errorf("%s body %s names the operator's key", typ, rc.bodies[i])
		}
	}
	var ev struct {
		Type   string `json:"type"`
		Actor  string `json:"actor"`
		Refund struct {
			ID          string `json:"id"`
			OrderID     string `json:"order_id"`
			State       string `json:"state"`
			Reason      string `json:"reason"`
			RequestID   string `json:"request_id"`
			RequestedBy string `json:"requested_by"`
		} `json:"refund"`
	}
	body := bodies["refund.succeeded"]
	if err := json.Unmarshal(body, &ev); err != nil || ev.Refund.ID != refundID ||
		ev.Refund.State != "SUCCEEDED" || ev.Refund.OrderID == "" || ev.Refund.Reason != "goodwill" ||
		ev.Refund.RequestID != "refund-ref-1" || ev.Refund.RequestedBy != "operator" || ev.Actor != "operator" {
		t.Fatalf("refund.succeeded body %s: %v", body, err)
	}
	for typ, actor := range map[string]string{"order.paid": "merchant", "order.refunded": "operator"} {
		var o struct {
			Actor string `json:"actor"`
		}
		if err := json.Unmarshal(bodies[typ], &o); err != nil || o.Actor != actor {
			t.Errorf("%s body %s: %v; want actor %s", typ, bodies[typ], err, actor)
		}
	}
}

// TestPullOnlyMerchantIsLeftAlone: a merchant without an endpoint pulls its
// events. While another merchant's endpoint refuses everything until its
// events fail, the worker never leases the pull-only merchant's events
// (none tried, none failed), its backlog counts only the merchant with an
// endpoint, and the pull-only merchant still lists its events.
func TestPullOnlyMerchantIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.Pool(t)
	s := postgres.NewStore(pool)
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusServiceUnavailable })
	canceledOrder(t, s, "m1", "ref-1")
	canceledOrder(t, s, "pull", "ref-2")
	refundedOrder(t, s, "pull", "ref-3")
	var failed int
	d := newDeliverer(t, s, delivery.Config{RetryFor: time.Millisecond,
		Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}},
		OnRecord: func(r order.DeliveryRecord) {
			if r.Failed {
				failed++
			}
			if r.MerchantID != "m1" {
				t.Errorf("recorded a delivery of merchant %s's event", r.MerchantID)
			}
		}})
	bl, err := d.Backlog(ctx)
	if err != nil || len(bl) != 1 || bl[0].MerchantID != "m1" || bl[0].Pending != 1 {
		t.Fatalf("backlog %+v, %v; want m1's one event alone", bl, err)
	}
	for range 3 {
		runOnce(t, d)
		time.Sleep(5 * time.Millisecond)
	}
	if failed != 1 {
		t.Fatalf("failed %d events, want m1's one", failed)
	}
	var tried, failedPull int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(delivery_attempts), 0) FROM order_events WHERE merchant_id = 'pull')
			+ (SELECT coalesce(sum(delivery_attempts), 0) FROM refund_events WHERE merchant_id = 'pull'),
		(SELECT count(*) FROM order_events WHERE merchant_id = 'pull' AND failed_at IS NOT NULL)
			+ (SELECT count(*) FROM refund_events WHERE merchant_id = 'pull' AND failed_at IS NOT NULL)`).Scan(&tried, &failedPull); err != nil {
		t.Fatal(err)
	}
	if tried != 0 || failedPull != 0 {
		t.Fatalf("the pull-only merchant's events: %d tries, %d failed; want none", tried, failedPull)
	}
	if bl, err := d.Backlog(ctx); err != nil || len(bl) != 1 || bl[0].MerchantID != "m1" || bl[0].Pending != 0 {
		t.Fatalf("backlog after m1's event failed: %+v, %v", bl, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		evs, err := s.ListEvents(ctx, "pull", order.EventCursor{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 4 { // order.canceled; order.paid, refund.succeeded, order.refunded
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pull-only merchant lists %d events, want 4", len(evs))
		}
	}
}

// TestLaneBoundsPostsInFlight: under Run, a merchant's backlog of several
// batches goes out with at most InFlight POSTs at its endpoint at once,
// each event once; a lane's first POST goes alone.
func TestLaneBoundsPostsInFlight(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(postgrestest.Pool(t))
	const events, inFlight = 20, 3
	var now, most atomic.Int32
	rc := newReceiver(t, func(n int, _ *http.Request) int {
		c := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		return http.StatusOK
	})
	for i := range events {
		canceledOrder(t, s, "m1", fmt.Sprintf("ref-%d", i))
	}
	var delivered atomic.Int32
	d := newDeliverer(t, s, delivery.Config{PerMerchant: 4, InFlight: inFlight, PollInterval: 10 * time.Millisecond,
		Endpoints: []delivery.Endpoint{{MerchantID: "m1", URL: rc.URL, Secrets: []string{secret}}},
		OnRecord: func(r order.DeliveryRecord) {
			if r.Outcome == order.DeliveryDelivered {
				delivered.Add(1)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); delivered.Load() < events; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d events", delivered.Load(), events)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := rc.received()
	if len(got) != events || len(slices.Compact(slices.Sorted(slices.Values(got)))) != events {
		t.Fatalf("received %v, want %d events once each", got, events)
	}
	if m := most.Load(); m > inFlight || m < 2 {
		t.Fatalf("at most %d POSTs at the endpoint at once, want 2 to %d", m, inFlight)
	}
}
