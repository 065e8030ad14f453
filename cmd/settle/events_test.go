package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/lab/mutant"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

const eventSecret = "evsec_test_0123456789abcdef"

// flakyReceiver is a merchant's endpoint that answers each delivery with
// the status answer gives for the n-th (0-based), and keeps each delivery
// with what it answered.
type flakyReceiver struct {
	rc       *receiver.Receiver
	mu       sync.Mutex
	answered []int
	*httptest.Server
}

func newFlakyReceiver(t *testing.T, answer func(n int) int) *flakyReceiver {
	t.Helper()
	f := &flakyReceiver{rc: receiver.New([]string{eventSecret}, nil)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := len(f.answered)
		status := answer(n)
		f.answered = append(f.answered, status)
		f.mu.Unlock()
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		f.rc.ServeHTTP(w, r) // verifies the signature and keeps the delivery
	}))
	t.Cleanup(f.Close)
	return f
}

// eventEnv is the environment of a delivery worker sending the default
// merchant's events to url: quick polls, one event per lease, a short
// timeout (so a 9 s lease).
func eventEnv(dbURL, url string) []string {
	return []string{"DATABASE_URL=" + dbURL, "SETTLE_LOG_FORMAT=text",
		"SETTLE_EVENT_WEBHOOKS=" + order.DefaultMerchant + " " + url + " " + eventSecret,
		"SETTLE_EVENT_DELIVERY_POLL=50ms", "SETTLE_EVENT_DELIVERY_TIMEOUT=2s", "SETTLE_EVENT_DELIVERY_BATCH=1"}
}

// canceledOrderEvent writes an order and its cancel (an order.canceled
// event) and returns the event's id.
func canceledOrderEvent(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	pool := openPool(t, dbURL)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, order.Order{ID: order.NewID(), MerchantID: order.DefaultMerchant, MerchantReference: "ev-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok", Gateway: "sim", State: order.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, order.ForMerchant(order.DefaultMerchant), o.ID, func(order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var num int64
	if err := pool.QueryRow(ctx, `SELECT id FROM order_events WHERE order_id = $1 AND type = 'order.canceled'`, o.ID).Scan(&num); err != nil {
		t.Fatal(err)
	}
	return order.EventID(num)
}

// TestDeliverKilledAfterPostRedelivers kills settle deliver (SIGKILL) after
// its POST was answered and before it recorded it: the next worker
// delivers the same event, with the same id, once the lease ends.
func TestDeliverKilledAfterPostRedelivers(t *testing.T) {
	t.Parallel()
	dbURL := postgrestest.URL(t)
	id := canceledOrderEvent(t, dbURL)
	f := newFlakyReceiver(t, func(int) int { return http.StatusOK })
	env := eventEnv(dbURL, f.URL)
	crashing := start(t, append(env, "SETTLE_FAILPOINTS=after-webhook-post"), "deliver")
	if ws := crashing.waitExit(t, 30*time.Second); ws.Signal() != syscall.SIGKILL {
		t.Fatalf("deliver exit status %v, want killed by SIGKILL", ws)
	}
	start(t, env, "deliver")
	got := waitDeliveries(t, f, 2, 60*time.Second)
	if got[0].EventID != id || got[1].EventID != id || !got[0].Verified || !got[1].Verified {
		t.Fatalf("deliveries %+v, want %s twice, signed", got, id)
	}
	waitDelivered(t, dbURL, id)
}

// TestDeliverRetriesUntilAccepted: an endpoint that answers 500 then 200
// gets the event once it recovers, and the event is recorded delivered.
// Its check is what catches a worker that marks a delivery done before the
// endpoint accepted it (TestDeliveryMutantCaught).
func TestDeliverRetriesUntilAccepted(t *testing.T) {
	t.Parallel()
	if problem := retriesUntilAccepted(t, os.Args[0], true); problem != "" {
		t.Fatal(problem)
	}
}

// TestDeliveryMutantCaught builds settle with a failed POST recorded as
// delivered (the bug of an outbox marked before the send succeeds) and
// requires TestDeliverRetriesUntilAccepted's check to fail on it.
func TestDeliveryMutantCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a mutant of settle; skipped with -short")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "settle-mutant")
	if err := mutant.Build(context.Background(), ".", "./cmd/settle", bin, deliveredBeforeAccepted); err != nil {
		t.Fatalf("build the mutant: %v", err)
	}
	problem := retriesUntilAccepted(t, bin, false)
	if problem == "" {
		t.Fatal("a worker that records failed POSTs as delivered passed the check")
	}
	t.Logf("the mutant fails as it should: %s", problem)
}

// deliveredBeforeAccepted records a POST the endpoint refused as delivered.
var deliveredBeforeAccepted = mutant.Mutation{
	File: "internal/delivery/delivery.go",
	Old:  "del.Outcome, del.Backoff, del.Attempt, del.Error = order.DeliveryRetry, backoff",
	New:  "del.Outcome, del.Backoff, del.Attempt, del.Error = order.DeliveryDelivered, backoff",
}

// retriesUntilAccepted runs settle deliver from bin (the test binary
// itself when asMain) against an endpoint that answers 500 then 200, and
// returns what went wrong: "" when the endpoint accepted the event.
func retriesUntilAccepted(t *testing.T, bin string, asMain bool) string {
	dbURL := postgrestest.URL(t)
	id := canceledOrderEvent(t, dbURL)
	f := newFlakyReceiver(t, func(n int) int {
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	env := eventEnv(dbURL, f.URL)
	if asMain {
		start(t, env, "deliver")
	} else {
		startBinary(t, bin, env, "deliver")
	}
	// The first retry comes 5 to 10 s after the 500; a worker that never
	// retries shows by then that it will not.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got := f.rc.Deliveries(); len(got) > 0 {
			if got[0].EventID != id {
				return "accepted " + got[0].EventID + ", want " + id
			}
			waitDelivered(t, dbURL, id)
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "the endpoint never accepted the event after its 500"
}

func startBinary(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func waitDeliveries(t *testing.T, f *flakyReceiver, n int, d time.Duration) []receiver.Delivery {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := f.rc.Deliveries()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries after %s, want %d", len(got), d, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDelivered waits until event id is recorded delivered.
func waitDelivered(t *testing.T, dbURL, id string) {
	t.Helper()
	num, err := order.ParseEventID(id)
	if err != nil {
		t.Fatal(err)
	}
	waitTrue(t, openPool(t, dbURL), 20*time.Second, "event "+id+" recorded delivered",
		`SELECT delivered_at IS NOT NULL AND deliver_at IS NULL FROM order_events WHERE id = $1`, num)
}
