package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlepay/settle/internal/order"
)

// The checkout path's creates and claims. How each is sent is the
// engine's (on PostgreSQL grouped with the concurrent calls of its kind,
// see engine_postgres.go; on Citus alone, see engine_citus.go); what the
// store checks before and after is here.

// maxGroup bounds the rows of a grouped create or claim.
const maxGroup = 64

// isolate says which failures of a group are worth running its calls
// again one by one: all but the database being unavailable, which would
// fail each of them alone too.
func isolate(err error) bool { return !errors.Is(err, order.ErrUnavailable) }

// oneRow turns the array arguments of a grouped statement into those of
// its one-row form, each array's only element.
func oneRow(args pgx.StrictNamedArgs) {
	for k, v := range args {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
			args[k] = rv.Index(0).Interface()
		}
	}
}

// createdRow is what create_orders.sql returns: the i-th order (from 1)
// as it stands, and whether the statement created it.
type createdRow struct {
	I       int  `db:"i"`
	Created bool `db:"created"`
	modedOrderRow
}

// modedOrderRow is an order with its capture mode, as the statements of
// the charge path select it: the charge needs the mode (a capture-manual
// order's charge authorizes), the rest of the hold it does not.
type modedOrderRow struct {
	orderRow
	CaptureMode string `db:"capture_mode"`
}

func (r modedOrderRow) order() order.Order {
	o := r.orderRow.order()
	o.Capture = order.CaptureMode(r.CaptureMode)
	return o
}

// created is one create's result in a group: the order that holds the
// reference, and whether the group created it.
type created struct {
	order   order.Order
	created bool
}

// CreateOrder implements order.Store: the order shares a statement with
// whatever other creates are waiting (see package batch).
func (s *Store) CreateOrder(ctx context.Context, o order.Order) (order.Order, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	r, err := e.createOrder(ctx, o)
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	got := r.order
	if r.created {
		got.Routes = o.Routes
		return got, nil
	}
	same, err := s.sameOrder(ctx, got, o)
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	if !same {
		// The message does not repeat the reference: a client chose it, and
		// error messages are logged.
		return order.Order{}, &order.ConflictError{
			Msg: "merchant_reference already names an order with other amount, currency, payment_method, gateway, routes or capture"}
	}
	return got, nil
}

// createOrders inserts the orders news in one statement and one commit, each
// idempotent on its merchant reference as CreateOrder is. It returns, for
// each, the order that holds its reference and whether this call created
// it; it does not compare a found order's parameters with the one asked
// for (CreateOrder does). No merchant reference may appear twice in news.
// On Citus it creates each order alone.
func (s *Store) createOrders(ctx context.Context, news []order.Order) ([]created, error) {
	seen := make(map[string]bool, len(news))
	for _, o := range news {
		k := o.MerchantID + "\x00" + o.MerchantReference
		if seen[k] {
			return nil, errors.New("create orders: a merchant reference appears twice")
		}
		seen[k] = true
	}
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.createOrders(ctx, news)
}

// claimRow is what claims.sql returns for the i-th claim (from 1); an
// attempt ID of ” means no attempt.
type claimRow struct {
	I       int  `db:"i"`
	Claimed bool `db:"claimed"`
	modedOrderRow
	attemptRow
}

// claimed is one claim's result in a group, or the error of that claim
// alone (its order does not exist).
type claimed struct {
	res order.ClaimResult
	err error
}

// Claim implements order.Store: the claim shares a statement with whatever
// other claims are waiting (see package batch).
func (s *Store) Claim(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.ClaimResult{}, err
	}
	return e.claim(ctx, c)
}

// claimMany makes the claims cs in one statement and one commit, each
// guarded and idempotent as Claim's is. It returns, for each claim, its
// result or its own error (order.ErrNotFound: no such order of its
// merchant); an error of the statement fails them all. No order may appear
// twice in cs: which of two claims of one order the statement would make
// is undefined, so claimMany refuses the call. On Citus it makes each claim
// alone.
func (s *Store) claimMany(ctx context.Context, cs []order.Claim) ([]claimed, error) {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		if seen[c.OrderID] {
			return nil, fmt.Errorf("claim: order %s appears twice", c.OrderID)
		}
		seen[c.OrderID] = true
	}
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimMany(ctx, cs)
}

// createClaimedRow is what create_claimed_orders.sql returns for the i-th
// order (from 1).
type createClaimedRow struct {
	I int `db:"i"`
	modedOrderRow
	attemptRow
}

// newClaimed is an order to create already claimed, and its claim.
type newClaimed struct {
	order order.Order
	claim order.Claim
}

// createdClaimed is one order's result in a grouped create-and-claim:
// the order and its attempt, or created false when its reference was taken.
type createdClaimed struct {
	order   order.Order
	attempt order.Attempt
	created bool
}

// CreateClaimed implements order.Store: the order shares a statement with
// whatever other CreateClaimed calls are waiting (see package batch).
func (s *Store) CreateClaimed(ctx context.Context, o order.Order, c order.Claim) (order.Order, order.Attempt, bool, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, order.Attempt{}, false, err
	}
	r, err := e.createClaimed(ctx, o, c)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && isRequestKey(pgErr):
		// The reference was free (its insert went through), so the request
		// id names an attempt of another order. The statement failed as a
		// whole: nothing was created.
		return order.Order{}, order.Attempt{}, false, &order.ConflictError{Msg: order.MsgRequestIDOtherOrder}
	case err != nil:
		return order.Order{}, order.Attempt{}, false, err
	}
	return r.order, r.attempt, r.created, nil
}
