package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Dispute is Settle's record of one dispute of an order's charge: what the
// gateway last said of it that moved it forward (DisputeRank).
type Dispute struct {
	ID         string
	MerchantID string
	OrderID    string
	// AttemptID is the attempt whose charge is disputed, "" if unknown.
	AttemptID        string
	Gateway          string
	GatewayDisputeID string
	Amount           Money
	Reason           string
	// NetworkReasonCode is the card network's code, "" if unknown.
	NetworkReasonCode string
	Status            DisputeStatus
	Stage             DisputeStage
	// DueBy is the deadline of the merchant's evidence; zero if none.
	DueBy                      time.Time
	Withdrawn, Reinstated, Fee int64
	CreatedAt, UpdatedAt       time.Time
}

// ChargedBack is what the dispute took from the merchant and kept: what
// was withdrawn less what was reinstated, while the dispute is open or
// once it is lost; a dispute won or closed as a warning keeps nothing.
func (d Dispute) ChargedBack() int64 {
	if d.Status != DisputeLost && !d.Status.Open() {
		return 0
	}
	return max(d.Withdrawn-d.Reinstated, 0)
}

// The names of a dispute's history rows.
const (
	DisputeOpened  = "opened"
	DisputeUpdated = "updated"
	DisputeClosed  = "closed"
	// DisputeAccept: an operator conceded the dispute at the gateway.
	DisputeAccept = "accept"
)

// DisputeEvent is one row of a dispute's history.
type DisputeEvent struct {
	Seq       int64
	DisputeID string
	// From and FromStage are empty for the row that created the dispute.
	From, To              DisputeStatus
	FromStage, ToStage    DisputeStage
	Withdrawn, Reinstated int64
	Name                  string
	Actor                 Actor
	// GatewayEventID is the gateway's event that brought the change, ""
	// for an operator's call.
	GatewayEventID string
	CreatedAt      time.Time
}

// DisputeChange asks the store to apply what a gateway said of a dispute.
type DisputeChange struct {
	// Event is the verified gateway event that brought it (recorded once,
	// as every gateway event: a repeat is EventDuplicate and changes
	// nothing), or the zero value for an operator's call.
	Event GatewayEvent
	// MerchantID names the dispute's merchant for an operator's call; an
	// event finds it from the attempt or charge it names.
	MerchantID string
	// Dispute is what the gateway says: the event's word, or the read
	// that the event triggered.
	Dispute GatewayDispute
	Actor   Actor
	// Name, when set, is the history row's name whether or not the dispute
	// moved (DisputeAccept); otherwise a row is written only when it moved.
	Name string
}

// DisputeApplied is what applying a dispute change came to.
type DisputeApplied struct {
	// Result is EventDispute (the dispute moved, or was created),
	// EventDisputeStale (it was already at or past what the change says:
	// nothing changed), EventDuplicate or EventUnknownObject.
	Result GatewayEventResult
	// Dispute is the dispute as it stands after, nil when the change
	// matched nothing.
	Dispute *Dispute
}

// The results of a dispute change.
const (
	// EventDispute: the dispute was created or moved forward.
	EventDispute GatewayEventResult = "dispute"
	// EventDisputeStale: the dispute was already at or past what the
	// event says (a repeat under another id, or out of order): nothing
	// changed.
	EventDisputeStale GatewayEventResult = "dispute_stale"
)

// DisputeFilter selects disputes for ListDisputes.
type DisputeFilter struct {
	// Status selects one status; empty selects all.
	Status DisputeStatus
	// DueBefore, when not zero, selects disputes due before it.
	DueBefore time.Time
	// Limit bounds the page; AfterID continues after a page's last id.
	Limit   int
	AfterID string
}

// DisputeStore is what disputes need of storage, beside Store.
type DisputeStore interface {
	// ApplyDispute records c's event once and applies c's dispute, in one
	// transaction holding the order's row lock: the dispute is created,
	// or moved only to a higher DisputeRank (or, at its rank, to more
	// withdrawn, reinstated or fee), with a history row, the order's
	// dispute totals and an event out (dispute.opened, dispute.updated,
	// dispute.closed).
	ApplyDispute(ctx context.Context, c DisputeChange) (DisputeApplied, error)
	// Dispute returns a dispute within scope and its history.
	Dispute(ctx context.Context, scope Scope, id string) (Dispute, []DisputeEvent, error)
	// Disputes lists disputes within scope, the nearest due first.
	Disputes(ctx context.Context, scope Scope, f DisputeFilter) ([]Dispute, error)
	// OrderDisputes returns a merchant's order's disputes, oldest first.
	OrderDisputes(ctx context.Context, merchantID, orderID string) ([]Dispute, error)
	// RecordGatewayEvent records an event that is not about a dispute
	// (postgres.Store's, which the webhook listener otherwise calls).
	RecordGatewayEvent(ctx context.Context, ev GatewayEvent) (RecordedEvent, error)
}

