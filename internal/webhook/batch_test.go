package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/webhook"
)

// batchItem is one event of a batchReceiver's request: a gateway that
// signs each event of a batch apart, as Adyen signs each notification.
type batchItem struct {
	ID, Ref, Sig string
}

// batchReceiver reads a JSON list of batchItems, each signed "good".
type batchReceiver struct{}

func (batchReceiver) ReceiveEvents(body []byte, _ map[string][]string) ([]order.GatewayEvent, error) {
	var items []batchItem
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	evs := make([]order.GatewayEvent, len(items))
	for i, it := range items {
		if it.Sig != "good" {
			return nil, fmt.Errorf("batch: item %d: %w", i, order.ErrEventSignature)
		}
		evs[i] = order.GatewayEvent{ID: it.ID, Type: "AUTHORISATION", ObjectID: "psp_" + it.ID, AttemptID: it.Ref,
			Outcome: order.OutcomeSucceeded, Succeeded: true}
	}
	return evs, nil
}

// ackReceiver is a batchReceiver whose gateway wants "[accepted]".
type ackReceiver struct{ batchReceiver }

func (ackReceiver) Acknowledge() (string, []byte) { return "text/plain", []byte("[accepted]") }

// batchAnswer is what the listener answered a batch.
type batchAnswer struct {
	code        int
	contentType string
	closed      bool
	body        string
}

// batchHooks serves the receivers at /webhooks/batch and /webhooks/ack on
// f's store, and returns a post to either and what OnEvent was told.
func batchHooks(t *testing.T, f *fixture) (post func(path string, items ...batchItem) batchAnswer, told func() []string) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	hooks := httptest.NewServer(webhook.New(f.store, webhook.Config{
		Gateways: map[string]order.EventReceiver{"batch": batchReceiver{}, "ack": ackReceiver{}},
		OnEvent: func(gateway, eventType, result string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, gateway+" "+eventType+" "+result)
		},
	}, f.logs.Logger()))
	t.Cleanup(hooks.Close)
	post = func(path string, items ...batchItem) batchAnswer {
		t.Helper()
		body, err := json.Marshal(items)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(hooks.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return batchAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Close, string(b)}
	}
	told = func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	return post, told
}

// TestBatchRecordedThenAcknowledged: every event of a batch is recorded,
// each once, before the answer, which is the gateway's own
// acknowledgement when it wants one (else the results in JSON); OnEvent is
// told of each event; a batch sent again records nothing twice, and one
// with nothing to record is acknowledged all the same.
func TestBatchRecordedThenAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	_, a := f.charging(t, "batch-1", "tok_slow_60000")
	post, told := batchHooks(t, f)
	batch := []batchItem{{"n1", a.ID, "good"}, {"n2", "not-ours", "good"}, {"n1", a.ID, "good"}, {"n3", a.ID, "good"}}

	ans := post("/webhooks/ack", batch...)
	if ans.code != 200 || ans.body != "[accepted]" || ans.contentType != "text/plain" {
		t.Fatalf("batch: %d %q (%s), want 200 [accepted] text/plain", ans.code, ans.body, ans.contentType)
	}
	if n := f.count(t, "gateway_events WHERE gateway = 'ack'"); n != 3 {
		t.Errorf("%d events recorded, want 3 (n1 once)", n)
	}
	want := []string{"ack AUTHORISATION woken", "ack AUTHORISATION unknown_object", "ack AUTHORISATION duplicate",
		"ack AUTHORISATION woken"}
	if got := told(); !slices.Equal(got, want) {
		t.Errorf("OnEvent told %q, want %q", got, want)
	}

	ans = post("/webhooks/ack", batch...)
	if ans.code != 200 || ans.body != "[accepted]" {
		t.Fatalf("the batch again: %d %q, want 200 [accepted]", ans.code, ans.body)
	}
	if n := f.count(t, "gateway_events WHERE gateway = 'ack'"); n != 3 {
		t.Errorf("%d events recorded after the batch came again, want 3", n)
	}
	evs, err := f.store.GatewayEventsAbout(context.Background(), "ack", a.ID)
	if err != nil || len(evs) != 2 || evs[0].ID != "n1" || evs[1].ID != "n3" {
		t.Errorf("the attempt's events: %+v, %v; want n1, n3", evs, err)
	}

	// A gateway that wants no answer of its own is told each result.
	ans = post("/webhooks/batch", batchItem{"m1", a.ID, "good"}, batchItem{"m2", "not-ours", "good"})
	if ans.code != 200 || ans.body != `{"results":["woken","unknown_object"]}`+"\n" {
		t.Errorf("batch without an acknowledgement: %d %q", ans.code, ans.body)
	}

	// A verified request with nothing Settle uses is acknowledged too, so
	// that the gateway does not send it again.
	if ans := post("/webhooks/ack"); ans.code != 200 || ans.body != "[accepted]" {
		t.Errorf("an empty batch: %d %q, want 200 [accepted]", ans.code, ans.body)
	}
	if ans := post("/webhooks/batch"); ans.code != 200 || ans.body != `{"result":"ignored_type"}`+"\n" {
		t.Errorf("an empty batch without an acknowledgement: %d %q, want 200 ignored_type", ans.code, ans.body)
	}
}

