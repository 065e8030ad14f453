package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
)

// Store is order.Store on PostgreSQL. The charge path's claim and settle are
// one statement each (data-modifying CTEs), so each costs one round trip and
// one commit (concurrent settles share theirs: see settleGroup); a row lock
// is held only for the length of that statement.
type Store struct {
	pool    *pgxpool.Pool
	settles settleGroup
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// orderColumns selects an order from a relation {r} shaped like orders.
const orderColumns = `{r}.id::text, {r}.merchant_id, {r}.merchant_reference, {r}.amount_minor, {r}.currency,
	{r}.payment_method, {r}.gateway, {r}.state, coalesce({r}.current_attempt::text, ''), {r}.reconcile_at,
	{r}.reconcile_count, {r}.last_error, {r}.created_at, {r}.updated_at`

// attemptColumns selects an attempt from a relation {r} shaped like
// charge_attempts; every column is coalesced, so that it also reads the
// missing side of an outer join (as an attempt with no ID).
const attemptColumns = `coalesce({r}.id::text, ''), coalesce({r}.order_id::text, ''), coalesce({r}.request_id, ''),
	coalesce({r}.payment_method, ''), coalesce({r}.amount_minor, 0), coalesce({r}.currency, ''),
	coalesce({r}.outcome, ''), coalesce({r}.decline_code, ''), coalesce({r}.gateway_charge_id, ''),
	coalesce({r}.created_at, 'epoch')`

func replaceAll(s string, oldnew ...string) string { return strings.NewReplacer(oldnew...).Replace(s) }

func orderCols(rel string) string   { return strings.ReplaceAll(orderColumns, "{r}", rel) }
func attemptCols(rel string) string { return strings.ReplaceAll(attemptColumns, "{r}", rel) }

// orderRow scans what orderCols selects, with reconcile_at nullable.
type orderRow struct {
	o           order.Order
	reconcileAt *time.Time
}

func (r *orderRow) dest() []any {
	o := &r.o
	return []any{&o.ID, &o.MerchantID, &o.MerchantReference, &o.Amount.AmountMinor, &o.Amount.Currency,
		&o.PaymentMethod, &o.Gateway, &o.State, &o.CurrentAttempt, &r.reconcileAt, &o.ReconcileCount,
		&o.LastError, &o.CreatedAt, &o.UpdatedAt}
}

func (r *orderRow) order() order.Order {
	if r.reconcileAt != nil {
		r.o.ReconcileAt = *r.reconcileAt
	}
	return r.o
}

func attemptDest(a *order.Attempt) []any {
	return []any{&a.ID, &a.OrderID, &a.RequestID, &a.PaymentMethod, &a.Amount.AmountMinor, &a.Amount.Currency,
		&a.Outcome, &a.DeclineCode, &a.GatewayChargeID, &a.CreatedAt}
}

// scanOrder scans extra columns, then an order; no row is order.ErrNotFound.
func scanOrder(row pgx.Row, extra ...any) (order.Order, error) {
	var r orderRow
	if err := row.Scan(append(extra, r.dest()...)...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return order.Order{}, order.ErrNotFound
		}
		return order.Order{}, err
	}
	return r.order(), nil
}

func scanAttempt(row pgx.Row) (order.Attempt, error) {
	var a order.Attempt
	err := row.Scan(attemptDest(&a)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, order.ErrNotFound
	}
	return a, err
}

// CreateOrder implements order.Store.
func (s *Store) CreateOrder(ctx context.Context, o order.Order) (order.Order, error) {
	q := `
WITH ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor)
	SELECT id, NULL, state, $9, 'api' FROM ins
)
SELECT true, ` + orderCols("ins") + ` FROM ins
UNION ALL
SELECT false, ` + orderCols("orders") + ` FROM orders
WHERE merchant_id = $2 AND merchant_reference = $3 AND NOT EXISTS (SELECT 1 FROM ins)`
	var (
		got     order.Order
		created bool
	)
	err := retry(ctx, func() error {
		// A concurrent insert of the same reference that commits after this
		// statement's snapshot conflicts but is invisible to the fallback
		// SELECT; the next run of the statement sees it.
		for range 3 {
			var err error
			got, err = scanOrder(s.pool.QueryRow(ctx, q, o.ID, o.MerchantID, o.MerchantReference,
				o.Amount.AmountMinor, o.Amount.Currency, o.PaymentMethod, o.Gateway, o.State, order.EventCreate), &created)
			if !errors.Is(err, order.ErrNotFound) {
				return err
			}
		}
		return errors.New("create order: conflicting insert never became visible")
	})
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	if !created && (got.Amount != o.Amount || got.PaymentMethod != o.PaymentMethod || got.Gateway != o.Gateway) {
		// The message does not repeat the reference: a client chose it, and
		// error messages are logged.
		return order.Order{}, &order.ConflictError{
			Msg: "merchant_reference already names an order with other amount, currency, payment_method or gateway"}
	}
	return got, nil
}

