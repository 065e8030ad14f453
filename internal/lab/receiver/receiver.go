// Package receiver is a merchant's webhook endpoint for the lab and for
// settle dev: it verifies each delivery's signature, keeps what it
// received, and answers 200 (or what its test asks).
package receiver

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/delivery"
)

// Delivery is one POST received. State is the order's state, or for a
// refund's event (RefundID set) the refund's; an audit finding's event
// (FindingID set) has none, and OrderID is the order the finding names,
// if any.
type Delivery struct {
	EventID   string          `json:"event_id"`
	Type      string          `json:"type"`
	OrderID   string          `json:"order_id"`
	RefundID  string          `json:"refund_id,omitempty"`
	FindingID string          `json:"finding_id,omitempty"`
	State     string          `json:"state"`
	Verified  bool            `json:"verified"`
	At        time.Time       `json:"received_at"`
	Payload   json.RawMessage `json:"payload"`
}

// Receiver records deliveries; it is an http.Handler: POST delivers, GET
// lists what was received (the last 1000, newest last).
type Receiver struct {
	secrets []string
	// OnDelivery, when set, is told of each delivery as it arrives.
	onDelivery func(Delivery)
	mu         sync.Mutex
	all        []Delivery
}

// New returns a receiver verifying with secrets; onDelivery may be nil.
func New(secrets []string, onDelivery func(Delivery)) *Receiver {
	return &Receiver{secrets: secrets, onDelivery: onDelivery}
}

// ServeHTTP implements http.Handler.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		rc.mu.Lock()
		list := rc.all[max(0, len(rc.all)-1000):]
		b, _ := json.MarshalIndent(list, "", "  ")
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(b, '\n'))
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST a delivery or GET the list", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var ev struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Order struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"order"`
		Refund *struct {
			ID      string `json:"id"`
			OrderID string `json:"order_id"`
			State   string `json:"state"`
		} `json:"refund"`
		Finding *struct {
			ID      string `json:"id"`
			OrderID string `json:"order_id"`
		} `json:"finding"`
	}
	_ = json.Unmarshal(body, &ev)
	d := Delivery{EventID: ev.ID, Type: ev.Type, OrderID: ev.Order.ID, State: ev.Order.State, At: time.Now(),
		Verified: delivery.Verify(r.Header.Get(delivery.SignatureHeader), body, rc.secrets, 5*time.Minute) == nil}
	if ev.Refund != nil {
		d.OrderID, d.RefundID, d.State = ev.Refund.OrderID, ev.Refund.ID, ev.Refund.State
	}
	if ev.Finding != nil {
		d.OrderID, d.FindingID = ev.Finding.OrderID, ev.Finding.ID
	}
	if json.Valid(body) {
		d.Payload = body
	}
	rc.mu.Lock()
	rc.all = append(rc.all, d)
	rc.mu.Unlock()
	if rc.onDelivery != nil {
		rc.onDelivery(d)
	}
	if !d.Verified {
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Deliveries returns every delivery received, oldest first.
func (rc *Receiver) Deliveries() []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Delivery(nil), rc.all...)
}