// TestBatchBadSignatureStoresNothing: one event of a batch that is not
// verified refuses the whole request, 400 on a closed connection, and
// nothing of it is stored, not even the verified events before it.
func TestBatchBadSignatureStoresNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	_, a := f.charging(t, "batch-2", "tok_slow_60000")
	post, told := batchHooks(t, f)
	ans := post("/webhooks/ack", batchItem{"n1", a.ID, "good"}, batchItem{"n2", a.ID, "forged"},
		batchItem{"n3", a.ID, "good"})
	if ans.code != 400 || !ans.closed || ans.body != `{"result":"bad_signature"}`+"\n" {
		t.Fatalf("a batch with a forged event: %d %q (closed %v), want 400 bad_signature, closed", ans.code, ans.body, ans.closed)
	}
	if n := f.count(t, "gateway_events"); n != 0 {
		t.Errorf("%d events stored from a refused batch, want 0", n)
	}
	if got := told(); !slices.Equal(got, []string{"ack  bad_signature"}) {
		t.Errorf("OnEvent told %q", got)
	}
}

// TestBatchStoreFailureMidway: when an event of a batch cannot be
// recorded, the answer is 503, so that the gateway sends the batch again;
// the events before it stay recorded, and the batch sent again records the
// rest, each once, and is acknowledged.
func TestBatchStoreFailureMidway(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	ctx := context.Background()
	_, a := f.charging(t, "batch-3", "tok_slow_60000")
	post, told := batchHooks(t, f)
	// The database refuses the second event, as a full disk or a lost
	// connection would.
	if _, err := f.pool.Exec(ctx, "ALTER TABLE gateway_events ADD CONSTRAINT refuse_n2 CHECK (event_id <> 'n2')"); err != nil {
		t.Fatal(err)
	}
	batch := []batchItem{{"n1", a.ID, "good"}, {"n2", a.ID, "good"}, {"n3", a.ID, "good"}}
	ans := post("/webhooks/ack", batch...)
	if ans.code != 503 || ans.body == "[accepted]" {
		t.Fatalf("a batch whose second event is not recorded: %d %q, want 503", ans.code, ans.body)
	}
	if n := f.count(t, "gateway_events"); n != 1 {
		t.Errorf("%d events recorded, want 1 (n1)", n)
	}
	if got, want := told(), []string{"ack AUTHORISATION woken", "ack AUTHORISATION error"}; !slices.Equal(got, want) {
		t.Errorf("OnEvent told %q, want %q", got, want)
	}

	if _, err := f.pool.Exec(ctx, "ALTER TABLE gateway_events DROP CONSTRAINT refuse_n2"); err != nil {
		t.Fatal(err)
	}
	ans = post("/webhooks/ack", batch...)
	if ans.code != 200 || ans.body != "[accepted]" {
		t.Fatalf("the batch again: %d %q, want 200 [accepted]", ans.code, ans.body)
	}
	if got, want := told(), []string{"ack AUTHORISATION duplicate", "ack AUTHORISATION woken",
		"ack AUTHORISATION woken"}; !slices.Equal(got, want) {
		t.Errorf("OnEvent told %q, want %q", got, want)
	}
	evs, err := f.store.GatewayEventsAbout(ctx, "ack", a.ID)
	if err != nil || len(evs) != 3 || evs[0].ID != "n1" || evs[1].ID != "n2" || evs[2].ID != "n3" {
		t.Errorf("the attempt's events: %+v, %v; want n1, n2, n3 once each", evs, err)
	}
}
