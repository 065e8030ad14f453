package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/batch"
	"github.com/settlepay/settle/internal/order"
)

// postgresEngine is the store on plain PostgreSQL. The checkout path's
// create, claim and settle are one statement each (data-modifying CTEs),
// so each costs one round trip and one commit, which concurrent calls of
// one kind share: while one statement of a kind is in flight, the calls
// that arrive wait and go together in the next, one row each (see package
// batch). Each row keeps its own guard, conflict and idempotency in the
// statement; a call alone runs at once, with the statement's one-row form.
// A row lock is held only for the length of that statement.
type postgresEngine struct {
	pool         *pgxpool.Pool
	creates      *batch.Batcher[string, order.Order, created]
	claims       *batch.Batcher[string, order.Claim, claimed]
	createClaims *batch.Batcher[string, newClaimed, createdClaimed]
	settles      *batch.Batcher[string, order.Settlement, settled]
	// The refund path's claims and settles, one per order in each group.
	refundClaims  *batch.Batcher[string, order.RefundClaim, refundClaimed]
	refundSettles *batch.Batcher[string, order.RefundSettlement, refundSettled]
}

func newPostgresEngine(pool *pgxpool.Pool) *postgresEngine {
	e := &postgresEngine{pool: pool}
	e.creates = batch.New(batch.Config[string, order.Order, created]{
		Run:     e.createOrders,
		Key:     func(o order.Order) string { return o.MerchantID + "\x00" + o.MerchantReference },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
	// One claim per order in each group, so that the statement never has
	// to choose between two claims of one order.
	e.claims = batch.New(batch.Config[string, order.Claim, claimed]{
		Run:     e.claimMany,
		Key:     func(c order.Claim) string { return c.OrderID },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
	// A request id that is taken fails the group's statement, which is
	// then run again order by order, so that only the order that took it
	// fails.
	e.createClaims = batch.New(batch.Config[string, newClaimed, createdClaimed]{
		Run:     e.createClaimedMany,
		Key:     func(n newClaimed) string { return n.order.MerchantID + "\x00" + n.order.MerchantReference },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
	e.settles = newSettles(e.settleMany)
	// One refund claim or settlement per order in each group: a refund's
	// claim and settle update its order's totals, which one statement
	// could not do twice.
	e.refundClaims = batch.New(batch.Config[string, order.RefundClaim, refundClaimed]{
		Run:     e.claimRefunds,
		Key:     func(c order.RefundClaim) string { return c.OrderID },
		MaxSize: maxGroup,
		Isolate: isolate,
	})
	e.refundSettles = batch.New(batch.Config[string, order.RefundSettlement, refundSettled]{
		Run:     e.settleRefunds,
		Key:     func(st order.RefundSettlement) string { return st.OrderID },
		MaxSize: maxSettleGroup,
		Isolate: isolate,
	})
	return e
}

//go:embed sql/transition.sql
var transitionSQL string

var postgresStatements = statements{
	transition:         transitionSQL,
	recordGatewayEvent: recordGatewayEventSQL,
	captureClaim:       captureClaimSQL,
	captureSettle:      captureSettleSQL,
	voidClaim:          voidClaimSQL,
	voidSettle:         voidSettleSQL,
	expireHold:         expireHoldSQL,
	disputeOrderEvent:  disputeOrderEventSQL,
}

func (e *postgresEngine) statements() *statements { return &postgresStatements }

// createOrdersSQL creates orders in one statement; createOrderSQL is the
// same statement for one order, generated from it.
//
//go:generate go run gen_onerow.go sql/create_orders.sql sql/create_order.sql
//go:embed sql/create_orders.sql
var createOrdersSQL string

//go:embed sql/create_order.sql
var createOrderSQL string

func (e *postgresEngine) createOrder(ctx context.Context, o order.Order) (created, error) {
	return e.creates.Do(ctx, o)
}

func (e *postgresEngine) createOrders(ctx context.Context, news []order.Order) ([]created, error) {
	out := make([]created, len(news))
	todo := make([]int, len(news)) // indexes into news of the creates without a result
	for i := range todo {
		todo[i] = i
	}
	// A reference that a concurrent statement inserted and committed after
	// this statement's snapshot returns no row (see create_orders.sql); the
	// next run of the statement sees it.
	for range 3 {
		var err error
		if todo, err = e.createSome(ctx, news, todo, out); err != nil {
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
func (e *postgresEngine) createSome(ctx context.Context, news []order.Order, todo []int, out []created) ([]int, error) {
	n := len(todo)
	var cols createColumns
	for _, i := range todo {
		cols.add(news[i])
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return nil, err
	}
	args["event"] = order.EventCreate
	sql := createOrdersSQL
	if n == 1 {
		sql = createOrderSQL
		oneRow(args)
	}
	var rows []createdRow
	err = retry(ctx, func() (err error) {
		rows, err = queryAll[createdRow](ctx, e.pool, sql, args)
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

func (e *postgresEngine) claim(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	r, err := e.claims.Do(ctx, c)
	if err != nil {
		return order.ClaimResult{}, err
	}
	return r.res, r.err
}

func (e *postgresEngine) claimMany(ctx context.Context, cs []order.Claim) ([]claimed, error) {
	return rerunUnseen(ctx, cs, e.claimSome, func(r claimed) bool { return r.err == nil && !r.res.Claimed && r.res.Attempt == nil },
		func(err error) claimed { return claimed{err: err} })
}

// rerunUnseen runs some over cs, then once more over the claims that
// unseen reports made nothing and saw nothing. Such a claim may have met
// a row of its request id that a concurrent claim committed after the
// statement's snapshot was taken: the insert did nothing, and the
// snapshot does not hold the row. Those claims run again, in a statement
// whose snapshot holds it, so that the order and the row of each reply
// are read together; the row read alone would go with an order read
// earlier, which its settle may have moved since. An error of the second
// run is failed's result for its claims alone.
func rerunUnseen[C, R any](ctx context.Context, cs []C, some func(context.Context, []C, []R) error,
	unseen func(R) bool, failed func(error) R) ([]R, error) {
	out := make([]R, len(cs))
	if err := some(ctx, cs, out); err != nil {
		return nil, err
	}
	var again []C
	var at []int
	for i, r := range out {
		if unseen(r) {
			again, at = append(again, cs[i]), append(at, i)
		}
	}
	if len(again) == 0 {
		return out, nil
	}
	rerun := make([]R, len(again))
	if err := some(ctx, again, rerun); err != nil {
		for _, i := range at {
			out[i] = failed(err)
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
func (e *postgresEngine) claimSome(ctx context.Context, cs []order.Claim, out []claimed) error {
	var cols claimColumns
	for _, c := range cs {
		cols.add(c)
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	sql := claimsSQL
	if len(cs) == 1 {
		sql = claimSQL
		oneRow(args)
	}
	return retry(ctx, func() error {
		rows, err := queryAll[claimRow](ctx, e.pool, sql, args)
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = claimed{err: order.ErrNotFound}
		}
		for _, r := range rows {
			res := order.ClaimResult{Order: r.order(), Claimed: r.Claimed}
			if r.ID != "" { // the attempt's id (the order's is one level deeper)
				a := r.attempt()
				res.Attempt = &a
			}
			out[r.I-1] = claimed{res: res}
		}
		return nil
	})
}

// createClaimedOrdersSQL creates orders already claimed for their first
// attempts in one statement; createClaimedOrderSQL is the same statement for one
// order, generated from it.
//
//go:generate go run gen_onerow.go sql/create_claimed_orders.sql sql/create_claimed_order.sql
//go:embed sql/create_claimed_orders.sql
var createClaimedOrdersSQL string

//go:embed sql/create_claimed_order.sql
var createClaimedOrderSQL string

func (e *postgresEngine) createClaimed(ctx context.Context, o order.Order, c order.Claim) (createdClaimed, error) {
	return e.createClaims.Do(ctx, newClaimed{o, c})
}

// createClaimedMany runs create_claimed_orders.sql for ns, whose merchant
// references differ, and returns each one's result.
func (e *postgresEngine) createClaimedMany(ctx context.Context, ns []newClaimed) ([]createdClaimed, error) {
	n := len(ns)
	var cols createClaimedColumns
	for _, nc := range ns {
		cols.add(nc.order, nc.claim)
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return nil, fmt.Errorf("create claimed: %w", err)
	}
	args["create_event"] = order.EventCreate
	sql := createClaimedOrdersSQL
	if n == 1 {
		sql = createClaimedOrderSQL
		oneRow(args)
	}
	var rows []createClaimedRow
	err = retry(ctx, func() (err error) {
		rows, err = queryAll[createClaimedRow](ctx, e.pool, sql, args)
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

// settlesSQL records gateways' answers for one or many orders in one
// statement, guarded, in one round trip and one commit; settleSQL is the
// same statement for one settlement, generated from it.
//
//go:generate go run gen_onerow.go sql/settles.sql sql/settle.sql
//go:embed sql/settles.sql
var settlesSQL string

//go:embed sql/settle.sql
var settleSQL string

func (e *postgresEngine) settle(ctx context.Context, st order.Settlement) (settled, error) {
	return e.settles.Do(ctx, st)
}

func (e *postgresEngine) settleMany(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	n := len(sts)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	args, err := settleArgs(sts, all)
	if err != nil {
		return nil, nil, err
	}
	sql := settlesSQL
	if n == 1 {
		sql = settleSQL
		oneRow(args)
	}
	orders, applied := make([]order.Order, n), make([]bool, n)
	err = retry(ctx, func() error {
		clear(orders)
		clear(applied)
		rows, err := queryAll[settledRow](ctx, e.pool, sql, args)
		if err != nil {
			return err
		}
		for _, r := range rows {
			orders[r.I-1], applied[r.I-1] = r.order(), true
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return orders, applied, nil
}

// refundClaimsSQL admits refunds in one statement; its comments say how
// it keeps refunds within what was paid. refundClaimSQL is the same
// statement for one claim, generated from it.
//
//go:generate go run gen_onerow.go sql/refund_claims.sql sql/refund_claim.sql
//go:embed sql/refund_claims.sql
var refundClaimsSQL string

//go:embed sql/refund_claim.sql
var refundClaimSQL string

func (e *postgresEngine) claimRefund(ctx context.Context, c order.RefundClaim) (refundClaimed, error) {
	return e.refundClaims.Do(ctx, c)
}

// claimRefunds runs refund_claims.sql for cs, whose orders differ, and
// runs again those that made no refund and saw none (rerunUnseen).
func (e *postgresEngine) claimRefunds(ctx context.Context, cs []order.RefundClaim) ([]refundClaimed, error) {
	return rerunUnseen(ctx, cs, e.claimSomeRefunds,
		func(r refundClaimed) bool { return r.err == nil && !r.res.Claimed && r.res.Refund == nil },
		func(err error) refundClaimed { return refundClaimed{err: err} })
}

// claimSomeRefunds runs refund_claims.sql once for cs, whose orders
// differ, and sets out[i] to claim i's result, or to order.ErrNotFound
// when its order does not exist.
func (e *postgresEngine) claimSomeRefunds(ctx context.Context, cs []order.RefundClaim, out []refundClaimed) error {
	var cols refundClaimColumns
	for _, c := range cs {
		cols.add(c)
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return fmt.Errorf("claim refund: %w", err)
	}
	args["refundable"] = strings.Join(refundableStates, ",")
	args["from_state"] = order.RefundPending
	args["to_state"] = order.MustNextRefund(order.RefundPending, order.EventRefund)
	args["event"] = order.EventRefund
	args["create_event"] = order.EventCreate
	sql := refundClaimsSQL
	if len(cs) == 1 {
		sql = refundClaimSQL
		oneRow(args)
	}
	return retry(ctx, func() error {
		rows, err := queryAll[refundClaimRow](ctx, e.pool, sql, args)
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = refundClaimed{err: order.ErrNotFound}
		}
		for _, r := range rows {
			out[r.I-1] = refundClaimed{res: r.result()}
		}
		return nil
	})
}

// refundSettlesSQL records gateways' answers for refunds in one statement,
// guarded; refundSettleSQL is the same statement for one settlement,
// generated from it.
//
//go:generate go run gen_onerow.go sql/refund_settles.sql sql/refund_settle.sql
//go:embed sql/refund_settles.sql
var refundSettlesSQL string

//go:embed sql/refund_settle.sql
var refundSettleSQL string

func (e *postgresEngine) settleRefund(ctx context.Context, st order.RefundSettlement) (refundSettled, error) {
	return e.refundSettles.Do(ctx, st)
}

// settleRefunds runs refund_settles.sql for sts, whose orders differ.
func (e *postgresEngine) settleRefunds(ctx context.Context, sts []order.RefundSettlement) ([]refundSettled, error) {
	var cols refundSettleColumns
	for _, st := range sts {
		cols.add(st)
	}
	args, err := columnArgs(&cols)
	if err != nil {
		return nil, fmt.Errorf("settle refund: %w", err)
	}
	sql := refundSettlesSQL
	if len(sts) == 1 {
		sql = refundSettleSQL
		oneRow(args)
	}
	out := make([]refundSettled, len(sts))
	err = retry(ctx, func() error {
		clear(out)
		rows, err := queryAll[refundSettlesRow](ctx, e.pool, sql, args)
		if err != nil {
			return err
		}
		for _, r := range rows {
			out[r.I-1] = refundSettled{order: r.order(), refund: r.refund(), applied: true}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

//go:embed sql/claim_due.sql
var claimDueSQL string

func (e *postgresEngine) claimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, e.pool, claimDueSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

//go:embed sql/claim_review_due.sql
var claimReviewDueSQL string

func (e *postgresEngine) claimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, e.pool, claimReviewDueSQL, pgx.StrictNamedArgs{"limit": limit, "cadence": cadence})
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

//go:embed sql/claim_due_refunds.sql
var claimDueRefundsSQL string

func (e *postgresEngine) claimDueRefunds(ctx context.Context, limit int, lease time.Duration) ([]order.DueRefund, error) {
	var due []order.DueRefund
	err := retry(ctx, func() error {
		rows, err := queryAll[dueRefundRow](ctx, e.pool, claimDueRefundsSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.DueRefund, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

//go:embed sql/lease_deliveries.sql
var leaseDeliveriesSQL string

func (e *postgresEngine) leaseDeliveries(ctx context.Context, merchants []string, perMerchant int, lease time.Duration) ([]order.Notification, error) {
	var out []order.Notification
	err := retry(ctx, func() error {
		rows, err := queryAll[notificationRow](ctx, e.pool, leaseDeliveriesSQL, pgx.StrictNamedArgs{
			"merchant_id": merchants, "per_merchant": perMerchant, "lease": lease,
		})
		if err != nil {
			return err
		}
		out, err = notifications(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