// Order implements order.Store.
func (s *Store) Order(ctx context.Context, merchantID, id string) (order.Order, error) {
	var o order.Order
	err := retry(ctx, func() (err error) {
		o, err = scanOrder(s.pool.QueryRow(ctx,
			`SELECT `+orderCols("orders")+` FROM orders WHERE id = $1 AND ($2 = '' OR merchant_id = $2)`, id, merchantID))
		return err
	})
	return o, err
}

// OrderByReference implements order.Store.
func (s *Store) OrderByReference(ctx context.Context, merchantID, ref string) (order.Order, error) {
	var o order.Order
	err := retry(ctx, func() (err error) {
		o, err = scanOrder(s.pool.QueryRow(ctx,
			`SELECT `+orderCols("orders")+` FROM orders WHERE merchant_id = $1 AND merchant_reference = $2`, merchantID, ref))
		return err
	})
	return o, err
}

// Attempt implements order.Store.
func (s *Store) Attempt(ctx context.Context, id string) (order.Attempt, error) {
	var a order.Attempt
	err := retry(ctx, func() (err error) {
		a, err = scanAttempt(s.pool.QueryRow(ctx,
			`SELECT `+attemptCols("charge_attempts")+` FROM charge_attempts WHERE id = $1`, id))
		return err
	})
	return a, err
}

// claimSQL claims an order in one statement. The FOR UPDATE in ord waits for
// any other claim or settle of the order and then sees its latest version,
// so two claims of one order are serialized and only one finds it PENDING.
// The unique (merchant_id, request_id) key makes a request id name one
// attempt, even when two claims with it race.
//
// The guard is checked once, in att, on the latest version that ord holds
// locked; upd must not check it again. Its scan sees the statement's
// snapshot, which can predate a settle that ord waited for: a claim that
// began while the previous attempt's settle (CHARGING to PENDING) held the
// row would see CHARGING there and skip the row, leaving the attempt that
// att inserted without its claim.
var claimSQL = `
WITH ord AS (
	SELECT * FROM orders WHERE id = $1 AND merchant_id = $2 FOR UPDATE
), prior AS (
	SELECT * FROM charge_attempts WHERE merchant_id = $2 AND request_id = $3
), att AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
	SELECT $4, ord.id, $2, $3, coalesce(nullif($5, ''), ord.payment_method), ord.amount_minor, ord.currency
	FROM ord WHERE ` + claimGuard("ord") + ` AND NOT EXISTS (SELECT 1 FROM prior)
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET state = $7, current_attempt = att.id, reconcile_at = now() + $8::interval,
		reconcile_count = 0, last_error = '', updated_at = now()
	FROM att WHERE o.id = att.order_id
	RETURNING o.*
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, attempt_id)
	SELECT id, $6, state, $9, $10, current_attempt FROM upd
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd)
), a AS (
	SELECT * FROM att UNION ALL SELECT * FROM prior
)
SELECT cur.claimed, ` + orderCols("cur") + `, ` + attemptCols("a") + `
FROM cur LEFT JOIN a ON true`

