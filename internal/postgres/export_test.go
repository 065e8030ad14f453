package postgres

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
)

// CheckoutStatementsOnCitus are the statements of the checkout path as the
// store runs them on Citus, by name: the writes as calls of the functions
// of migrations 00016 and 00019, the reads as they are everywhere, and the
// reconciler's leases of one due capture, void or hold, and the
// operator's search of one merchant's orders.
var CheckoutStatementsOnCitus = map[string]string{
	"create_order":         citusCreateOrderSQL,
	"claim":                citusClaimSQL,
	"create_claimed":       citusCreateClaimedOrderSQL,
	"settle":               citusSettlesSQL,
	"transition":           citusTransitionSQL,
	"refund_claim":         citusRefundClaimSQL,
	"refund_settle":        citusRefundSettleSQL,
	"record_gateway_event": citusRecordGatewayEventSQL,
	"order_by_id":          orderByIDSQL,
	"order_by_reference":   orderByReferenceSQL,
	"find_orders":          findOrdersSQL,
	"attempt_by_id":        attemptByIDSQL,
	"order_attempt":        orderAttemptSQL,
	"order_routing":        orderRoutingSQL,
	"order_refund":         orderRefundSQL,
	"lock_order":           lockOrderSQL,
	"refund_by_id":         refundByIDSQL,
	"order_refunds":        orderRefundsSQL,
	"list_events":          listEventsSQL,
	"capture_claim":        citusCaptureClaimSQL,
	"capture_settle":       citusCaptureSettleSQL,
	"void_claim":           citusVoidClaimSQL,
	"void_settle":          citusVoidSettleSQL,
	"expire_hold":          citusExpireHoldSQL,
	"recheck_hold":         recheckHoldSQL,
	"order_capture":        orderCaptureSQL,
	"order_void":           orderVoidSQL,
	"lease_capture":        leaseCaptureSQL,
	"lease_void":           leaseVoidSQL,
	"lease_hold":           leaseHoldSQL,
}

// NewStoreOn is NewStore with its engine picked by the caller: Citus's
// (the PL/pgSQL functions of migration 00016) when citus is set, even on
// plain PostgreSQL, for the benchmark that compares the two forms there.
func NewStoreOn(pool *pgxpool.Pool, citus bool) *Store {
	s := NewStore(pool)
	var e engine = s.postgres
	if citus {
		e = s.citus
	}
	s.picked.Store(&e)
	return s
}

// QueryAll is queryAll, for the tests of scanning.
func QueryAll[T any](ctx context.Context, q querier, sql string) ([]T, error) {
	return queryAll[T](ctx, q, sql, nil)
}

// QueryOne is queryOne, for the tests of scanning.
func QueryOne[T any](ctx context.Context, q querier, sql string) (T, error) {
	return queryOne[T](ctx, q, sql, nil)
}

// CreateOrders is createOrders, the grouped create, with its results as
// the orders and whether each was created.
func (s *Store) CreateOrders(ctx context.Context, news []order.Order) ([]order.Order, []bool, error) {
	cs, err := s.createOrders(ctx, news)
	if err != nil {
		return nil, nil, err
	}
	got, isNew := make([]order.Order, len(cs)), make([]bool, len(cs))
	for i, c := range cs {
		got[i], isNew[i] = c.order, c.created
	}
	return got, isNew, nil
}

// ClaimMany is claimMany, the grouped claim, with its results as each
// claim's result and each claim's own error.
func (s *Store) ClaimMany(ctx context.Context, cs []order.Claim) ([]order.ClaimResult, []error, error) {
	out, err := s.claimMany(ctx, cs)
	if err != nil {
		return nil, nil, err
	}
	res, errs := make([]order.ClaimResult, len(out)), make([]error, len(out))
	for i, c := range out {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs, nil
}

// CreateClaimedMany is createClaimedMany, the grouped create-and-claim of
// os[i] by cs[i], with its results as the orders and whether each was
// created.
func (s *Store) CreateClaimedMany(ctx context.Context, os []order.Order, cs []order.Claim) ([]order.Order, []bool, error) {
	ns := make([]newClaimed, len(os))
	for i := range os {
		ns[i] = newClaimed{os[i], cs[i]}
	}
	out, err := s.postgres.createClaimedMany(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	got, isNew := make([]order.Order, len(out)), make([]bool, len(out))
	for i, c := range out {
		got[i], isNew[i] = c.order, c.created
	}
	return got, isNew, nil
}

// AnalyzeGrown is one round of KeepStatistics.
func (s *Store) AnalyzeGrown(ctx context.Context) error {
	return s.analyzeGrown(ctx, slog.New(slog.DiscardHandler))
}

// ClaimRefundsGrouped is the PostgreSQL engine's grouped refund claim of
// cs, whose orders differ, in one statement (its second run aside), with
// each claim's result and its own error.
func (s *Store) ClaimRefundsGrouped(ctx context.Context, cs []order.RefundClaim) ([]order.RefundClaimResult, []error, error) {
	out, err := s.postgres.claimRefunds(ctx, cs)
	if err != nil {
		return nil, nil, err
	}
	res, errs := make([]order.RefundClaimResult, len(out)), make([]error, len(out))
	for i, c := range out {
		res[i], errs[i] = c.res, c.err
	}
	return res, errs, nil
}

// SettleRefundsGrouped is the PostgreSQL engine's grouped refund settle
// of sts, whose orders differ, in one statement: each refund as it was
// left and whether its guard held.
func (s *Store) SettleRefundsGrouped(ctx context.Context, sts []order.RefundSettlement) ([]order.Refund, []bool, error) {
	out, err := s.postgres.settleRefunds(ctx, sts)
	if err != nil {
		return nil, nil, err
	}
	refunds, applied := make([]order.Refund, len(out)), make([]bool, len(out))
	for i, r := range out {
		refunds[i], applied[i] = r.refund, r.applied
	}
	return refunds, applied, nil
}
