package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// The statements in sql/ name their result columns after the db tags of the
// row types here, and pgx.RowToStructByName matches columns to fields by
// name: a statement that selects a column too many or too few, or misspells
// one, fails at its first run (every statement has a test), rather than
// scanning a value into the wrong field.

// orderRow is an order as the statements select it: the columns of orders,
// with id and current_attempt as text (” for no attempt).
type orderRow struct {
	ID                string     `db:"id"`
	MerchantID        string     `db:"merchant_id"`
	MerchantReference string     `db:"merchant_reference"`
	AmountMinor       int64      `db:"amount_minor"`
	Currency          string     `db:"currency"`
	PaymentMethod     string     `db:"payment_method"`
	Gateway           string     `db:"gateway"`
	State             string     `db:"state"`
	CurrentAttempt    string     `db:"current_attempt"`
	ReconcileAt       *time.Time `db:"reconcile_at"`
	ReconcileCount    int        `db:"reconcile_count"`
	LastError         string     `db:"last_error"`
	CreatedAt         time.Time  `db:"created_at"`
	UpdatedAt         time.Time  `db:"updated_at"`
}

func (r orderRow) order() order.Order {
	o := order.Order{
		ID:                r.ID,
		MerchantID:        r.MerchantID,
		MerchantReference: r.MerchantReference,
		Amount:            order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor},
		PaymentMethod:     r.PaymentMethod,
		Gateway:           r.Gateway,
		State:             order.State(r.State),
		CurrentAttempt:    r.CurrentAttempt,
		ReconcileCount:    r.ReconcileCount,
		LastError:         r.LastError,
		CreatedAt:         r.CreatedAt,
		UpdatedAt:         r.UpdatedAt,
	}
	if r.ReconcileAt != nil {
		o.ReconcileAt = *r.ReconcileAt
	}
	return o
}

// attemptRow is a charge attempt as the statements select it: its columns
// prefixed attempt_, so that a row can hold an order and an attempt, with
// the ids as text and a NULL outcome (first call in flight) as ”.
type attemptRow struct {
	ID              string    `db:"attempt_id"`
	OrderID         string    `db:"attempt_order_id"`
	RequestID       string    `db:"attempt_request_id"`
	PaymentMethod   string    `db:"attempt_payment_method"`
	Customer        string    `db:"attempt_customer"`
	AmountMinor     int64     `db:"attempt_amount_minor"`
	Currency        string    `db:"attempt_currency"`
	Outcome         string    `db:"attempt_outcome"`
	DeclineCode     string    `db:"attempt_decline_code"`
	GatewayChargeID string    `db:"attempt_gateway_charge_id"`
	CreatedAt       time.Time `db:"attempt_created_at"`
}

func (r attemptRow) attempt() order.Attempt {
	return order.Attempt{
		ID:              r.ID,
		OrderID:         r.OrderID,
		RequestID:       r.RequestID,
		PaymentMethod:   r.PaymentMethod,
		Customer:        r.Customer,
		Amount:          order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor},
		Outcome:         order.Outcome(r.Outcome),
		DeclineCode:     r.DeclineCode,
		GatewayChargeID: r.GatewayChargeID,
		CreatedAt:       r.CreatedAt,
	}
}

// eventRow is an order event as order_events.sql and history_events.sql
// select it.
type eventRow struct {
	Seq       int64     `db:"seq"`
	OrderID   string    `db:"order_id"`
	From      string    `db:"from_state"`
	To        string    `db:"to_state"`
	Name      string    `db:"event"`
	Actor     string    `db:"actor"`
	Reason    string    `db:"reason"`
	AttemptID string    `db:"attempt_id"`
	RefundID  string    `db:"refund_id"`
	CreatedAt time.Time `db:"created_at"`
}

func (r eventRow) event() order.Event {
	return order.Event{Seq: r.Seq, OrderID: r.OrderID, From: order.State(r.From), To: order.State(r.To), Name: r.Name,
		Actor: order.Actor(r.Actor), Reason: r.Reason, AttemptID: r.AttemptID, RefundID: r.RefundID, CreatedAt: r.CreatedAt}
}

// leaseRow is a leased order with its current attempt (claim_due.sql,
// lease_order.sql).
type leaseRow struct {
	AttemptAgeSeconds float64 `db:"attempt_age_seconds"`
	orderRow
	attemptRow
}

func (r leaseRow) due() order.Due {
	return order.Due{Order: r.order(), Attempt: r.attempt(),
		AttemptAge: time.Duration(r.AttemptAgeSeconds * float64(time.Second))}
}

// queryOne runs sql with args and scans its one row into a T; no row is
// order.ErrNotFound.
func queryOne[T any](ctx context.Context, q querier, sql string, args pgx.StrictNamedArgs) (T, error) {
	// A failed Query returns rows that report its error, which the collect
	// functions return.
	rows, _ := q.Query(ctx, sql, args)
	r, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[T])
	if errors.Is(err, pgx.ErrNoRows) {
		return r, order.ErrNotFound
	}
	return r, err
}

// queryAll runs sql with args and scans every row into a T.
func queryAll[T any](ctx context.Context, q querier, sql string, args pgx.StrictNamedArgs) ([]T, error) {
	rows, _ := q.Query(ctx, sql, args)
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
