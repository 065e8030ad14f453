package postgres

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// notificationRow is an event as list_events.sql and lease_deliveries.sql
// select it: the history row, its order and its attempt, or, for a
// refund's event, its refund (RefundID not ”), or, for an audit finding's
// event, the finding (FindingID not ”), whose order may be none.
type notificationRow struct {
	Num               int64     `db:"event_num"`
	Type              string    `db:"type"`
	MerchantID        string    `db:"merchant_id"`
	OrderID           string    `db:"order_id"`
	ToState           string    `db:"to_state"`
	CreatedAt         time.Time `db:"created_at"`
	TxID              string    `db:"txid"`
	AttemptID         string    `db:"attempt_id"`
	Attempts          int       `db:"delivery_attempts"`
	Actor             string    `db:"actor"`
	Sequence          int64     `db:"sequence"`
	MerchantReference string    `db:"merchant_reference"`
	AmountMinor       int64     `db:"amount_minor"`
	Currency          string    `db:"currency"`
	Gateway           string    `db:"gateway"`
	OrderCreatedAt    time.Time `db:"order_created_at"`
	GatewayChargeID   string    `db:"gateway_charge_id"`
	DeclineCode       string    `db:"decline_code"`
	RefundID          string    `db:"refund_id"`
	RefundRequestID   string    `db:"refund_request_id"`
	RefundAmountMinor int64     `db:"refund_amount_minor"`
	RefundReason      string    `db:"refund_reason"`
	RefundActor       string    `db:"refund_actor"`
	RefundOutcome     string    `db:"refund_outcome"`
	RefundDeclineCode string    `db:"refund_decline_code"`
	RefundGatewayID   string    `db:"refund_gateway_refund_id"`
	RefundCreatedAt   time.Time `db:"refund_created_at"`
	FindingID         string    `db:"finding_id"`
	FindingRunID      string    `db:"finding_run_id"`
	FindingClass      string    `db:"finding_class"`
	FindingGateway    string    `db:"finding_gateway"`
	FindingRecordID   string    `db:"finding_gateway_record_id"`
	FindingOrderID    string    `db:"finding_order_id"`
	FindingAttemptID  string    `db:"finding_attempt_id"`
	FindingSettle     string    `db:"finding_settle"`
	FindingGatewayRec string    `db:"finding_gateway_record"`
}

func (r notificationRow) notification() (order.Notification, error) {
	tx, err := strconv.ParseUint(r.TxID, 10, 64)
	if err != nil {
		return order.Notification{}, fmt.Errorf("event %d: transaction id %q: %w", r.Num, r.TxID, err)
	}
	n := order.Notification{
		Num: r.Num, Type: r.Type, MerchantID: r.MerchantID, Sequence: r.Sequence, CreatedAt: r.CreatedAt,
		Order: order.Order{
			ID: r.OrderID, MerchantID: r.MerchantID, MerchantReference: r.MerchantReference,
			Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor}, Gateway: r.Gateway,
			State: order.State(r.ToState), CurrentAttempt: r.AttemptID, CreatedAt: r.OrderCreatedAt,
		},
		Actor: order.Actor(r.Actor), GatewayChargeID: r.GatewayChargeID, DeclineCode: r.DeclineCode,
		Cursor:   order.EventCursor{TxID: tx, Num: r.Num},
		Attempts: r.Attempts,
	}
	if r.FindingID != "" {
		// An audit finding's event: no transition of an order, and
		// perhaps no order at all; the finding names the one it is about.
		n.Order = order.Order{ID: r.FindingOrderID, MerchantID: r.MerchantID}
		n.Finding = &order.AuditFinding{
			ID: r.FindingID, RunID: r.FindingRunID, Class: r.FindingClass, Gateway: r.FindingGateway,
			GatewayRecordID: r.FindingRecordID, OrderID: r.FindingOrderID, AttemptID: r.FindingAttemptID,
			Settle: json.RawMessage(r.FindingSettle), GatewayRecord: json.RawMessage(r.FindingGatewayRec),
		}
		return n, nil
	}
	if r.RefundID != "" {
		// A refund's event: to_state is the refund's, and the order is
		// as it was created, its state not known at this transition.
		n.Order.State, n.Order.CurrentAttempt = "", ""
		n.Refund = &order.Refund{
			ID: r.RefundID, MerchantID: r.MerchantID, OrderID: r.OrderID, RequestID: r.RefundRequestID,
			Amount: order.Money{Currency: r.Currency, AmountMinor: r.RefundAmountMinor}, Reason: r.RefundReason,
			Actor: order.Actor(r.RefundActor), State: order.RefundState(r.ToState), Outcome: order.Outcome(r.RefundOutcome),
			DeclineCode: r.RefundDeclineCode, GatewayRefundID: r.RefundGatewayID, CreatedAt: r.RefundCreatedAt,
		}
	}
	return n, nil
}

