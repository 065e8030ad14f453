package postgres

import (
	"context"
	_ "embed"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/batch"
	"github.com/settlepay/settle/internal/order"
)

// Store is order.Store on PostgreSQL. The charge path's create, claim and
// settle are one statement each (data-modifying CTEs), so each costs one
// round trip and one commit, which concurrent calls of one kind share (see
// newCreates, newClaims, newCreateClaims and newSettles); a row lock is held
// only for the length of that statement.
type Store struct {
	pool         *pgxpool.Pool
	creates      *batch.Batcher[string, order.Order, created]
	claims       *batch.Batcher[string, order.Claim, claimed]
	createClaims *batch.Batcher[string, newClaimed, createdClaimed]
	settles      *batch.Batcher[string, order.Settlement, settled]
	// citusSettles holds, on Citus, one settle batcher per merchant (see
	// merchantSettles).
	citusSettles sync.Map
	// polled holds, on Citus, the orders that this process's WatchOrder
	// streams watch (see pollWatched).
	polled pollWatches
	engine engine
}

// engine remembers whether the database is Citus, asked once.
type engine struct {
	mu    sync.Mutex
	known bool
	citus bool
}

//go:embed sql/is_citus.sql
var isCitusSQL string

// onCitus reports whether the database is Citus (the citus extension is
// installed). A few operations that Citus runs on one shard only (a lease
// over every merchant, a settle of several merchants' orders) take another
// path there; docs/operations.md ("Settle on Citus") says which.
func (s *Store) onCitus(ctx context.Context) (bool, error) {
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if s.engine.known {
		return s.engine.citus, nil
	}
	err := retry(ctx, func() error {
		r, err := queryOne[struct {
			Citus bool `db:"citus"`
		}](ctx, s.pool, isCitusSQL, nil)
		s.engine.citus = r.Citus
		return err
	})
	if err != nil {
		return false, err
	}
	s.engine.known = true
	return s.engine.citus, nil
}

// forEngine returns plain on PostgreSQL and, on Citus, citus: the same
// work as a call of a function that Citus runs whole on the merchant's
// worker (migration 00016 says why).
func (s *Store) forEngine(ctx context.Context, plain, citus string) (string, error) {
	on, err := s.onCitus(ctx)
	if on {
		return citus, err
	}
	return plain, err
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool}
	s.creates, s.claims, s.settles = newCreates(s), newClaims(s), newSettles(s)
	s.createClaims = newCreateClaims(s)
	return s
}

//go:embed sql/citus_create_order.sql
var citusCreateOrderSQL string

// citusCreatedRow is what citus_create_order.sql returns.
type citusCreatedRow struct {
	Created bool `db:"created"`
	orderRow
}

// createOrderCitus is CreateOrder on Citus: one order alone, through the
// function that Citus runs whole on the merchant's worker. It returns the
// order that holds the reference and whether it created it.
func (s *Store) createOrderCitus(ctx context.Context, o order.Order) (created, error) {
	var r citusCreatedRow
	err := retry(ctx, func() error {
		// A concurrent insert of the same reference that commits after this
		// statement's snapshot conflicts but is invisible to the fallback
		// SELECT; the next run of the statement sees it.
		for range 3 {
			var err error
			r, err = queryOne[citusCreatedRow](ctx, s.pool, citusCreateOrderSQL, pgx.StrictNamedArgs{
				"id": o.ID, "merchant_id": o.MerchantID, "merchant_reference": o.MerchantReference,
				"amount_minor": o.Amount.AmountMinor, "currency": o.Amount.Currency, "payment_method": o.PaymentMethod,
				"gateway": o.Gateway, "state": o.State, "event": order.EventCreate,
			})
			if !errors.Is(err, order.ErrNotFound) {
				return err
			}
		}
		return errors.New("create order: conflicting insert never became visible")
	})
	return created{order: r.order(), created: r.Created}, err
}

//go:embed sql/order_by_id.sql
var orderByIDSQL string

