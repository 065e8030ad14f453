package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/batch"
	"github.com/settlepay/settle/internal/order"
)

// citusEngine is the store on Citus. Citus plans a statement whose CTEs
// insert rows as several distributed steps through the coordinator, so
// each checkout write is instead a call of one of the functions of
// migrations 00016 and 00019, which Citus runs whole on the worker that
// holds the merchant's shard (migration 00016 says why), and runs alone
// rather than grouped: a group would span merchants, hence workers. A statement may
// lock rows on one shard only, so the leases over every merchant read
// their candidates from every shard without locks and then lease each on
// its own shard.
type citusEngine struct {
	pool *pgxpool.Pool
	// settles holds one settle batcher per merchant (see merchantSettles).
	settles sync.Map
	// polled holds the orders that this process's WatchOrder streams watch
	// (see pollWatched).
	polled pollWatches
}

//go:embed sql/citus/transition.sql
var citusTransitionSQL string

//go:embed sql/citus/refund_claim.sql
var citusRefundClaimSQL string

//go:embed sql/citus/refund_settle.sql
var citusRefundSettleSQL string

//go:embed sql/citus/record_gateway_event.sql
var citusRecordGatewayEventSQL string

//go:embed sql/citus/capture_claim.sql
var citusCaptureClaimSQL string

//go:embed sql/citus/capture_settle.sql
var citusCaptureSettleSQL string

//go:embed sql/citus/void_claim.sql
var citusVoidClaimSQL string

//go:embed sql/citus/void_settle.sql
var citusVoidSettleSQL string

//go:embed sql/citus/expire_hold.sql
var citusExpireHoldSQL string

var citusStatements = statements{
	transition:         citusTransitionSQL,
	recordGatewayEvent: citusRecordGatewayEventSQL,
	captureClaim:       citusCaptureClaimSQL,
	captureSettle:      citusCaptureSettleSQL,
	voidClaim:          citusVoidClaimSQL,
	voidSettle:         citusVoidSettleSQL,
	expireHold:         citusExpireHoldSQL,
	disputeOrderEvent:  citusDisputeOrderEventSQL,
}

func (e *citusEngine) statements() *statements { return &citusStatements }

// citusRefundClaimRow is what citus/refund_claim.sql returns; a refund ID
// of ” means no refund.
type citusRefundClaimRow struct {
	Claimed  bool   `db:"claimed"`
	ChargeID string `db:"charge_id"`
	disputedOrderRow
	refundRow
}

// claimRefund admits one refund alone, through the function that Citus
// runs whole on the merchant's worker, which takes no gateways: a claim
// with gateways reads the order first, and claims nothing of an order
// whose gateway is not one of them. A claim that made no refund and saw
// none runs once more, as the grouped claim's do on PostgreSQL, and for
// the same reason (Store.ClaimRefund).
func (e *citusEngine) claimRefund(ctx context.Context, c order.RefundClaim) (refundClaimed, error) {
	if len(c.Gateways) > 0 {
		o, err := readOrder(ctx, e.pool, c.MerchantID, c.OrderID)
		switch {
		case errors.Is(err, order.ErrNotFound):
			return refundClaimed{err: err}, nil
		case err != nil:
			return refundClaimed{}, err
		case !slices.Contains(c.Gateways, o.Gateway):
			return refundClaimed{res: order.RefundClaimResult{Order: o}}, nil
		}
	}
	var res order.RefundClaimResult
	for run := 0; run < 2 && !res.Claimed && res.Refund == nil; run++ {
		err := retry(ctx, func() error {
			r, err := queryOne[citusRefundClaimRow](ctx, e.pool, citusRefundClaimSQL, pgx.StrictNamedArgs{
				"order_id": c.OrderID, "merchant_id": c.MerchantID, "request_id": c.RequestID, "refund_id": c.RefundID,
				"amount_minor": c.AmountMinor, "reason": c.Reason, "actor": c.Actor, "lease": c.Lease,
				"refundable": refundableStates, "from_state": order.RefundPending,
				"to_state": order.MustNextRefund(order.RefundPending, order.EventRefund), "event": order.EventRefund,
				"create_event": order.EventCreate,
			})
			if err != nil {
				return err
			}
			res = refundClaimRow{Claimed: r.Claimed, ChargeID: r.ChargeID, disputedOrderRow: r.disputedOrderRow,
				refundRow: r.refundRow}.result()
			return nil
		})
		if errors.Is(err, order.ErrNotFound) {
			return refundClaimed{err: err}, nil
		}
		if err != nil {
			return refundClaimed{}, err
		}
	}
	return refundClaimed{res: res}, nil
}