func notifications(rows []notificationRow) ([]order.Notification, error) {
	out := make([]order.Notification, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = r.notification(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

//go:embed sql/list_events.sql
var listEventsSQL string

// ListEvents returns up to limit of merchant's events after cursor after,
// oldest first. An event appears once every transaction older than its
// own has ended, so that a cursor never passes an event still to come.
func (s *Store) ListEvents(ctx context.Context, merchant string, after order.EventCursor, limit int) ([]order.Notification, error) {
	var out []order.Notification
	err := retry(ctx, func() error {
		rows, err := queryAll[notificationRow](ctx, s.pool, listEventsSQL, pgx.StrictNamedArgs{
			"merchant_id": merchant, "after_txid": strconv.FormatUint(after.TxID, 10), "after_id": after.Num,
			"limit": limit,
		})
		if err != nil {
			return err
		}
		out, err = notifications(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

//go:embed sql/resend_event.sql
var resendEventSQL string

// ResendEvent makes merchant's event num due for delivery now, its
// attempts counted afresh; order.ErrEventNotFound when the merchant has no such
// event.
func (s *Store) ResendEvent(ctx context.Context, merchant string, num int64) error {
	err := retry(ctx, func() error {
		_, err := queryOne[struct {
			Num int64 `db:"event_num"`
		}](ctx, s.pool, resendEventSQL, pgx.StrictNamedArgs{"merchant_id": merchant, "id": num})
		return err
	})
	if errors.Is(err, order.ErrNotFound) {
		return order.ErrEventNotFound
	}
	return err
}

// LeaseDeliveries leases up to perMerchant due events of each merchant for
// lease; an event not recorded by then is leased again.
func (s *Store) LeaseDeliveries(ctx context.Context, merchants []string, perMerchant int, lease time.Duration) ([]order.Notification, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease deliveries: %w", err)
	}
	out, err := e.leaseDeliveries(ctx, merchants, perMerchant, lease)
	if err != nil {
		return out, fmt.Errorf("lease deliveries: %w", err)
	}
	return out, nil
}

//go:embed sql/record_deliveries.sql
var recordDeliveriesSQL string

// RecordDeliveries records the results of leased events' deliveries in one
// statement; an event whose retries run out within giveUp of its
// transition has failed.
func (s *Store) RecordDeliveries(ctx context.Context, ds []order.Delivery, giveUp time.Duration) ([]order.DeliveryRecord, error) {
	var cols deliveryColumns
	for _, d := range ds {
		cols.add(d)
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return nil, fmt.Errorf("record deliveries: %w", err)
	}
	args["give_up"] = giveUp
	var out []order.DeliveryRecord
	err = retry(ctx, func() error {
		rows, err := queryAll[struct {
			Num        int64   `db:"event_num"`
			MerchantID string  `db:"merchant_id"`
			Outcome    string  `db:"outcome"`
			Failed     bool    `db:"failed"`
			Latency    float64 `db:"latency_seconds"`
		}](ctx, s.pool, recordDeliveriesSQL, args)
		out = make([]order.DeliveryRecord, len(rows))
		for i, r := range rows {
			out[i] = order.DeliveryRecord{MerchantID: r.MerchantID, Num: r.Num, Outcome: order.DeliveryOutcome(r.Outcome),
				Failed: r.Failed, Latency: time.Duration(r.Latency * float64(time.Second))}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record deliveries: %w", err)
	}
	return out, s.recordDeliveryTries(ctx, ds)
}

//go:embed sql/order_delivery_tries.sql
var orderDeliveryTriesSQL string

// deliveryTries returns the failed delivery tries of a merchant's events
// nums, by event.
func (s *Store) deliveryTries(ctx context.Context, merchant string, nums []int64) (map[int64][]order.DeliveryTry, error) {
	type row struct {
		Num     int64     `db:"event_num"`
		At      time.Time `db:"tried_at"`
		Attempt int       `db:"attempt"`
		Status  int       `db:"status"`
		Error   string    `db:"error"`
	}
	var rows []row
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[row](ctx, s.pool, orderDeliveryTriesSQL, pgx.StrictNamedArgs{"merchant_id": merchant, "event_nums": nums})
		return err
	})
	out := map[int64][]order.DeliveryTry{}
	for _, r := range rows {
		out[r.Num] = append(out[r.Num], order.DeliveryTry{At: r.At, Attempt: r.Attempt, Status: r.Status, Error: r.Error})
	}
	return out, err
}

//go:embed sql/record_delivery_tries.sql
var recordDeliveryTriesSQL string

// recordDeliveryTries keeps the failed tries among ds, for their events'
// story; a round with none costs nothing. It runs after the round's
// results are recorded: a crash between the two loses a line of history,
// never a delivery.
func (s *Store) recordDeliveryTries(ctx context.Context, ds []order.Delivery) error {
	var merchants, errs []string
	var nums []int64
	var attempts, statuses []int32
	for _, d := range ds {
		if d.Outcome == order.DeliveryRetry {
			merchants, nums, errs = append(merchants, d.MerchantID), append(nums, d.Num), append(errs, d.Error)
			attempts, statuses = append(attempts, int32(d.Attempt)), append(statuses, int32(d.Status))
		}
	}
	if len(nums) == 0 {
		return nil
	}
	err := retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, recordDeliveryTriesSQL, namedArgs(pgx.StrictNamedArgs{"merchant_id": merchants,
			"event_num": nums, "attempt": attempts, "status": statuses, "error": errs}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record delivery tries: %w", err)
	}
	return nil
}

//go:embed sql/delivery_backlog.sql
var deliveryBacklogSQL string

// DeliveryBacklog returns each merchant's undelivered events.
func (s *Store) DeliveryBacklog(ctx context.Context, merchants []string) ([]order.DeliveryBacklog, error) {
	var out []order.DeliveryBacklog
	err := retry(ctx, func() error {
		rows, err := queryAll[struct {
			MerchantID string  `db:"merchant_id"`
			Pending    int64   `db:"pending"`
			Oldest     float64 `db:"oldest_seconds"`
		}](ctx, s.pool, deliveryBacklogSQL, pgx.StrictNamedArgs{"merchant_id": merchants})
		out = make([]order.DeliveryBacklog, len(rows))
		for i, r := range rows {
			out[i] = order.DeliveryBacklog{MerchantID: r.MerchantID, Pending: r.Pending,
				Oldest: time.Duration(r.Oldest * float64(time.Second))}
		}
		return err
	})
	return out, err
}

//go:embed sql/order_events_out.sql
var orderEventsOutSQL string

// OrderEventDeliveries returns the events out of a merchant's order and
// where each one's delivery stands, oldest first.
func (s *Store) OrderEventDeliveries(ctx context.Context, merchant, orderID string) ([]order.EventDelivery, error) {
	type row struct {
		Num         int64      `db:"event_num"`
		Type        string     `db:"type"`
		CreatedAt   time.Time  `db:"created_at"`
		Attempts    int        `db:"delivery_attempts"`
		LastStatus  int        `db:"last_status"`
		DeliveredAt *time.Time `db:"delivered_at"`
		FailedAt    *time.Time `db:"failed_at"`
		DeliverAt   *time.Time `db:"deliver_at"`
	}
	var rows []row
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[row](ctx, s.pool, orderEventsOutSQL, pgx.StrictNamedArgs{"merchant_id": merchant, "order_id": orderID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list order %s events: %w", orderID, err)
	}
	nums := make([]int64, len(rows))
	for i, r := range rows {
		nums[i] = r.Num
	}
	tries, err := s.deliveryTries(ctx, merchant, nums)
	if err != nil {
		return nil, fmt.Errorf("list order %s events: %w", orderID, err)
	}
	out := make([]order.EventDelivery, len(rows))
	for i, r := range rows {
		d := order.EventDelivery{Num: r.Num, Type: r.Type, CreatedAt: r.CreatedAt, Attempts: r.Attempts, LastStatus: r.LastStatus,
			FailedTries: tries[r.Num]}
		for _, t := range []struct {
			from *time.Time
			to   *time.Time
		}{{r.DeliveredAt, &d.DeliveredAt}, {r.FailedAt, &d.FailedAt}, {r.DeliverAt, &d.NextTry}} {
			if t.from != nil {
				*t.to = *t.from
			}
		}
		out[i] = d
	}
	return out, nil
}
