package order

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Notification is an event a merchant is told of: a row of an order's or a
// refund's history that has a type (the database derives it from the row,
// see migration 00008's settle_event_type and 00014's
// settle_refund_event_type), with the order or the refund as that
// transition left it. It is written in the same statement as the
// transition, so there is one for every transition that happened and none
// for any other. A finding of the gateway audit is an event too
// (audit.finding, migration 00030), written with the finding, once.
type Notification struct {
	// Num is the history row's number; ID is the event's id built from it.
	Num int64
	// Type is order.paid, order.payment_failed, order.needs_review, …,
	// refund.succeeded, refund.failed, refund.needs_review.
	Type       string
	MerchantID string
	// Sequence is the row's place in its order's history, its refunds'
	// rows counted in (1 is the order's creation): of two events of one
	// order, the later has the greater Sequence.
	Sequence int64
	// CreatedAt is when the transition committed (database time).
	CreatedAt time.Time
	// Order is the order as the transition left it: its state is the one
	// the transition reached. For a refund's event only its ID, merchant
	// reference, amount, gateway and creation are set.
	Order Order
	// Refund is, for a refund's event, the refund as the transition left
	// it (its state is the one reached); nil for an order's event.
	Refund *Refund
	// Finding is, for an audit.finding event, the finding it announces;
	// nil for every other event. Such an event is no transition of an
	// order: only Order's ID (the finding's order, "" for none) and
	// merchant are set, and Sequence is 0.
	Finding *AuditFinding
	// Actor made the transition. For a refund's event, Refund.Actor asked
	// for the refund.
	Actor Actor
	// GatewayChargeID and DeclineCode are the attempt's, when the
	// transition settled one.
	GatewayChargeID string
	DeclineCode     string
	// Cursor is the position of the event in its merchant's feed.
	Cursor EventCursor
	// Attempts counts deliveries tried, this one included.
	Attempts int
}

// EventAuditFinding is the type of the event of an audit finding.
const EventAuditFinding = "audit.finding"

// AuditFinding is a discrepancy the gateway audit found, as its event
// carries it: both sides are the JSON the audit stored (null for a side
// it has none of, as the gateway's side of a charge the gateway does not
// list).
type AuditFinding struct {
	ID    string
	RunID string
	// Class is the finding's class (DUPLICATE, FOREIGN, …: audit.Class).
	Class           string
	Gateway         string
	GatewayRecordID string
	// OrderID and AttemptID are empty when the finding names none (a
	// charge made outside Settle).
	OrderID, AttemptID    string
	Settle, GatewayRecord json.RawMessage
}

// ID is the event's stable id: the same at every delivery and in ListEvents.
func (n Notification) ID() string { return EventID(n.Num) }

// EventID is the id of the event of history row num.
func EventID(num int64) string { return "evt_" + strconv.FormatInt(num, 10) }

// ParseEventID returns the history row number of an event id.
func ParseEventID(id string) (int64, error) {
	s, ok := strings.CutPrefix(id, "evt_")
	n, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || n <= 0 {
		return 0, &ValidationError{Field: "event_id", Reason: "is not an event id (evt_ and a number)"}
	}
	return n, nil
}

// EventCursor is a position in a merchant's feed of events: the
// transaction that wrote an event and its number. The zero cursor is the
// feed's start.
type EventCursor struct {
	TxID uint64
	Num  int64
}

// money is an amount as payloads show it.
type money struct {
	Currency    string `json:"currency"`
	AmountMinor int64  `json:"amount_minor"`
}

