package postgres

import (
	"context"
	_ "embed"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
)

// Store is order.Store on PostgreSQL, or on Citus. What differs between
// the two is its engine (engine.go), picked once; each engine is in its
// own files, engine_postgres*.go and engine_citus*.go.
type Store struct {
	pool *pgxpool.Pool
	// postgres and citus are the store's engines, made by NewStore;
	// picked points to the one its database runs, once known (see
	// Store.engine).
	postgres *postgresEngine
	citus    *citusEngine
	picked   atomic.Pointer[engine]
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, postgres: newPostgresEngine(pool), citus: &citusEngine{pool: pool}}
}

//go:embed sql/order_by_id.sql
var orderByIDSQL string

// Order implements order.Store.
func (s *Store) Order(ctx context.Context, scope order.Scope, id string) (order.Order, error) {
	m, err := s.merchantOf(ctx, scope, id)
	if err != nil {
		return order.Order{}, err
	}
	return readOrder(ctx, s.pool, m, id)
}

// readOrder reads merchantID's order id, with its refund totals; an empty
// merchantID (the zero order.Scope's) reaches none.
func readOrder(ctx context.Context, pool *pgxpool.Pool, merchantID, id string) (order.Order, error) {
	var r disputedOrderRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[disputedOrderRow](ctx, pool, orderByIDSQL, pgx.StrictNamedArgs{"id": id, "merchant_id": merchantID})
		return err
	})
	return r.order(), err
}

//go:embed sql/order_by_reference.sql
var orderByReferenceSQL string

// OrderByReference implements order.Store.
func (s *Store) OrderByReference(ctx context.Context, merchantID, ref string) (order.Order, error) {
	var r orderRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[orderRow](ctx, s.pool, orderByReferenceSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "merchant_reference": ref})
		return err
	})
	return r.order(), err
}

//go:embed sql/find_orders.sql
var findOrdersSQL string

// FindOrders implements order.Store.
func (s *Store) FindOrders(ctx context.Context, merchantID, query string) ([]order.Order, error) {
	var asUUID *string
	if u, err := uuid.Parse(query); err == nil {
		canonical := u.String()
		asUUID = &canonical
	}
	var rows []disputedOrderRow
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[disputedOrderRow](ctx, s.pool, findOrdersSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "query": query, "uuid": asUUID})
		return err
	})
	out := make([]order.Order, len(rows))
	for i, r := range rows {
		out[i] = r.order()
	}
	return out, err
}

//go:embed sql/attempt_by_id.sql
var attemptByIDSQL string

// Attempt implements order.Store.
func (s *Store) Attempt(ctx context.Context, merchantID, id string) (order.Attempt, error) {
	var r historyAttemptRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[historyAttemptRow](ctx, s.pool, attemptByIDSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id})
		return err
	})
	return r.attempt(), err
}

//go:embed sql/order_attempt.sql
var orderAttemptSQL string

// orderAttemptRow is what order_attempt.sql returns.
type orderAttemptRow struct {
	refundedOrderRow
	attemptRow
}

// OrderAttempt implements order.Store.
func (s *Store) OrderAttempt(ctx context.Context, merchantID, orderID, attemptID string) (order.Order, order.Attempt, error) {
	var r orderAttemptRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[orderAttemptRow](ctx, s.pool, orderAttemptSQL, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": orderID, "attempt_id": attemptID,
		})
		return err
	})
	return r.order(), r.attempt(), err
}

//go:embed sql/lock_order.sql
var lockOrderSQL string

// Transition implements order.Store.
func (s *Store) Transition(ctx context.Context, scope order.Scope, id string, decide func(order.Order) (order.Move, error)) (order.Order, error) {
	merchantID, err := s.merchantOf(ctx, scope, id)
	if err != nil {
		return order.Order{}, err
	}
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, err
	}
	sql := e.statements().transition
	var o order.Order
	err = withTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := queryOne[orderRow](ctx, tx, lockOrderSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id})
		if err != nil {
			return err
		}
		m, err := decide(cur.order())
		if err != nil {
			return err
		}
		var res order.Result
		if m.Attempt != nil {
			res = *m.Attempt
		}
		r, err := queryOne[orderRow](ctx, tx, sql, pgx.StrictNamedArgs{
			"merchant_id": cur.MerchantID, "id": cur.ID, "from_state": cur.State, "to_state": m.To, "outcome": res.Outcome,
			"decline_code": res.DeclineCode, "charge_id": res.ChargeID, "event": m.Event, "actor": m.Actor,
			"reason": truncate(m.Reason, 1000),
		})
		o = r.order()
		return err
	})
	return o, err
}

//go:embed sql/order_merchant.sql
var orderMerchantSQL string

// merchantOf returns the merchant that scope names, or for AnyMerchant
// (operators' calls) the merchant of order id, so that the statements that
// lock and change the order name their merchant: on Citus that makes them
// single-shard, where a lock taken on every shard could not be. Only the
// lookup itself reads every shard.
func (s *Store) merchantOf(ctx context.Context, scope order.Scope, id string) (string, error) {
	if !scope.IsAnyMerchant() {
		return scope.MerchantID(), nil
	}
	var m string
	err := retry(ctx, func() error {
		r, err := queryOne[struct {
			MerchantID string `db:"merchant_id"`
		}](ctx, s.pool, orderMerchantSQL, pgx.StrictNamedArgs{"id": id})
		m = r.MerchantID
		return err
	})
	return m, err
}

func truncate(s string, n int) string {
	// PostgreSQL refuses invalid UTF-8, and a gateway's message may carry
	// it or be cut in the middle of a character; the statement would fail
	// for the sake of an error text.
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// isRequestKey reports whether a unique violation of create_claimed_order.sql
// is charge_attempts_request_key's. Citus relays a worker's error without
// the constraint's name; there the statement's other keys cannot be the
// one violated (the order's reference is ON CONFLICT DO NOTHING, the ids
// are new random UUIDs), so a nameless violation is the request key's.
func isRequestKey(err *pgconn.PgError) bool {
	return err.ConstraintName == "charge_attempts_request_key" || err.ConstraintName == ""
}
