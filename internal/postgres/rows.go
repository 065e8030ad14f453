package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
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
	rows, _ := q.Query(ctx, sql, namedArgs(args))
	r, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[T])
	if errors.Is(err, pgx.ErrNoRows) {
		return r, order.ErrNotFound
	}
	return r, err
}

// queryAll runs sql with args and scans every row into a T.
func queryAll[T any](ctx context.Context, q querier, sql string, args pgx.StrictNamedArgs) ([]T, error) {
	rows, _ := q.Query(ctx, sql, namedArgs(args))
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}

// namedArgs are pgx.StrictNamedArgs whose statement is rewritten once per
// process rather than at every run. pgx rewrites a statement's @names into
// $n by lexing its whole text, comments included, which cost 7.5% of the
// server's CPU under load (settle bench -profile); the statements are a
// fixed set of files, so each one's rewrite is kept, and a run only puts
// its arguments in the order the rewrite found. It is as strict as
// StrictNamedArgs: a name missing or an argument unused fails the run.
type namedArgs pgx.StrictNamedArgs

// rewrite is a statement rewritten with $n placeholders, and the name of
// the argument that each $n stands for.
type rewrite struct {
	sql   string
	names []string
}

// rewrites maps each statement's text to its *rewrite.
var rewrites sync.Map

// RewriteQuery implements pgx.QueryRewriter.
func (a namedArgs) RewriteQuery(ctx context.Context, conn *pgx.Conn, sql string, args []any) (string, []any, error) {
	v, ok := rewrites.Load(sql)
	if !ok {
		// Rewrite once with each argument standing for its own name: the
		// arguments pgx returns are then the names in $n order.
		probe := make(pgx.StrictNamedArgs, len(a))
		for k := range a {
			probe[k] = k
		}
		newSQL, names, err := probe.RewriteQuery(ctx, conn, sql, args)
		if err != nil {
			return "", nil, err
		}
		rw := &rewrite{sql: newSQL, names: make([]string, len(names))}
		for i, n := range names {
			rw.names[i] = n.(string)
		}
		v, _ = rewrites.LoadOrStore(sql, rw)
	}
	rw := v.(*rewrite)
	if len(a) != len(rw.names) {
		return "", nil, fmt.Errorf("statement takes %d named arguments, got %d", len(rw.names), len(a))
	}
	out := make([]any, len(rw.names))
	for i, n := range rw.names {
		arg, ok := a[n]
		if !ok {
			return "", nil, fmt.Errorf("argument %s missing", n)
		}
		out[i] = arg
	}
	return rw.sql, out, nil
}

// uuids parses ids for a uuid[] argument. pgx encodes a []string for
// uuid[] only as text, and finds that out by failing to plan the binary
// form at every run (an error built and dropped each time); parsed UUIDs
// go in binary at once.
func uuids(ids []string) ([]uuid.UUID, error) {
	out := make([]uuid.UUID, len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("id %d is not a UUID: %w", i+1, err)
		}
		out[i] = u
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
