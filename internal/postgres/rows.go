package postgres

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/settlepay/settle/internal/order"
)

// The statements in sql/ name their result columns after the db tags of the
// row types here, and queryOne and queryAll match columns to fields by
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
	Gateway         string    `db:"attempt_gateway"`
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
		Gateway:         r.Gateway,
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
	CaptureID string    `db:"capture_id"`
	VoidID    string    `db:"void_id"`
	CreatedAt time.Time `db:"created_at"`
}

func (r eventRow) event() order.Event {
	return order.Event{Seq: r.Seq, OrderID: r.OrderID, From: order.State(r.From), To: order.State(r.To), Name: r.Name,
		Actor: order.Actor(r.Actor), Reason: r.Reason, AttemptID: r.AttemptID, RefundID: r.RefundID, CaptureID: r.CaptureID,
		VoidID: r.VoidID, CreatedAt: r.CreatedAt}
}

// leaseRow is a leased order with its current attempt (claim_due.sql,
// lease_order.sql).
type leaseRow struct {
	AttemptAgeSeconds float64 `db:"attempt_age_seconds"`
	modedOrderRow
	attemptRow
}

func (r leaseRow) due() order.Due {
	return order.Due{Order: r.order(), Attempt: r.attempt(),
		AttemptAge: time.Duration(r.AttemptAgeSeconds * float64(time.Second))}
}

// queryOne runs sql with args and scans its one row into a T; no row is
// order.ErrNotFound.
func queryOne[T any](ctx context.Context, q querier, sql string, args pgx.StrictNamedArgs) (T, error) {
	var r T
	// A failed Query returns rows that report its error.
	rows, _ := q.Query(ctx, sql, namedArgs(args))
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return r, err
		}
		return r, order.ErrNotFound
	}
	targets, err := scanTargets(&r, rows.FieldDescriptions())
	if err != nil {
		return r, err
	}
	if err := rows.Scan(targets...); err != nil {
		return r, err
	}
	rows.Close()
	return r, rows.Err()
}

// queryAll runs sql with args and scans every row into a T.
func queryAll[T any](ctx context.Context, q querier, sql string, args pgx.StrictNamedArgs) ([]T, error) {
	rows, _ := q.Query(ctx, sql, namedArgs(args))
	defer rows.Close()
	var (
		out     []T
		r, zero T
		targets []any
	)
	for rows.Next() {
		r = zero
		if targets == nil {
			var err error
			if targets, err = scanTargets(&r, rows.FieldDescriptions()); err != nil {
				return nil, err
			}
		}
		// The targets point into r, which is zeroed for each row, so that
		// nothing of one row's value is left in the next.
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Rows are scanned by position, with the fields each column goes to found
// by name once per row type and column list and kept: pgx's
// RowToStructByName finds them again at every row (it joins the column
// names into a key and looks that up, then builds the scan targets by
// reflection), about 5% of the server's CPU under load.

// scanPlan is where a column list goes in a row type: the field of each
// column, as an index path into the struct (embedded structs flattened).
type scanPlan struct {
	cols  []string
	paths [][]int
}

// typePlans are a row type's scan plans, one per column list seen: a few
// statements each. The slice is replaced, never changed, so that a reader
// needs no lock.
type typePlans struct {
	mu    sync.Mutex
	plans atomic.Pointer[[]*scanPlan]
}

// plansByType maps a row type's reflect.Type to its *typePlans.
var plansByType sync.Map

// scanTargets returns pointers to the fields of *r that the columns cols
// go to, in column order. Each column must name a field (its db tag, or
// its name in any case without one) and each field must have a column,
// as pgx.RowToStructByName requires.
func scanTargets[T any](r *T, cols []pgconn.FieldDescription) ([]any, error) {
	t := reflect.TypeFor[T]()
	v, ok := plansByType.Load(t)
	if !ok {
		v, _ = plansByType.LoadOrStore(t, &typePlans{})
	}
	tp := v.(*typePlans)
	plan := tp.find(cols)
	if plan == nil {
		var err error
		if plan, err = newScanPlan(t, cols); err != nil {
			return nil, err
		}
		tp.add(plan)
	}
	rv := reflect.ValueOf(r).Elem()
	targets := make([]any, len(plan.paths))
	for i, path := range plan.paths {
		targets[i] = rv.FieldByIndex(path).Addr().Interface()
	}
	return targets, nil
}

// find returns the plan for cols, or nil.
func (tp *typePlans) find(cols []pgconn.FieldDescription) *scanPlan {
	plans := tp.plans.Load()
	if plans == nil {
		return nil
	}
next:
	for _, p := range *plans {
		if len(p.cols) != len(cols) {
			continue
		}
		for i, c := range cols {
			if p.cols[i] != c.Name {
				continue next
			}
		}
		return p
	}
	return nil
}

// add keeps plan.
func (tp *typePlans) add(plan *scanPlan) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var plans []*scanPlan
	if old := tp.plans.Load(); old != nil {
		plans = append(plans, *old...)
	}
	plans = append(plans, plan)
	tp.plans.Store(&plans)
}

// newScanPlan matches cols to the fields of the struct type t by name.
func newScanPlan(t reflect.Type, cols []pgconn.FieldDescription) (*scanPlan, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("scan into %s: not a struct", t)
	}
	byName := map[string][]int{}
	var walk func(t reflect.Type, path []int)
	walk = func(t reflect.Type, path []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := append(path[:len(path):len(path)], i)
			switch tag, _ := f.Tag.Lookup("db"); {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				walk(f.Type, p)
			case !f.IsExported() || tag == "-":
			case tag != "":
				byName[strings.ToLower(tag)] = p
			default:
				byName[strings.ToLower(f.Name)] = p
			}
		}
	}
	walk(t, nil)
	plan := &scanPlan{cols: make([]string, len(cols)), paths: make([][]int, len(cols))}
	used := map[string]bool{}
	for i, c := range cols {
		name := strings.ToLower(c.Name)
		p, ok := byName[name]
		if !ok || used[name] {
			return nil, fmt.Errorf("scan into %s: no field for column %s", t, c.Name)
		}
		used[name] = true
		plan.cols[i], plan.paths[i] = c.Name, p
	}
	for name := range byName {
		if !used[name] {
			return nil, fmt.Errorf("scan into %s: no column for field %s", t, name)
		}
	}
	return plan, nil
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

// uuids parses ids for a uuid[] argument, as pgtype.UUIDs. pgx encodes a
// []string for uuid[] only as text, and finds that out by failing to plan
// the binary form at every run (an error built and dropped each time). A
// uuid.UUID is no better: it is a driver.Valuer, which pgx encodes by
// calling Value (a string), scanning that into its own UUID and encoding
// the result, about 1.9 µs and 19 allocations a value against 30 ns and
// none for a pgtype.UUID, which pgx writes in binary at once.
func uuids(ids []string) ([]pgtype.UUID, error) {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("id %d is not a UUID: %w", i+1, err)
		}
		out[i] = pgtype.UUID{Bytes: u, Valid: true}
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