// Payload is the JSON body of the event, as POSTed to the merchant and
// returned by ListEvents; docs/api.md documents it. actor is the
// kind of who made the transition (Actor.Kind); a refund's requested_by is
// the kind of who asked for it, whose reason and request id the refund
// carries: an operator's, when an operator refunded.
func (n Notification) Payload() []byte {
	if n.Refund != nil {
		return n.refundPayload()
	}
	if n.Finding != nil {
		return n.findingPayload()
	}
	type orderJSON struct {
		ID                string    `json:"id"`
		MerchantReference string    `json:"merchant_reference"`
		Amount            money     `json:"amount"`
		Gateway           string    `json:"gateway"`
		State             State     `json:"state"`
		AttemptID         string    `json:"attempt_id"`
		GatewayChargeID   string    `json:"gateway_charge_id"`
		DeclineCode       string    `json:"decline_code"`
		CreatedAt         time.Time `json:"created_at"`
	}
	body := struct {
		ID         string    `json:"id"`
		Type       string    `json:"type"`
		MerchantID string    `json:"merchant_id"`
		Sequence   int64     `json:"sequence"`
		CreatedAt  time.Time `json:"created_at"`
		Actor      string    `json:"actor"`
		Order      orderJSON `json:"order"`
	}{
		ID: n.ID(), Type: n.Type, MerchantID: n.MerchantID, Sequence: n.Sequence, CreatedAt: n.CreatedAt.UTC(),
		Actor: n.Actor.Kind(),
		Order: orderJSON{
			ID: n.Order.ID, MerchantReference: n.Order.MerchantReference,
			Amount:  money{Currency: n.Order.Amount.Currency, AmountMinor: n.Order.Amount.AmountMinor},
			Gateway: n.Order.Gateway, State: n.Order.State, AttemptID: n.Order.CurrentAttempt,
			GatewayChargeID: n.GatewayChargeID, DeclineCode: n.DeclineCode, CreatedAt: n.Order.CreatedAt.UTC(),
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		// Every field is a string, a number or a time: Marshal cannot fail.
		panic(fmt.Sprintf("order: marshal event %d: %v", n.Num, err))
	}
	return b
}

// refundPayload is Payload for a refund's event: the refund as it stands,
// with its order's id.
func (n Notification) refundPayload() []byte {
	type refundJSON struct {
		ID              string      `json:"id"`
		OrderID         string      `json:"order_id"`
		RequestID       string      `json:"request_id"`
		Amount          money       `json:"amount"`
		Reason          string      `json:"reason"`
		RequestedBy     string      `json:"requested_by"`
		State           RefundState `json:"state"`
		Outcome         Outcome     `json:"outcome"`
		DeclineCode     string      `json:"decline_code"`
		GatewayRefundID string      `json:"gateway_refund_id"`
		CreatedAt       time.Time   `json:"created_at"`
	}
	rf := n.Refund
	body := struct {
		ID         string     `json:"id"`
		Type       string     `json:"type"`
		MerchantID string     `json:"merchant_id"`
		Sequence   int64      `json:"sequence"`
		CreatedAt  time.Time  `json:"created_at"`
		Actor      string     `json:"actor"`
		Refund     refundJSON `json:"refund"`
	}{
		ID: n.ID(), Type: n.Type, MerchantID: n.MerchantID, Sequence: n.Sequence, CreatedAt: n.CreatedAt.UTC(),
		Actor: n.Actor.Kind(),
		Refund: refundJSON{
			ID: rf.ID, OrderID: rf.OrderID, RequestID: rf.RequestID,
			Amount: money{Currency: rf.Amount.Currency, AmountMinor: rf.Amount.AmountMinor}, Reason: rf.Reason,
			RequestedBy: rf.Actor.Kind(), State: rf.State, Outcome: rf.Outcome, DeclineCode: rf.DeclineCode, GatewayRefundID: rf.GatewayRefundID,
			CreatedAt: rf.CreatedAt.UTC(),
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		// Every field is a string, a number or a time: Marshal cannot fail.
		panic(fmt.Sprintf("order: marshal event %d: %v", n.Num, err))
	}
	return b
}

// findingPayload is Payload for an audit finding's event: the finding,
// its two sides as the audit stored them.
func (n Notification) findingPayload() []byte {
	type findingJSON struct {
		ID              string          `json:"id"`
		RunID           string          `json:"run_id"`
		Class           string          `json:"class"`
		Gateway         string          `json:"gateway"`
		GatewayRecordID string          `json:"gateway_record_id"`
		OrderID         string          `json:"order_id"`
		AttemptID       string          `json:"attempt_id"`
		Settle          json.RawMessage `json:"settle"`
		GatewayRecord   json.RawMessage `json:"gateway_record"`
		CreatedAt       time.Time       `json:"created_at"`
	}
	f := n.Finding
	body := struct {
		ID         string      `json:"id"`
		Type       string      `json:"type"`
		MerchantID string      `json:"merchant_id"`
		CreatedAt  time.Time   `json:"created_at"`
		Finding    findingJSON `json:"finding"`
	}{
		ID: n.ID(), Type: n.Type, MerchantID: n.MerchantID, CreatedAt: n.CreatedAt.UTC(),
		Finding: findingJSON{
			ID: f.ID, RunID: f.RunID, Class: f.Class, Gateway: f.Gateway, GatewayRecordID: f.GatewayRecordID,
			OrderID: f.OrderID, AttemptID: f.AttemptID, Settle: rawOrNull(f.Settle),
			GatewayRecord: rawOrNull(f.GatewayRecord), CreatedAt: n.CreatedAt.UTC(),
		},
	}
	b, err := json.Marshal(body)
	if err != nil {
		// The sides are JSON the database stored; anything else is a bug.
		panic(fmt.Sprintf("order: marshal event %d: %v", n.Num, err))
	}
	return b
}

// rawOrNull is b, or JSON null when b is empty.
func rawOrNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// DeliveryOutcome is what became of one delivery of an event.
type DeliveryOutcome string

// The outcomes of a delivery.
const (
	// DeliveryDelivered: the endpoint answered 2xx.
	DeliveryDelivered DeliveryOutcome = "delivered"
	// DeliveryRetry: no answer, or an answer other than 2xx; the event is
	// tried again after its backoff, or fails when its retries ran out.
	DeliveryRetry DeliveryOutcome = "retry"
	// DeliveryUntried: not sent, because the endpoint had just failed
	// another event; put back without counting an attempt.
	DeliveryUntried DeliveryOutcome = "untried"
)

// Delivery is the result of one leased event's delivery.
type Delivery struct {
	MerchantID string
	Num        int64
	Outcome    DeliveryOutcome
	// Status is the endpoint's HTTP status, 0 for no answer.
	Status int
	// Backoff is the wait before the next try (retry, untried).
	Backoff time.Duration
	// Attempt is the try's number (the event's Attempts); Error says, in
	// Settle's words, why a retried try failed (never the endpoint's body
	// or URL).
	Attempt int
	Error   string
}

// DeliveryRecord is what recording a delivery made of its event.
type DeliveryRecord struct {
	MerchantID string
	Num        int64
	Outcome    DeliveryOutcome
	// Failed: the event's retries ran out; it is delivered no more
	// unless an operator resends it.
	Failed bool
	// Latency is the time from the transition's commit to the recording.
	Latency time.Duration
}

// DeliveryBacklog is one merchant's undelivered events.
type DeliveryBacklog struct {
	MerchantID string
	Pending    int64
	// Oldest is the age of the oldest undelivered event (0 with none).
	Oldest time.Duration
}

// EventDelivery is an event out of an order and where its delivery to
// the merchant's webhook stands.
type EventDelivery struct {
	Num        int64
	Type       string
	CreatedAt  time.Time
	Attempts   int
	LastStatus int
	// DeliveredAt, FailedAt and NextTry are zero when not set.
	DeliveredAt, FailedAt, NextTry time.Time
	// FailedTries are the tries that failed, oldest first.
	FailedTries []DeliveryTry
}

// DeliveryTry is one failed try of an event's delivery.
type DeliveryTry struct {
	At      time.Time
	Attempt int
	// Status is the endpoint's HTTP status, 0 for no answer.
	Status int
	Error  string
}