// settleRefund records one refund settlement alone, through the function
// that Citus runs whole on the merchant's worker, which finds the order
// from the refund (st.OrderID only groups settlements on PostgreSQL).
func (e *citusEngine) settleRefund(ctx context.Context, st order.RefundSettlement) (refundSettled, error) {
	var outcome *string
	if st.Result.Outcome != "" {
		o := string(st.Result.Outcome)
		outcome = &o
	}
	from, to := refundSettleStates(st)
	var r refundSettledRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[refundSettledRow](ctx, e.pool, citusRefundSettleSQL, pgx.StrictNamedArgs{
			"merchant_id": st.MerchantID, "refund_id": st.RefundID, "from_state": from,
			"to_state": to, "outcome": outcome, "decline_code": st.Result.DeclineCode,
			"gateway_refund_id": st.Result.ChargeID, "recheck_in": st.RecheckIn, "checked": st.Checked,
			"last_error": truncate(st.LastError, 1000), "event": st.Event, "actor": st.Actor,
			"reason":        truncate(st.Reason, 1000),
			"partial_event": st.OrderPartial, "partial_to": order.MustNext(order.StatePaid, st.OrderPartial),
			"full_event": st.OrderFull, "full_to": order.MustNext(order.StatePaid, st.OrderFull),
			"lease": leaseArg(st.Lease),
		})
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		return refundSettled{}, nil // the guard did not hold
	case err != nil:
		return refundSettled{}, err
	}
	return refundSettled{order: r.order(), refund: r.refund(), applied: true}, nil
}

//go:embed sql/citus/create_order.sql
var citusCreateOrderSQL string

// citusCreatedRow is what citus/create_order.sql returns.
type citusCreatedRow struct {
	Created bool `db:"created"`
	modedOrderRow
}

// createOrder creates one order alone, through the function that Citus
// runs whole on the merchant's worker. It returns the order that holds the
// reference and whether it created it.
func (e *citusEngine) createOrder(ctx context.Context, o order.Order) (created, error) {
	var r citusCreatedRow
	err := retry(ctx, func() error {
		// A concurrent insert of the same reference that commits after this
		// statement's snapshot conflicts but is invisible to the fallback
		// SELECT; the next run of the statement sees it.
		for range 3 {
			var err error
			r, err = queryOne[citusCreatedRow](ctx, e.pool, citusCreateOrderSQL, pgx.StrictNamedArgs{
				"id": o.ID, "merchant_id": o.MerchantID, "merchant_reference": o.MerchantReference,
				"amount_minor": o.Amount.AmountMinor, "currency": o.Amount.Currency, "payment_method": o.PaymentMethod,
				"gateway": o.Gateway, "state": o.State, "event": order.EventCreate,
				"capture_mode": cmp.Or(o.Capture, order.CaptureAutomatic), "routes": routesJSON(o.Routes),
			})
			if !errors.Is(err, order.ErrNotFound) {
				return err
			}
		}
		return errors.New("create order: conflicting insert never became visible")
	})
	return created{order: r.order(), created: r.Created}, err
}

