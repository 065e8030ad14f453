package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlepay/settle/internal/batch"
	"github.com/settlepay/settle/internal/order"
)

// Creates and claims are grouped as settles are (settle.go): while one
// statement of a kind is in flight, the calls that arrive wait and go
// together in the next, one row each, so that under load many orders share
// a round trip and a commit. Each row keeps its own guard, conflict and
// idempotency in the statement; a call alone runs at once, with the
// statement's one-row form.

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

// createOrdersSQL creates orders in one statement; createOrderSQL is the
// same statement for one order, generated from it.
//
//go:generate go run gen_onerow.go sql/create_orders.sql sql/create_order.sql
//go:embed sql/create_orders.sql
var createOrdersSQL string

//go:embed sql/create_order.sql
var createOrderSQL string

// createdRow is what create_orders.sql returns: the i-th order (from 1)
// as it stands, and whether the statement created it.
type createdRow struct {
	I       int  `db:"i"`
	Created bool `db:"created"`
	orderRow
}

// created is one create's result in a group: the order that holds the
// reference, and whether the group created it.
type created struct {
	order   order.Order
	created bool
}

// newCreates returns the batcher of s's creates: one row per merchant
// reference in each group.
func newCreates(s *Store) *batch.Batcher[string, order.Order, created] {
	return batch.New(batch.Config[string, order.Order, created]{
		Run:     s.createOrders,
		Key:     func(o order.Order) string { return o.MerchantID + "\x00" + o.MerchantReference },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
}

// CreateOrder implements order.Store: the order shares a statement with
// whatever other creates are waiting (see package batch).
func (s *Store) CreateOrder(ctx context.Context, o order.Order) (order.Order, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	var r created
	if citus {
		// On Citus each create runs alone, whole on its merchant's worker
		// (migration 00016 says why).
		r, err = s.createOrderCitus(ctx, o)
	} else {
		r, err = s.creates.Do(ctx, o)
	}
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	got := r.order
	if !r.created && (got.Amount != o.Amount || got.PaymentMethod != o.PaymentMethod || got.Gateway != o.Gateway) {
		// The message does not repeat the reference: a client chose it, and
		// error messages are logged.
		return order.Order{}, &order.ConflictError{
			Msg: "merchant_reference already names an order with other amount, currency, payment_method or gateway"}
	}
	return got, nil
}

// createOrders inserts the orders news in one statement and one commit, each
// idempotent on its merchant reference as CreateOrder is. It returns, for
// each, the order that holds its reference and whether this call created
// it; it does not compare a found order's parameters with the one asked
// for (CreateOrder does). No merchant reference may appear twice in news.
// On Citus it creates each order alone, as CreateOrder does there.
func (s *Store) createOrders(ctx context.Context, news []order.Order) ([]created, error) {
	seen := make(map[string]bool, len(news))
	for _, o := range news {
		k := o.MerchantID + "\x00" + o.MerchantReference
		if seen[k] {
			return nil, errors.New("create orders: a merchant reference appears twice")
		}
		seen[k] = true
	}
	out := make([]created, len(news))
	if citus, err := s.onCitus(ctx); err != nil {
		return nil, err
	} else if citus {
		// On Citus each create runs alone on its merchant's worker (see
		// CreateOrder).
		for i, o := range news {
			if out[i], err = s.createOrderCitus(ctx, o); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	todo := make([]int, len(news)) // indexes into news of the creates without a result
	for i := range todo {
		todo[i] = i
	}
	// A reference that a concurrent statement inserted and committed after
	// this statement's snapshot returns no row (see create_orders.sql); the
	// next run of the statement sees it.
	for range 3 {
		var err error
		if todo, err = s.createSome(ctx, news, todo, out); err != nil {
			return nil, err
		}
		if len(todo) == 0 {
			return out, nil
		}
	}
	return nil, errors.New("conflicting insert never became visible")
}

// createSome runs create_orders.sql once for news[i] for each i in todo,
// sets out[i] for each that returned a row, and returns those that did not.
func (s *Store) createSome(ctx context.Context, news []order.Order, todo []int, out []created) ([]int, error) {
	n := len(todo)
	var (
		ids      = make([]string, n)
		merchant = make([]string, n)
		ref      = make([]string, n)
		amount   = make([]int64, n)
		currency = make([]string, n)
		method   = make([]string, n)
		gateway  = make([]string, n)
		state    = make([]string, n)
	)
	for k, i := range todo {
		o := news[i]
		ids[k], merchant[k], ref[k], amount[k] = o.ID, o.MerchantID, o.MerchantReference, o.Amount.AmountMinor
		currency[k], method[k], gateway[k], state[k] = o.Amount.Currency, o.PaymentMethod, o.Gateway, string(o.State)
	}
	idUUIDs, err := uuids(ids)
	if err != nil {
		return nil, fmt.Errorf("order %w", err)
	}
	args := pgx.StrictNamedArgs{
		"id": idUUIDs, "merchant_id": merchant, "merchant_reference": ref, "amount_minor": amount, "currency": currency,
		"payment_method": method, "gateway": gateway, "state": state, "event": order.EventCreate,
	}
	sql := createOrdersSQL
	if n == 1 {
		sql = createOrderSQL
		oneRow(args)
	}
	var rows []createdRow
	err = retry(ctx, func() (err error) {
		rows, err = queryAll[createdRow](ctx, s.pool, sql, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	seen := make([]bool, n)
	for _, r := range rows {
		seen[r.I-1] = true
		out[todo[r.I-1]] = created{order: r.order(), created: r.Created}
	}
	var missing []int
	for k, i := range todo {
		if !seen[k] {
			missing = append(missing, i)
		}
	}
	return missing, nil
}

// claimsSQL claims orders in one statement; its comments say how it
// serializes claims and why its guard is checked where it is. claimSQL is
// the same statement for one claim, generated from it.
//
//go:generate go run gen_onerow.go sql/claims.sql sql/claim.sql
//go:embed sql/claims.sql
var claimsSQL string

//go:embed sql/claim.sql
var claimSQL string

// claimRow is what claims.sql returns for the i-th claim (from 1); an
// attempt ID of ” means no attempt.
type claimRow struct {
	I       int  `db:"i"`
	Claimed bool `db:"claimed"`
	orderRow
	attemptRow
}

// claimed is one claim's result in a group, or the error of that claim
// alone (its order does not exist).
type claimed struct {
	res order.ClaimResult
	err error
}

// newClaims returns the batcher of s's claims: one claim per order in each
// group, so that the statement never has to choose between two claims of
// one order.
func newClaims(s *Store) *batch.Batcher[string, order.Claim, claimed] {
	return batch.New(batch.Config[string, order.Claim, claimed]{
		Run:     s.claimMany,
		Key:     func(c order.Claim) string { return c.OrderID },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
}

// Claim implements order.Store: the claim shares a statement with whatever
// other claims are waiting (see package batch).
func (s *Store) Claim(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return order.ClaimResult{}, err
	}
	if citus {
		// On Citus each claim runs alone, whole on its merchant's worker
		// (migration 00016 says why).
		return s.claimCitus(ctx, c)
	}
	r, err := s.claims.Do(ctx, c)
	if err != nil {
		return order.ClaimResult{}, err
	}
	return r.res, r.err
}

// claimMany makes the claims cs in one statement and one commit, each
// guarded and idempotent as Claim's is. It returns, for each claim, its
// result or its own error (order.ErrNotFound: no such order of its
// merchant); an error of the statement fails them all. No order may appear
// twice in cs: which of two claims of one order the statement would make
// is undefined, so claimMany refuses the call. On Citus it makes each claim
// alone, as Claim does there.
func (s *Store) claimMany(ctx context.Context, cs []order.Claim) ([]claimed, error) {
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		if seen[c.OrderID] {
			return nil, fmt.Errorf("claim: order %s appears twice", c.OrderID)
		}
		seen[c.OrderID] = true
	}
	out := make([]claimed, len(cs))
	if citus, err := s.onCitus(ctx); err != nil {
		return nil, err
	} else if citus {
		// On Citus each claim runs alone on its merchant's worker (see
		// Claim); an error of one fails only its own.
		for i, c := range cs {
			out[i].res, out[i].err = s.claimCitus(ctx, c)
		}
		return out, nil
	}
	if err := s.claimSome(ctx, cs, out); err != nil {
		return nil, err
	}
	// A claim that made no attempt and saw none may have met an attempt of
	// its request id that a concurrent claim committed after the
	// statement's snapshot was taken: the insert did nothing, and the
	// snapshot does not hold the attempt. Those claims run once more, in a
	// statement whose snapshot holds it, so that the order and the attempt
	// of each reply are read together; the attempt read alone would go
	// with an order read earlier, which its settle may have moved since.
	var again []order.Claim
	var at []int
	for i, r := range out {
		if r.err == nil && !r.res.Claimed && r.res.Attempt == nil {
			again, at = append(again, cs[i]), append(at, i)
		}
	}
	if len(again) == 0 {
		return out, nil
	}
	rerun := make([]claimed, len(again))
	if err := s.claimSome(ctx, again, rerun); err != nil {
		// Their own second run failed: the others stand.
		for _, i := range at {
			out[i].err = err
		}
		return out, nil
	}
	for k, i := range at {
		out[i] = rerun[k]
	}
	return out, nil
}

// claimSome runs claims.sql once for cs, whose orders differ, and sets
// out[i] to claim i's result, or to order.ErrNotFound when its order does
// not exist.
func (s *Store) claimSome(ctx context.Context, cs []order.Claim, out []claimed) error {
	n := len(cs)
	var (
		merchant = make([]string, n)
		orderIDs = make([]string, n)
		request  = make([]string, n)
		attIDs   = make([]string, n)
		method   = make([]string, n)
		customer = make([]string, n)
		from     = make([]string, n)
		to       = make([]string, n)
		lease    = make([]time.Duration, n)
		event    = make([]string, n)
		actor    = make([]string, n)
	)
	for i, c := range cs {
		merchant[i], orderIDs[i], request[i], attIDs[i] = c.MerchantID, c.OrderID, c.RequestID, c.AttemptID
		method[i], customer[i], from[i], to[i] = c.PaymentMethod, c.Customer, string(c.From), string(c.To)
		lease[i], event[i], actor[i] = c.Lease, string(c.Event), string(c.Actor)
	}
	orderUUIDs, err := uuids(orderIDs)
	if err != nil {
		return fmt.Errorf("claim: order %w", err)
	}
	attUUIDs, err := uuids(attIDs)
	if err != nil {
		return fmt.Errorf("claim: attempt %w", err)
	}
	args := pgx.StrictNamedArgs{
		"merchant_id": merchant, "order_id": orderUUIDs, "request_id": request, "attempt_id": attUUIDs,
		"payment_method": method, "customer": customer, "from_state": from, "to_state": to, "lease": lease,
		"event": event, "actor": actor,
	}
	sql := claimsSQL
	if n == 1 {
		sql = claimSQL
		oneRow(args)
	}
	return retry(ctx, func() error {
		rows, err := queryAll[claimRow](ctx, s.pool, sql, args)
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = claimed{err: order.ErrNotFound}
		}
		for _, r := range rows {
			res := order.ClaimResult{Order: r.order(), Claimed: r.Claimed}
			if r.attemptRow.ID != "" {
				a := r.attempt()
				res.Attempt = &a
			}
			out[r.I-1] = claimed{res: res}
		}
		return nil
	})
}

// createClaimedManySQL creates orders already claimed for their first
// attempts in one statement; createClaimedSQL is the same statement for one
// order, generated from it.
//
//go:generate go run gen_onerow.go sql/create_claimed_many.sql sql/create_claimed.sql
//go:embed sql/create_claimed_many.sql
var createClaimedManySQL string

//go:embed sql/create_claimed.sql
var createClaimedSQL string

// createClaimedRow is what create_claimed_many.sql returns for the i-th
// order (from 1).
type createClaimedRow struct {
	I int `db:"i"`
	orderRow
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

// newCreateClaims returns the batcher of s's CreateClaimed calls: one row
// per merchant reference in each group. A request id that is taken fails
// the group's statement, which is then run again order by order, so that
// only the order that took it fails.
func newCreateClaims(s *Store) *batch.Batcher[string, newClaimed, createdClaimed] {
	return batch.New(batch.Config[string, newClaimed, createdClaimed]{
		Run:     s.createClaimedMany,
		Key:     func(n newClaimed) string { return n.order.MerchantID + "\x00" + n.order.MerchantReference },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
}

// CreateClaimed implements order.Store: the order shares a statement with
// whatever other CreateClaimed calls are waiting (see package batch).
func (s *Store) CreateClaimed(ctx context.Context, o order.Order, c order.Claim) (order.Order, order.Attempt, bool, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return order.Order{}, order.Attempt{}, false, err
	}
	var r createdClaimed
	if citus {
		// On Citus each runs alone, whole on its merchant's worker
		// (migration 00016 says why).
		r, err = s.createClaimedCitus(ctx, o, c)
	} else {
		r, err = s.createClaims.Do(ctx, newClaimed{o, c})
	}
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

// createClaimedMany runs create_claimed_many.sql for ns, whose merchant
// references differ, and returns each one's result.
func (s *Store) createClaimedMany(ctx context.Context, ns []newClaimed) ([]createdClaimed, error) {
	n := len(ns)
	var (
		ids      = make([]string, n)
		merchant = make([]string, n)
		ref      = make([]string, n)
		amount   = make([]int64, n)
		currency = make([]string, n)
		method   = make([]string, n)
		gateway  = make([]string, n)
		to       = make([]string, n)
		attIDs   = make([]string, n)
		lease    = make([]time.Duration, n)
		request  = make([]string, n)
		from     = make([]string, n)
		event    = make([]string, n)
		actor    = make([]string, n)
		customer = make([]string, n)
	)
	for i, nc := range ns {
		o, c := nc.order, nc.claim
		ids[i], merchant[i], ref[i], amount[i] = o.ID, o.MerchantID, o.MerchantReference, o.Amount.AmountMinor
		currency[i], method[i], gateway[i], to[i] = o.Amount.Currency, o.PaymentMethod, o.Gateway, string(c.To)
		attIDs[i], lease[i], request[i], from[i] = c.AttemptID, c.Lease, c.RequestID, string(c.From)
		event[i], actor[i], customer[i] = string(c.Event), string(c.Actor), c.Customer
	}
	idUUIDs, err := uuids(ids)
	if err != nil {
		return nil, fmt.Errorf("create claimed: order %w", err)
	}
	attUUIDs, err := uuids(attIDs)
	if err != nil {
		return nil, fmt.Errorf("create claimed: attempt %w", err)
	}
	args := pgx.StrictNamedArgs{
		"id": idUUIDs, "merchant_id": merchant, "merchant_reference": ref, "amount_minor": amount, "currency": currency,
		"payment_method": method, "gateway": gateway, "to_state": to, "attempt_id": attUUIDs, "lease": lease,
		"request_id": request, "from_state": from, "create_event": order.EventCreate, "claim_event": event, "actor": actor,
		"customer": customer,
	}
	sql := createClaimedManySQL
	if n == 1 {
		sql = createClaimedSQL
		oneRow(args)
	}
	var rows []createClaimedRow
	err = retry(ctx, func() (err error) {
		rows, err = queryAll[createClaimedRow](ctx, s.pool, sql, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]createdClaimed, n)
	for _, r := range rows {
		out[r.I-1] = createdClaimed{order: r.order(), attempt: r.attempt(), created: true}
	}
	return out, nil
}