// DisputeCounts is what the metrics read of disputes.
type DisputeCounts struct {
	// ByStatus counts every merchant's disputes by status.
	ByStatus map[DisputeStatus]int64
	// DueSoon counts the disputes that wait on the merchant's response
	// (NEEDS_RESPONSE) whose due_by is within the window asked for.
	DueSoon int64
}

// DisputeDueWithin is the window of DisputeCounts.DueSoon that the metrics
// export: an open dispute due within it with no response is alerted on.
const DisputeDueWithin = 72 * time.Hour

// DisputeStatuses lists every dispute status, in the order the API
// numbers them.
var DisputeStatuses = []DisputeStatus{DisputeNeedsResponse, DisputeUnderReview, DisputeWon, DisputeLost,
	DisputeWarningClosed}

// DisputeOpenError refuses a refund of an order while one of its disputes
// is open: the money may be going back through the network already, and a
// refund on top of it would pay the customer twice.
type DisputeOpenError struct {
	DisputeID string
}

func (e *DisputeOpenError) Error() string {
	return fmt.Sprintf("the order has an open dispute %s: refunds wait until it is closed", e.DisputeID)
}

// DisputeUnsupportedError refuses to accept a dispute at a gateway that
// cannot be asked to.
type DisputeUnsupportedError struct {
	Gateway string
}

func (e *DisputeUnsupportedError) Error() string {
	return fmt.Sprintf("gateway %q cannot accept a dispute through its API; accept it in the gateway's dashboard", e.Gateway)
}

// The errors of disputes.
var (
	// ErrDisputesUnsupported: the store keeps no disputes.
	ErrDisputesUnsupported = errors.New("disputes: this server's store keeps no disputes")
	// ErrDisputeNotFound: no dispute of that id within the scope.
	ErrDisputeNotFound = errors.New("dispute not found")
	// ErrDisputeOutcomeUnknown: the gateway did not answer a call about a
	// dispute (a read or an accept); the dispute was left as it was.
	ErrDisputeOutcomeUnknown = errors.New("the gateway did not answer about the dispute")
)

// RecordGatewayEvent records a verified gateway event. An event about a
// dispute is applied to the dispute (ReceiveDispute); any other is the
// store's to record, as the webhook listener does without a Service.
func (s *Service) RecordGatewayEvent(ctx context.Context, ev GatewayEvent) (RecordedEvent, error) {
	if s.disputes == nil {
		return RecordedEvent{}, ErrDisputesUnsupported
	}
	if ev.Dispute == nil {
		return s.disputes.RecordGatewayEvent(ctx, ev)
	}
	a, err := s.ReceiveDispute(ctx, ev)
	if err != nil {
		return RecordedEvent{}, err
	}
	rec := RecordedEvent{Result: a.Result}
	if a.Dispute != nil {
		rec.OrderID, rec.AttemptID = a.Dispute.OrderID, a.Dispute.AttemptID
	}
	return rec, nil
}

// ReceiveDispute applies a verified gateway event about a dispute. For a
// DisputeGateway the event only names the dispute: it is read, outside any
// transaction, and the read is applied. Any other gateway's event is its
// word. Either way the store moves the dispute only forward, so events
// repeated, out of order or lost converge on the gateway's last word.
func (s *Service) ReceiveDispute(ctx context.Context, ev GatewayEvent) (DisputeApplied, error) {
	if s.disputes == nil {
		return DisputeApplied{}, ErrDisputesUnsupported
	}
	if ev.Dispute == nil || ev.Dispute.ID == "" {
		return DisputeApplied{}, &ValidationError{Field: "dispute", Reason: "the event names no dispute"}
	}
	d := *ev.Dispute
	if dg, ok := s.gateways[ev.Gateway].(DisputeGateway); ok {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.GatewayTimeout)
		read, err := dg.GetDispute(rctx, d.ID)
		cancel()
		if err != nil {
			// The gateway delivers the event again on an error.
			return DisputeApplied{}, fmt.Errorf("%w: read dispute %s at %s: %w", ErrDisputeOutcomeUnknown, d.ID, ev.Gateway, err)
		}
		d = read
	}
	if DisputeRank(d.Stage, d.Status) == 0 {
		return DisputeApplied{}, &ValidationError{Field: "dispute",
			Reason: fmt.Sprintf("unknown stage %q or status %q", d.Stage, d.Status)}
	}
	return s.disputes.ApplyDispute(ctx, DisputeChange{Event: ev, Dispute: d, Actor: ActorGateway})
}