func (e *citusEngine) createOrders(ctx context.Context, news []order.Order) ([]created, error) {
	out := make([]created, len(news))
	for i, o := range news {
		var err error
		if out[i], err = e.createOrder(ctx, o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

//go:embed sql/citus/claim.sql
var citusClaimSQL string

// citusClaimRow is what citus/claim.sql returns; an attempt ID of ” means
// no attempt.
type citusClaimRow struct {
	Claimed bool `db:"claimed"`
	modedOrderRow
	attemptRow
}

// claim makes one claim alone, through the function that Citus runs whole
// on the merchant's worker. A claim that made no attempt and saw none runs
// once more, as the grouped claim's do on PostgreSQL, and for the same
// reason: the request id may have been used by a claim that committed
// while the function ran.
func (e *citusEngine) claim(ctx context.Context, c order.Claim) (order.ClaimResult, error) {
	var res order.ClaimResult
	for run := 0; run < 2 && !res.Claimed && res.Attempt == nil; run++ {
		err := retry(ctx, func() error {
			r, err := queryOne[citusClaimRow](ctx, e.pool, citusClaimSQL, pgx.StrictNamedArgs{
				"order_id": c.OrderID, "merchant_id": c.MerchantID, "request_id": c.RequestID, "attempt_id": c.AttemptID,
				"payment_method": c.PaymentMethod, "customer": c.Customer, "from_state": c.From, "to_state": c.To,
				"lease": c.Lease, "event": c.Event, "actor": c.Actor, "gateway": c.Gateway,
				"cascade_after": c.CascadeAfter, "skipped": c.Skipped, "reason": c.Reason,
				"check_follows": c.Follows != nil, "follows": deref(c.Follows),
			})
			if err != nil {
				return err
			}
			res = order.ClaimResult{Order: r.order(), Claimed: r.Claimed}
			if r.ID != "" { // the attempt's id (the order's is one level deeper)
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

//go:embed sql/citus/create_claimed_order.sql
var citusCreateClaimedOrderSQL string

// citusCreateClaimedRow is what citus/create_claimed_order.sql returns.
type citusCreateClaimedRow struct {
	modedOrderRow
	attemptRow
}

// createClaimed creates one order alone, through the function that Citus
// runs whole on the merchant's worker; see CreateClaimed for what it
// returns.
func (e *citusEngine) createClaimed(ctx context.Context, o order.Order, c order.Claim) (createdClaimed, error) {
	var r citusCreateClaimedRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[citusCreateClaimedRow](ctx, e.pool, citusCreateClaimedOrderSQL, pgx.StrictNamedArgs{
			"id": o.ID, "merchant_id": o.MerchantID, "merchant_reference": o.MerchantReference,
			"amount_minor": o.Amount.AmountMinor, "currency": o.Amount.Currency, "payment_method": o.PaymentMethod,
			"gateway": o.Gateway, "to_state": c.To, "attempt_id": c.AttemptID, "lease": c.Lease,
			"request_id": c.RequestID, "from_state": c.From, "create_event": order.EventCreate,
			"claim_event": c.Event, "actor": c.Actor, "customer": c.Customer,
			"capture_mode": cmp.Or(o.Capture, order.CaptureAutomatic), "routes": routesJSON(o.Routes),
			"skipped": c.Skipped,
		})
		return err
	})
	if errors.Is(err, order.ErrNotFound) {
		return createdClaimed{}, nil // the reference is taken
	}
	return createdClaimed{order: r.order(), attempt: r.attempt(), created: err == nil}, err
}

func (e *citusEngine) claimMany(ctx context.Context, cs []order.Claim) ([]claimed, error) {
	out := make([]claimed, len(cs))
	for i, c := range cs {
		out[i].res, out[i].err = e.claim(ctx, c)
	}
	return out, nil
}

// citusSettlesSQL is settles.sql on Citus, for one merchant's settlements: a
// call that Citus runs whole on the merchant's worker.
//
//go:embed sql/citus/settles.sql
var citusSettlesSQL string

func (e *citusEngine) settle(ctx context.Context, st order.Settlement) (settled, error) {
	return e.merchantSettles(st.MerchantID).Do(ctx, st)
}

// merchantSettles returns the batcher of merchant's settles: a
// group holds one merchant's settlements only, so that its statement is one
// call on the merchant's worker and one local commit there (a group of
// several merchants would lock rows on several workers and commit in two
// phases). One batcher per merchant that has settled since the process
// started; merchants are API clients, few.
func (e *citusEngine) merchantSettles(merchant string) *batch.Batcher[string, order.Settlement, settled] {
	if b, ok := e.settles.Load(merchant); ok {
		return b.(*batch.Batcher[string, order.Settlement, settled])
	}
	b, _ := e.settles.LoadOrStore(merchant, newSettles(e.settleMany))
	return b.(*batch.Batcher[string, order.Settlement, settled])
}

// settleMany makes one call per merchant, each run whole on the
// merchant's worker (citus/settles.sql). A merchant's settlements commit
// together; different merchants' do not.
func (e *citusEngine) settleMany(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	orders, applied := make([]order.Order, len(sts)), make([]bool, len(sts))
	byMerchant := map[string][]int{}
	var merchants []string
	for i, st := range sts {
		if _, ok := byMerchant[st.MerchantID]; !ok {
			merchants = append(merchants, st.MerchantID)
		}
		byMerchant[st.MerchantID] = append(byMerchant[st.MerchantID], i)
	}
	for _, m := range merchants {
		idx := byMerchant[m]
		// The function takes the merchant once, as the argument Citus
		// routes the call by.
		args, err := settleArgs(sts, idx)
		if err != nil {
			return nil, nil, err
		}
		args["merchant_id"] = m
		err = retry(ctx, func() error {
			for _, i := range idx {
				orders[i], applied[i] = order.Order{}, false
			}
			rows, err := queryAll[settledRow](ctx, e.pool, citusSettlesSQL, args)
			if err != nil {
				return err
			}
			for _, r := range rows {
				i := idx[r.I-1]
				orders[i], applied[i] = r.order(), true
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return orders, applied, nil
}

//go:embed sql/citus/claim_due.sql
var dueOrdersSQL string

func (e *citusEngine) claimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return e.leaseOrders(ctx, dueOrdersSQL, leaseOrderSQL, pgx.StrictNamedArgs{"limit": limit},
		pgx.StrictNamedArgs{"lease": lease, "due_only": true})
}

//go:embed sql/citus/claim_review_due.sql
var dueReviewSQL string

//go:embed sql/citus/lease_review.sql
var leaseReviewSQL string

func (e *citusEngine) claimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error) {
	return e.leaseOrders(ctx, dueReviewSQL, leaseReviewSQL, pgx.StrictNamedArgs{"limit": limit, "cadence": cadence},
		pgx.StrictNamedArgs{"cadence": cadence})
}

// leaseEach runs the reconciler's leases, where a statement may lock rows
// on one shard only: dueSQL reads candidates (merchant_id, id) from every
// shard without locks, then leaseSQL, given each candidate's merchant_id
// and id besides leaseArgs, leases it on its merchant's shard and returns
// its row R, or no row when another reconciler has leased it meanwhile.
func leaseEach[R any](ctx context.Context, pool *pgxpool.Pool, dueSQL, leaseSQL string, dueArgs, leaseArgs pgx.StrictNamedArgs) ([]R, error) {
	type candidate struct {
		MerchantID string `db:"merchant_id"`
		ID         string `db:"id"`
	}
	var cands []candidate
	err := retry(ctx, func() (err error) {
		cands, err = queryAll[candidate](ctx, pool, dueSQL, dueArgs)
		return err
	})
	if err != nil {
		return nil, err
	}
	var leased []R
	for _, c := range cands {
		args := pgx.StrictNamedArgs{"merchant_id": c.MerchantID, "id": c.ID}
		for k, v := range leaseArgs {
			args[k] = v
		}
		var r R
		err := retry(ctx, func() (err error) {
			r, err = queryOne[R](ctx, pool, leaseSQL, args)
			return err
		})
		switch {
		case errors.Is(err, order.ErrNotFound):
			continue // another reconciler has it, or it was settled
		case err != nil:
			return leased, err
		}
		leased = append(leased, r)
	}
	return leased, nil
}

// leaseOrders is leaseEach of orders, whose lease returns a leaseRow.
func (e *citusEngine) leaseOrders(ctx context.Context, dueSQL, leaseSQL string, dueArgs, leaseArgs pgx.StrictNamedArgs) ([]order.Due, error) {
	rows, err := leaseEach[leaseRow](ctx, e.pool, dueSQL, leaseSQL, dueArgs, leaseArgs)
	due := make([]order.Due, len(rows))
	for i, r := range rows {
		due[i] = r.due()
	}
	return due, err
}

//go:embed sql/citus/claim_due_refunds.sql
var dueRefundsSQL string

//go:embed sql/citus/lease_refund.sql
var leaseRefundSQL string

// claimDueRefunds reads every shard's due refunds, then leases each on its
// merchant's shard, as claimDue does orders.
func (e *citusEngine) claimDueRefunds(ctx context.Context, limit int, lease time.Duration) ([]order.DueRefund, error) {
	rows, err := leaseEach[dueRefundRow](ctx, e.pool, dueRefundsSQL, leaseRefundSQL,
		pgx.StrictNamedArgs{"limit": limit}, pgx.StrictNamedArgs{"lease": lease})
	due := make([]order.DueRefund, len(rows))
	for i, r := range rows {
		due[i] = r.due()
	}
	return due, err
}

//go:embed sql/citus/claim_due_captures.sql
var dueCapturesSQL string

//go:embed sql/citus/lease_capture.sql
var leaseCaptureSQL string

// claimDueCaptures reads every shard's due captures, then leases each on
// its merchant's shard, as claimDueRefunds does refunds.
func (e *citusEngine) claimDueCaptures(ctx context.Context, limit int, lease time.Duration) ([]order.DueCapture, error) {
	rows, err := leaseEach[dueCaptureRow](ctx, e.pool, dueCapturesSQL, leaseCaptureSQL,
		pgx.StrictNamedArgs{"limit": limit}, pgx.StrictNamedArgs{"lease": lease})
	due := make([]order.DueCapture, len(rows))
	for i, r := range rows {
		due[i] = r.due()
	}
	return due, err
}

//go:embed sql/citus/claim_due_voids.sql
var dueVoidsSQL string

//go:embed sql/citus/lease_void.sql
var leaseVoidSQL string

// claimDueVoids reads every shard's due voids, then leases each on its
// merchant's shard.
func (e *citusEngine) claimDueVoids(ctx context.Context, limit int, lease time.Duration) ([]order.DueVoid, error) {
	rows, err := leaseEach[dueVoidRow](ctx, e.pool, dueVoidsSQL, leaseVoidSQL,
		pgx.StrictNamedArgs{"limit": limit}, pgx.StrictNamedArgs{"lease": lease})
	due := make([]order.DueVoid, len(rows))
	for i, r := range rows {
		due[i] = r.due()
	}
	return due, err
}

//go:embed sql/citus/claim_due_holds.sql
var dueHoldsSQL string

//go:embed sql/citus/lease_hold.sql
var leaseHoldSQL string

// claimDueHolds reads every shard's AUTHORIZED orders past their
// capture_before, then leases each on its merchant's shard.
func (e *citusEngine) claimDueHolds(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return e.leaseOrders(ctx, dueHoldsSQL, leaseHoldSQL, pgx.StrictNamedArgs{"limit": limit},
		pgx.StrictNamedArgs{"lease": lease})
}

//go:embed sql/citus/lease_deliveries.sql
var leaseMerchantDeliveriesSQL string

// leaseDeliveries runs one statement per merchant, each on the
// merchant's shard.
func (e *citusEngine) leaseDeliveries(ctx context.Context, merchants []string, perMerchant int, lease time.Duration) ([]order.Notification, error) {
	var out []order.Notification
	for _, m := range merchants {
		var got []order.Notification
		err := retry(ctx, func() error {
			rows, err := queryAll[notificationRow](ctx, e.pool, leaseMerchantDeliveriesSQL, pgx.StrictNamedArgs{
				"merchant_id": m, "per_merchant": perMerchant, "lease": lease,
			})
			if err != nil {
				return err
			}
			got, err = notifications(rows)
			return err
		})
		if err != nil {
			return out, err
		}
		out = append(out, got...)
	}
	return out, nil
}