// Claim implements order.Store.
func (s *Store) Claim(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	var res order.ClaimResult
	err := retry(ctx, func() error {
		var (
			r       orderRow
			a       order.Attempt
			claimed bool
		)
		err := s.pool.QueryRow(ctx, claimSQL, c.OrderID, c.MerchantID, c.RequestID, c.AttemptID, c.PaymentMethod,
			c.From, c.To, c.Lease, c.Event, c.Actor).Scan(append(append([]any{&claimed}, r.dest()...), attemptDest(&a)...)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return order.ErrNotFound
		}
		if err != nil {
			return err
		}
		res = order.ClaimResult{Order: r.order(), Claimed: claimed}
		if a.ID != "" {
			res.Attempt = &a
			return nil
		}
		// Not claimed and no earlier attempt seen: the request id may have
		// been used by a claim that committed after this statement began.
		a, err = s.attemptByRequest(ctx, c.MerchantID, c.RequestID)
		switch {
		case errors.Is(err, order.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		res.Attempt = &a
		return nil
	})
	return res, err
}

func (s *Store) attemptByRequest(ctx context.Context, merchantID, requestID string) (order.Attempt, error) {
	return scanAttempt(s.pool.QueryRow(ctx, `SELECT `+attemptCols("charge_attempts")+
		` FROM charge_attempts WHERE merchant_id = $1 AND request_id = $2`, merchantID, requestID))
}

// createClaimedSQL creates an order already claimed for its first attempt:
// the order, the attempt and both events (create, charge) in one statement
// and one commit. It inserts nothing when the merchant reference is taken;
// a request id that is taken fails the statement as a whole.
var createClaimedSQL = `
WITH o AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		state, current_attempt, reconcile_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + $10::interval)
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), a AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
	SELECT current_attempt, id, merchant_id, $11, payment_method, amount_minor, currency FROM o
	RETURNING *
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, attempt_id)
	SELECT id, NULL, $12, $13, $15, NULL FROM o
	UNION ALL
	SELECT id, $12, state, $14, $15, current_attempt FROM o
)
SELECT ` + orderCols("o") + `, ` + attemptCols("a") + ` FROM o JOIN a ON a.order_id = o.id`

// CreateClaimed implements order.Store.
func (s *Store) CreateClaimed(ctx context.Context, o order.Order, c order.Claim) (order.Order, order.Attempt, bool, error) {
	var (
		r orderRow
		a order.Attempt
	)
	err := retry(ctx, func() error {
		return s.pool.QueryRow(ctx, createClaimedSQL, o.ID, o.MerchantID, o.MerchantReference, o.Amount.AmountMinor,
			o.Amount.Currency, o.PaymentMethod, o.Gateway, c.To, c.AttemptID, c.Lease, c.RequestID, c.From,
			order.EventCreate, c.Event, c.Actor).Scan(append(r.dest(), attemptDest(&a)...)...)
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return order.Order{}, order.Attempt{}, false, nil // the reference is taken
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "charge_attempts_request_key":
		// The reference was free (its insert went through), so the request
		// id names an attempt of another order. The statement failed as a
		// whole: nothing was created.
		return order.Order{}, order.Attempt{}, false, &order.ConflictError{Msg: order.MsgRequestIDOtherOrder}
	case err != nil:
		return order.Order{}, order.Attempt{}, false, err
	}
	return r.order(), a, true, nil
}

// Transition implements order.Store.
func (s *Store) Transition(ctx context.Context, merchantID, id string, decide func(order.Order) (order.Move, error)) (order.Order, error) {
	var o order.Order
	err := withTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanOrder(tx.QueryRow(ctx, `SELECT `+orderCols("orders")+` FROM orders
			WHERE id = $1 AND ($2 = '' OR merchant_id = $2) FOR UPDATE`, id, merchantID))
		if err != nil {
			return err
		}
		m, err := decide(cur)
		if err != nil {
			return err
		}
		var res order.Result
		if m.Attempt != nil {
			res = *m.Attempt
		}
		o, err = scanOrder(tx.QueryRow(ctx, `
WITH upd AS (
	UPDATE orders SET state = $3, reconcile_at = NULL, updated_at = now()
	WHERE id = $1 AND state = $2
	RETURNING *
), att AS (
	UPDATE charge_attempts SET outcome = $4, decline_code = $5, gateway_charge_id = $6, settled_at = now()
	WHERE $4 <> '' AND id = (SELECT current_attempt FROM upd)
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT id, $2, state, $7, $8, $9, current_attempt FROM upd
)
SELECT `+orderCols("upd")+` FROM upd`, cur.ID, cur.State, m.To, res.Outcome, res.DeclineCode, res.ChargeID,
			m.Event, m.Actor, truncate(m.Reason, 1000)))
		return err
	})
	return o, err
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