// ActorGateway is a gateway's word (an event, or the read it triggered).
const ActorGateway Actor = "gateway"

// Dispute returns a dispute within scope and its history.
func (s *Service) Dispute(ctx context.Context, scope Scope, id string) (Dispute, []DisputeEvent, error) {
	if err := CheckID("dispute_id", id); err != nil {
		return Dispute{}, nil, err
	}
	if s.disputes == nil {
		return Dispute{}, nil, ErrDisputesUnsupported
	}
	d, evs, err := s.disputes.Dispute(ctx, scope, id)
	if errors.Is(err, ErrNotFound) {
		return Dispute{}, nil, fmt.Errorf("dispute %s: %w", id, ErrDisputeNotFound)
	}
	return d, evs, err
}

// Disputes lists the disputes within scope that f selects.
func (s *Service) Disputes(ctx context.Context, scope Scope, f DisputeFilter) ([]Dispute, error) {
	if s.disputes == nil {
		return nil, ErrDisputesUnsupported
	}
	if f.Status != "" && DisputeRank(DisputeChargeback, f.Status) == 0 {
		return nil, &ValidationError{Field: "status", Reason: "is not a dispute status"}
	}
	if f.AfterID != "" {
		if err := CheckID("page_token", f.AfterID); err != nil {
			return nil, err
		}
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	return s.disputes.Disputes(ctx, scope, f)
}

// AcceptDispute concedes a dispute at its gateway (it closes as LOST) and
// applies what the gateway answers, recording actor in the dispute's
// history. A gateway that cannot accept disputes through its API is a
// *DisputeUnsupportedError. When the call's outcome is unknown the
// dispute is left as it is and the error wraps ErrDisputeOutcomeUnknown: accepting
// twice is not an error at the gateway, so the call may be repeated, and
// the gateway's next event (or read) settles it either way.
func (s *Service) AcceptDispute(ctx context.Context, scope Scope, actor Actor, id string) (Dispute, error) {
	d, _, err := s.Dispute(ctx, scope, id)
	if err != nil {
		return Dispute{}, err
	}
	dg, ok := s.gateways[d.Gateway].(DisputeGateway)
	if !ok {
		return Dispute{}, &DisputeUnsupportedError{Gateway: d.Gateway}
	}
	if !d.Status.Open() {
		return d, nil
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, s.cfg.GatewayTimeout)
	got, err := dg.AcceptDispute(cctx, d.GatewayDisputeID)
	cancel()
	outcome := OutcomeSucceeded
	if err != nil {
		outcome = OutcomeUnknown
	}
	GatewayCall{Op: "accept_dispute", Gateway: d.Gateway, OrderID: d.OrderID, AttemptID: d.ID, Outcome: outcome,
		Latency: time.Since(start), Err: err}.Log(ctx, s.log)
	if err != nil {
		return Dispute{}, fmt.Errorf("%w: accept dispute %s at %s: %w", ErrDisputeOutcomeUnknown, d.ID, d.Gateway, err)
	}
	if got.ID == "" {
		got.ID = d.GatewayDisputeID
	}
	a, err := s.disputes.ApplyDispute(ctx, DisputeChange{MerchantID: d.MerchantID, Dispute: got, Actor: actor,
		Name: DisputeAccept, Event: GatewayEvent{Gateway: d.Gateway}})
	if err != nil {
		return Dispute{}, err
	}
	if a.Dispute == nil {
		return d, nil
	}
	return *a.Dispute, nil
}

// openDispute is the refusal of a refund of o, whose locked row counted an
// open dispute: it names the dispute (the oldest still open), read after
// the claim. Should the dispute have closed meanwhile, the refusal stands,
// and a retry of the refund is admitted.
func (s *Service) openDispute(ctx context.Context, o Order) error {
	if s.disputes != nil {
		ds, err := s.disputes.OrderDisputes(ctx, o.MerchantID, o.ID)
		if err != nil {
			return fmt.Errorf("read disputes of order %s: %w", o.ID, err)
		}
		for _, d := range ds {
			if d.Status.Open() {
				return &DisputeOpenError{DisputeID: d.ID}
			}
		}
	}
	return &DisputeOpenError{DisputeID: "(closed since)"}
}