// Order implements order.Store.
func (s *Store) Order(ctx context.Context, scope order.Scope, id string) (order.Order, error) {
	var r refundedOrderRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[refundedOrderRow](ctx, s.pool, orderByIDSQL, pgx.StrictNamedArgs{
			"id": id, "any_merchant": scope.IsAnyMerchant(), "merchant_id": scope.MerchantID(),
		})
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

//go:embed sql/attempt_by_id.sql
var attemptByIDSQL string

// Attempt implements order.Store.
func (s *Store) Attempt(ctx context.Context, merchantID, id string) (order.Attempt, error) {
	var r attemptRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[attemptRow](ctx, s.pool, attemptByIDSQL,
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

//go:embed sql/citus_claim.sql
var citusClaimSQL string

// citusClaimRow is what citus_claim.sql returns; an attempt ID of ” means
// no attempt.
type citusClaimRow struct {
	Claimed bool `db:"claimed"`
	orderRow
	attemptRow
}

// claimCitus is Claim on Citus: one claim alone, through the function
// that Citus runs whole on the merchant's worker. A claim that made no
// attempt and saw none runs once more, as claimMany's do, and for the same
// reason: the request id may have been used by a claim that committed
// while the function ran.
func (s *Store) claimCitus(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	var res order.ClaimResult
	for run := 0; run < 2 && !res.Claimed && res.Attempt == nil; run++ {
		err := retry(ctx, func() error {
			r, err := queryOne[citusClaimRow](ctx, s.pool, citusClaimSQL, pgx.StrictNamedArgs{
				"order_id": c.OrderID, "merchant_id": c.MerchantID, "request_id": c.RequestID, "attempt_id": c.AttemptID,
				"payment_method": c.PaymentMethod, "customer": c.Customer, "from_state": c.From, "to_state": c.To,
				"lease": c.Lease, "event": c.Event, "actor": c.Actor,
			})
			if err != nil {
				return err
			}
			res = order.ClaimResult{Order: r.order(), Claimed: r.Claimed}
			if r.attemptRow.ID != "" {
				a := r.attempt()
				res.Attempt = &a
			}
			return nil
		})
		if err != nil {
			return order.ClaimResult{}, err
		}
	}
	return res, nil
}

//go:embed sql/citus_create_claimed.sql
var citusCreateClaimedSQL string

// citusCreateClaimedRow is what citus_create_claimed.sql returns.
type citusCreateClaimedRow struct {
	orderRow
	attemptRow
}

// createClaimedCitus is CreateClaimed on Citus: one order alone, through
// the function that Citus runs whole on the merchant's worker; see
// CreateClaimed for what it returns.
func (s *Store) createClaimedCitus(ctx context.Context, o order.Order, c order.Claim) (createdClaimed, error) {
	var r citusCreateClaimedRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[citusCreateClaimedRow](ctx, s.pool, citusCreateClaimedSQL, pgx.StrictNamedArgs{
			"id": o.ID, "merchant_id": o.MerchantID, "merchant_reference": o.MerchantReference,
			"amount_minor": o.Amount.AmountMinor, "currency": o.Amount.Currency, "payment_method": o.PaymentMethod,
			"gateway": o.Gateway, "to_state": c.To, "attempt_id": c.AttemptID, "lease": c.Lease,
			"request_id": c.RequestID, "from_state": c.From, "create_event": order.EventCreate,
			"claim_event": c.Event, "actor": c.Actor, "customer": c.Customer,
		})
		return err
	})
	if errors.Is(err, order.ErrNotFound) {
		return createdClaimed{}, nil // the reference is taken
	}
	return createdClaimed{order: r.order(), attempt: r.attempt(), created: err == nil}, err
}

//go:embed sql/lock_order.sql
var lockOrderSQL string

//go:embed sql/transition.sql
var transitionSQL string

//go:embed sql/citus_transition.sql
var citusTransitionSQL string

// Transition implements order.Store.
func (s *Store) Transition(ctx context.Context, scope order.Scope, id string, decide func(order.Order) (order.Move, error)) (order.Order, error) {
	merchantID, err := s.merchantOf(ctx, scope, id)
	if err != nil {
		return order.Order{}, err
	}
	sql, err := s.forEngine(ctx, transitionSQL, citusTransitionSQL)
	if err != nil {
		return order.Order{}, err
	}
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

// isRequestKey reports whether a unique violation of create_claimed.sql
// is charge_attempts_request_key's. Citus relays a worker's error without
// the constraint's name; there the statement's other keys cannot be the
// one violated (the order's reference is ON CONFLICT DO NOTHING, the ids
// are new random UUIDs), so a nameless violation is the request key's.
func isRequestKey(err *pgconn.PgError) bool {
	return err.ConstraintName == "charge_attempts_request_key" || err.ConstraintName == ""
}
