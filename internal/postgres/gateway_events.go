package postgres

import (
	"context"
	_ "embed"
	"errors"
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

// RecordGatewayEvent records a verified gateway event once, in the same
// transaction (one statement) as what it triggers: the attempt's order made
// due now, or a possible double charge raised for review. A repeat of an
// event records and triggers nothing (order.EventDuplicate). When the
// statement returns, it has committed.
func (s *Store) RecordGatewayEvent(ctx context.Context, ev order.GatewayEvent) (order.RecordedEvent, error) {
	// An attempt id that is not a UUID names no attempt of ours; the
	// statement's cast would refuse it.
	var attemptID *string
	if _, err := uuid.Parse(ev.AttemptID); err == nil {
		attemptID = &ev.AttemptID
	}
	e, err := s.engine(ctx)
	if err != nil {
		return order.RecordedEvent{}, err
	}
	sql := e.statements().recordGatewayEvent
	var r recordedRow
	err = retry(ctx, func() error {
		// The merchant first, then everything on its shard. An event
		// about no attempt of ours is recorded under merchant "".
		a, err := queryOne[eventAttemptRow](ctx, s.pool, gatewayEventAttemptSQL,
			pgx.StrictNamedArgs{"attempt_id": attemptID, "charge_id": ev.ChargeID})
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
			"merchant_id": a.MerchantID, "attempt_id": found, "gateway": ev.Gateway, "event_id": ev.ID,
			"event_type": ev.Type, "object_id": ev.ObjectID, "succeeded": ev.Succeeded,
		})
		return err
	})
	if err != nil {
		return order.RecordedEvent{}, err
	}
	return order.RecordedEvent{Result: order.GatewayEventResult(r.Result), OrderID: r.OrderID, AttemptID: r.AttemptID}, nil
}

// gatewayEventAttemptSQL finds the attempt an event is about, and its
// merchant.
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
