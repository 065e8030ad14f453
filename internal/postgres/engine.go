package postgres

import (
	"context"
	_ "embed"
	"log/slog"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// engine is what differs between the two engines the store runs on:
// PostgreSQL, and Citus (PostgreSQL with the citus extension, Settle's
// tables distributed by merchant, docs/operations.md "Settle on Citus").
// They differ in the SQL of a few writes, in how a checkout or refund write is sent
// (grouped with the concurrent calls of its kind in one statement, or
// alone, as a call that Citus runs whole on the merchant's worker), in how
// the leases over every merchant are taken (Citus locks rows on one shard
// per statement), and in how WatchOrder learns of changes (Citus sends no
// notifications). Each engine is in its own files, engine_postgres*.go
// and engine_citus*.go; the Store's methods do what both share and call
// their engine for the rest, never asking which one it is.
type engine interface {
	// statements returns the engine's form of the writes whose SQL alone
	// differs.
	statements() *statements

	// createOrder creates o, or finds the order that holds its reference.
	createOrder(ctx context.Context, o order.Order) (created, error)
	// createOrders does createOrder for each of news, whose merchant
	// references differ.
	createOrders(ctx context.Context, news []order.Order) ([]created, error)
	// claim makes the claim c.
	claim(ctx context.Context, c order.Claim) (order.ClaimResult, error)
	// claimMany makes the claims cs, whose orders differ; an error of one
	// claim is its own.
	claimMany(ctx context.Context, cs []order.Claim) ([]claimed, error)
	// createClaimed creates o already claimed by c; created is false when
	// its reference is taken.
	createClaimed(ctx context.Context, o order.Order, c order.Claim) (createdClaimed, error)
	// settle records the settlement st.
	settle(ctx context.Context, st order.Settlement) (settled, error)
	// settleMany records the settlements sts, whose orders differ.
	settleMany(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error)
	// claimRefund admits the refund c (see Store.ClaimRefund).
	claimRefund(ctx context.Context, c order.RefundClaim) (refundClaimed, error)
	// settleRefund records the refund settlement st.
	settleRefund(ctx context.Context, st order.RefundSettlement) (refundSettled, error)

	// claimDue leases due CHARGING orders of every merchant.
	claimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error)
	// claimReviewDue leases NEEDS_REVIEW orders of every merchant whose
	// slow recheck has come.
	claimReviewDue(ctx context.Context, limit int, cadence time.Duration) ([]order.Due, error)
	// claimDueRefunds leases due REFUNDING refunds of every merchant.
	claimDueRefunds(ctx context.Context, limit int, lease time.Duration) ([]order.DueRefund, error)
	// claimDueCaptures, claimDueVoids and claimDueHolds lease due
	// CAPTURING captures, VOIDING voids and AUTHORIZED orders past their
	// capture_before of every merchant.
	claimDueCaptures(ctx context.Context, limit int, lease time.Duration) ([]order.DueCapture, error)
	claimDueVoids(ctx context.Context, limit int, lease time.Duration) ([]order.DueVoid, error)
	claimDueHolds(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error)
	// leaseDeliveries leases due events of each of merchants.
	leaseDeliveries(ctx context.Context, merchants []string, perMerchant int, lease time.Duration) ([]order.Notification, error)

	// listenOrders calls fn with the id of each watched order that
	// changes, until ctx ends (see Store.ListenOrders).
	listenOrders(ctx context.Context, log *slog.Logger, fn func(orderID string), missed func())
	// watch registers interest in merchantID's order orderID until the
	// returned function is called (see Store.Watch).
	watch(ctx context.Context, merchantID, orderID string) (func(), error)
}

// statements are an engine's form of the writes that both engines make
// with one statement each, in SQL of their own.
type statements struct {
	transition         string
	recordGatewayEvent string
	captureClaim       string
	captureSettle      string
	voidClaim          string
	voidSettle         string
	expireHold         string
	// disputeOrderEvent writes a dispute's row in its order's history.
	disputeOrderEvent string
}

//go:embed sql/is_citus.sql
var isCitusSQL string

// engine returns the engine of the store's database. It is picked by one
// probe (is_citus.sql) when the store first reaches its database, and kept
// for the store's life; every later call is an atomic load. The probe
// cannot run in NewStore, which takes no context and may run before the
// database is up: serve and reconcile open their pool at start and then
// wait for the database. A failed probe picks nothing, and the next call
// probes again.
func (s *Store) engine(ctx context.Context) (engine, error) {
	if e := s.picked.Load(); e != nil {
		return *e, nil
	}
	var r struct {
		Citus bool `db:"citus"`
	}
	err := retry(ctx, func() (err error) {
		r, err = queryOne[struct {
			Citus bool `db:"citus"`
		}](ctx, s.pool, isCitusSQL, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	var e engine = s.postgres
	if r.Citus {
		e = s.citus
	}
	s.picked.CompareAndSwap(nil, &e)
	return *s.picked.Load(), nil
}
