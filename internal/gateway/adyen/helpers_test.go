package adyen

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// MemoryLog is an order.EventLog in memory, for this package's tests: it
// keeps each event once (by gateway and ID), in the order recorded.
type MemoryLog struct {
	mu  sync.Mutex
	evs []order.GatewayEvent
}

// Record keeps the events it has not seen, and reports how many were new.
func (l *MemoryLog) Record(evs ...order.GatewayEvent) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, e := range evs {
		for _, had := range l.evs {
			if had.Gateway == e.Gateway && had.ID == e.ID {
				continue next
			}
		}
		l.evs = append(l.evs, e)
		n++
	}
	return n
}

// GatewayEventsAbout implements order.EventLog.
func (l *MemoryLog) GatewayEventsAbout(_ context.Context, gw, reference string) ([]order.GatewayEvent, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []order.GatewayEvent
	for _, e := range l.evs {
		if e.Gateway == gw && e.AttemptID == reference {
			out = append(out, e)
		}
	}
	return out, nil
}

// seen is one request the scripted server received.
type seen struct {
	Path, Key, APIKey string
	Body              map[string]any
}

// scripted is a real HTTP server that answers each path as its test says
// and keeps every request.
type scripted struct {
	mu      sync.Mutex
	answers map[string]func(w http.ResponseWriter, body map[string]any)
	got     []seen
	srv     *httptest.Server
}

func newScripted(t *testing.T) *scripted {
	s := &scripted{answers: map[string]func(http.ResponseWriter, map[string]any){}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		s.mu.Lock()
		s.got = append(s.got, seen{Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"), APIKey: r.Header.Get("X-API-Key"), Body: body})
		answer := s.answers[r.URL.Path]
		s.mu.Unlock()
		if answer == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		answer(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// on makes the server answer path with status and body (JSON).
func (s *scripted) on(path string, status int, body any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers["/v71"+path] = func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
}

// requests returns what the server received, paths without /v71.
func (s *scripted) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]seen, len(s.got))
	for i, r := range s.got {
		r.Path = r.Path[len("/v71"):]
		out[i] = r
	}
	return out
}

const (
	testAPIKey   = "AQE-test-api-key-never-logged"
	testMerchant = "SettleGB"
	testHorizon  = time.Minute
)

// newGateway is a Gateway against base+"/v71", with log and the clock now.
func newGateway(t *testing.T, base string, log order.EventLog, now func() time.Time, mod ...func(*Config)) *Gateway {
	t.Helper()
	cfg := Config{BaseURL: base + "/v71", APIKey: testAPIKey, MerchantAccount: testMerchant, HMACKeys: []string{sampleKey},
		Timeout: 2 * time.Second, Events: log, NoShowHorizon: testHorizon, Now: now}
	for _, m := range mod {
		m(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// chargeRequest is a request of a new attempt, made at created.
func chargeRequest(created time.Time) order.ChargeRequest {
	return order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), MerchantReference: "m-1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "8415718415718415", CreatedAt: created,
		CustomerPresent: true, ReturnURL: "https://shop.example/return"}
}
