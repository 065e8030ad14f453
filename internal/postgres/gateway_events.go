package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// recordGatewayEventSQL records an event once and does what it triggers;
// its comments say what each result means.
//
//go:embed sql/record_gateway_event.sql
var recordGatewayEventSQL string

// RecordGatewayEvent records a verified gateway event once, with what it
// says (order.EventLog reads it back), in the same transaction (one
// statement) as what it triggers: the attempt's order, or the capture, void
// or refund it is about, made due now; or a review item raised (a possible
// double charge, or a failure of the operation that paid the order). A
// repeat of an event records and triggers nothing (order.EventDuplicate).
// When the statement returns, it has committed.
func (s *Store) RecordGatewayEvent(ctx context.Context, ev order.GatewayEvent) (order.RecordedEvent, error) {
	// A reference that is not a UUID names nothing of ours; the
	// statement's cast would refuse it. It is stored as given all the same.
	var refID *string
	if _, err := uuid.Parse(ev.AttemptID); err == nil {
		refID = &ev.AttemptID
	}
	var occurredAt *time.Time
	if !ev.OccurredAt.IsZero() {
		occurredAt = &ev.OccurredAt
	}
	e, err := s.engine(ctx)
	if err != nil {
		return order.RecordedEvent{}, err
	}
	sql := e.statements().recordGatewayEvent
	var r recordedRow
	err = retry(ctx, func() error {
		// The merchant first, then everything on its shard. An event
		// about nothing of ours is recorded under merchant "".
		a, err := queryOne[eventAttemptRow](ctx, s.pool, gatewayEventAttemptSQL, pgx.StrictNamedArgs{
			"about": string(ev.About), "attempt_id": refID, "charge_id": ev.ChargeID})
		switch {
		case errors.Is(err, order.ErrNotFound):
			a = eventAttemptRow{}
		case err != nil:
			return err
		}
		var found *string
		if a.AttemptID != "" {
			found = &a.AttemptID
		}
		r, err = queryOne[recordedRow](ctx, s.pool, sql, pgx.StrictNamedArgs{
			"merchant_id": a.MerchantID, "matched_id": found, "about": string(ev.About), "reference": ev.AttemptID,
			"gateway": ev.Gateway, "event_id": ev.ID, "event_type": ev.Type, "object_id": ev.ObjectID,
			"charge_id": ev.ChargeID, "succeeded": ev.Succeeded, "outcome": string(ev.Outcome),
			"decline_code": ev.DeclineCode, "amount_minor": ev.Amount.AmountMinor, "currency": ev.Amount.Currency,
			"occurred_at": occurredAt, "failed_later": ev.FailedLater,
		})
		return err
	})
	if err != nil {
		return order.RecordedEvent{}, err
	}
	return order.RecordedEvent{Result: order.GatewayEventResult(r.Result), OrderID: r.OrderID, AttemptID: r.AttemptID}, nil
}

// gatewayEventsAboutSQL reads a reference's recorded events.
//
//go:embed sql/gateway_events_about.sql
var gatewayEventsAboutSQL string

var _ order.EventLog = (*Store)(nil)

// GatewayEventsAbout returns the events recorded from gateway whose
// reference (GatewayEvent.AttemptID as the event gave it) is reference, in
// the order they were recorded, each once; none is an empty slice, not an
// error. The same statement serves both engines (its comment says why a
// read of every shard is acceptable on Citus).
func (s *Store) GatewayEventsAbout(ctx context.Context, gateway, reference string) ([]order.GatewayEvent, error) {
	rows, err := queryAll[gatewayEventRow](ctx, s.pool, gatewayEventsAboutSQL,
		pgx.StrictNamedArgs{"gateway": gateway, "reference": reference})
	if err != nil {
		return nil, fmt.Errorf("read gateway events about %q: %w", reference, err)
	}
	evs := make([]order.GatewayEvent, len(rows))
	for i, r := range rows {
		evs[i] = order.GatewayEvent{
			Gateway: r.Gateway, ID: r.EventID, Type: r.EventType, ObjectID: r.ObjectID, AttemptID: r.Reference,
			ChargeID: r.ChargeID, Succeeded: r.Succeeded, About: order.EventAbout(r.About),
			Outcome: order.Outcome(r.Outcome), DeclineCode: r.DeclineCode,
			Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor},
		}
		if r.OccurredAt != nil {
			evs[i].OccurredAt = *r.OccurredAt
		}
	}
	return evs, nil
}

// gatewayEventRow is what gateway_events_about.sql returns.
type gatewayEventRow struct {
	Gateway     string     `db:"gateway"`
	EventID     string     `db:"event_id"`
	EventType   string     `db:"event_type"`
	ObjectID    string     `db:"object_id"`
	Reference   string     `db:"reference"`
	About       string     `db:"about"`
	ChargeID    string     `db:"charge_id"`
	Succeeded   bool       `db:"succeeded"`
	Outcome     string     `db:"outcome"`
	DeclineCode string     `db:"decline_code"`
	AmountMinor int64      `db:"amount_minor"`
	Currency    string     `db:"currency"`
	OccurredAt  *time.Time `db:"occurred_at"`
}

// gatewayEventAttemptSQL finds the attempt, capture, void or refund an
// event is about, and its merchant.
//
//go:embed sql/gateway_event_attempt.sql
var gatewayEventAttemptSQL string

// eventAttemptRow is what gateway_event_attempt.sql returns.
type eventAttemptRow struct {
	MerchantID string `db:"merchant_id"`
	AttemptID  string `db:"attempt_id"`
}

// recordedRow is what record_gateway_event.sql returns.
type recordedRow struct {
	Result    string `db:"result"`
	OrderID   string `db:"order_id"`
	AttemptID string `db:"attempt_id"`
	Woken     int64  `db:"woken"`
	Raised    int64  `db:"raised"`
}

//go:embed sql/listen_due.sql
var listenDueSQL string

// ListenDue calls fn with the id of every order a gateway's event makes due
// now, until ctx ends, reconnecting after a failure. listening is called
// each time it has (re)connected: notifications sent while it was not
// listening are lost, but their orders are due, and a look now finds them.
func (s *Store) ListenDue(ctx context.Context, log *slog.Logger, fn func(orderID string), listening func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenDue(ctx, fn, listening)
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "due notifications interrupted; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (s *Store) listenDue(ctx context.Context, fn func(string), listening func()) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection that has listened is not handed back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenDueSQL); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}
