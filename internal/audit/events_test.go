package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/delivery"
	"github.com/settlepay/settle/internal/order"
)

// findingEvent is an audit.finding event's payload as a merchant reads it
// (docs/api.md).
type findingEvent struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	MerchantID string    `json:"merchant_id"`
	CreatedAt  time.Time `json:"created_at"`
	Finding    struct {
		ID              string          `json:"id"`
		RunID           string          `json:"run_id"`
		Class           audit.Class     `json:"class"`
		Gateway         string          `json:"gateway"`
		GatewayRecordID string          `json:"gateway_record_id"`
		OrderID         string          `json:"order_id"`
		AttemptID       string          `json:"attempt_id"`
		Settle          json.RawMessage `json:"settle"`
		GatewayRecord   json.RawMessage `json:"gateway_record"`
		CreatedAt       time.Time       `json:"created_at"`
	} `json:"finding"`
}

// endpoint is a merchant's webhook endpoint that verifies each delivery
// as the Standard Webhooks libraries do, refuses each audit.finding
// event's first delivery (500), so that it is retried, and keeps the
// bodies it accepted.
type endpoint struct {
	wh       *standardwebhooks.Webhook
	mu       sync.Mutex
	refused  map[string]bool
	accepted map[string][]byte // event id → body
	findings []string          // accepted audit.finding events' ids, in order
	bad      []string
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.wh.Verify(body, r.Header); err != nil {
		e.bad = append(e.bad, err.Error())
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	id := r.Header.Get(delivery.HeaderWebhookID)
	if r.Header.Get("Settle-Event-Type") == order.EventAuditFinding {
		if !e.refused[id] {
			e.refused[id] = true
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		if _, ok := e.accepted[id]; !ok {
			e.findings = append(e.findings, id)
		}
	}
	e.accepted[id] = body
}

// TestFindingsAreSignedEvents: each finding of an audit run is one
// audit.finding event, a foreign charge's (no order) as a mismatch's; the
// delivery worker delivers each, signed, after a refused first try; the
// feed lists the same events with the same bodies; and a second run over
// an overlapping window, which finds both again, announces nothing more.
func TestFindingsAreSignedEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	refs := f.pay(t, 3)
	must(t)(f.sim.AlterAmount(refs[0], 1))
	f.sim.Foreign(990, "GBP")
	w := f.window()
	ctx := context.Background()
	a := f.auditor(t, nil)
	first, err := a.Audit(ctx, order.DefaultMerchant, "sim", w, "test")
	if err != nil {
		t.Fatal(err)
	}
	findings, err := f.store.Findings(ctx, order.DefaultMerchant, first.ID)
	if err != nil || len(findings) != 2 {
		t.Fatalf("findings %+v (%v), want the mismatch and the foreign charge", findings, err)
	}

	const secret = "whsec_c2V0dGxlLWF1ZGl0LWZpbmRpbmctc2VjcmV0" // the spec's form: base64 of 27 bytes
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	ep := &endpoint{wh: wh, refused: map[string]bool{}, accepted: map[string][]byte{}}
	hs := httptest.NewServer(ep)
	t.Cleanup(hs.Close)
	d, err := delivery.New(f.store, delivery.Config{
		Endpoints:   []delivery.Endpoint{{MerchantID: order.DefaultMerchant, URL: hs.URL, Secrets: []string{secret}}},
		BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	deliverAll := func() {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(30 * time.Millisecond) {
			if _, err := d.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			backlog, err := d.Backlog(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(backlog) == 1 && backlog[0].Pending == 0 {
				return
			}
		}
		t.Fatal("events still undelivered after 20 s")
	}
	deliverAll()

	ep.mu.Lock()
	got, bad := slices.Clone(ep.findings), slices.Clone(ep.bad)
	bodies := map[string][]byte{}
	for _, id := range got {
		bodies[id] = ep.accepted[id]
	}
	ep.mu.Unlock()
	if len(bad) != 0 {
		t.Fatalf("deliveries that did not verify: %v", bad)
	}
	if len(got) != 2 {
		t.Fatalf("audit.finding events accepted: %v, want one per finding", got)
	}
	byFinding := map[string]findingEvent{}
	for _, id := range got {
		var ev findingEvent
		if err := json.Unmarshal(bodies[id], &ev); err != nil {
			t.Fatalf("event %s: %v: %s", id, err, bodies[id])
		}
		if ev.ID != id || ev.Type != order.EventAuditFinding || ev.MerchantID != order.DefaultMerchant ||
			ev.Finding.RunID != first.ID || ev.Finding.Gateway != "sim" || ev.Finding.GatewayRecordID == "" ||
			ev.CreatedAt.IsZero() || !ev.Finding.CreatedAt.Equal(ev.CreatedAt) {
			t.Errorf("event %s: %s", id, bodies[id])
		}
		byFinding[ev.Finding.ID] = ev
	}
	for _, fd := range findings {
		ev, ok := byFinding[fd.ID]
		switch {
		case !ok:
			t.Errorf("finding %s (%s) was not announced", fd.ID, fd.Class)
		case ev.Finding.Class != fd.Class || ev.Finding.OrderID != fd.OrderID || ev.Finding.AttemptID != fd.AttemptID ||
			ev.Finding.GatewayRecordID != fd.GatewayRecordID || !jsonEqual(ev.Finding.Settle, fd.Settle) ||
			!jsonEqual(ev.Finding.GatewayRecord, fd.GatewayRecord):
			t.Errorf("finding %+v announced as %+v", fd, ev.Finding)
		}
		switch fd.Class {
		case audit.Foreign:
			if fd.OrderID != "" || string(ev.Finding.Settle) != "null" || ev.Finding.OrderID != "" {
				t.Errorf("a foreign charge's event names Settle's side: %+v", ev.Finding)
			}
		case audit.AmountMismatch:
			if fd.AttemptID != refs[0] || ev.Finding.OrderID == "" || string(ev.Finding.Settle) == "null" {
				t.Errorf("the mismatch's event lacks its order or Settle's side: %+v", ev.Finding)
			}
		default:
			t.Errorf("finding of class %s, want AMOUNT_MISMATCH or FOREIGN", fd.Class)
		}
	}

	// The feed lists the same two events, with the bodies delivered.
	listed := listFindingEvents(t, f, 2)
	for _, e := range listed {
		if !bytes.Equal(e.Payload(), bodies[e.ID()]) {
			t.Errorf("event %s listed as %s, delivered as %s", e.ID(), e.Payload(), bodies[e.ID()])
		}
		if e.Finding == nil || e.Sequence != 0 || (e.Finding.Class == string(audit.Foreign)) != (e.Order.ID == "") {
			t.Errorf("listed %+v", e)
		}
	}

	// A second run over an overlapping window finds both again, and
	// announces neither again.
	second, err := a.Audit(ctx, order.DefaultMerchant, "sim", audit.Window{From: w.From.Add(-time.Hour), To: w.To}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if n := second.Counts[audit.AmountMismatch] + second.Counts[audit.Foreign]; n != 2 {
		t.Fatalf("the second run's counts %v, want both findings again", second.Counts)
	}
	if n, err := d.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("the second run's events: %d delivered (%v), want none", n, err)
	}
	if again := listFindingEvents(t, f, 2); again[0].Num != listed[0].Num || again[1].Num != listed[1].Num {
		t.Fatalf("events after the second run: %v, want %v", again, listed)
	}
}

// listFindingEvents returns the audit.finding events of the fixture's
// merchant's feed, read page by page (of 2) from its start, once want of
// them are listed: the feed shows an event once every older transaction
// has ended, and the tests' other databases share the cluster's.
func listFindingEvents(t *testing.T, f *fixture, want int) []order.Notification {
	t.Helper()
	var out []order.Notification
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out = out[:0]
		var after order.EventCursor
		for {
			page, err := f.store.ListEvents(context.Background(), order.DefaultMerchant, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				if e.Cursor.TxID < after.TxID || e.Cursor.TxID == after.TxID && e.Num <= after.Num {
					t.Fatalf("event %s at %+v listed after the cursor %+v", e.ID(), e.Cursor, after)
				}
				after = e.Cursor
				if e.Type == order.EventAuditFinding {
					out = append(out, e)
				}
			}
			if len(page) < 2 {
				break
			}
		}
		if len(out) >= want {
			break
		}
	}
	if len(out) != want {
		t.Fatalf("%d audit.finding events listed, want %d", len(out), want)
	}
	return out
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
