package postgres

import "context"

// CheckoutStatementsOnCitus are the statements of the checkout path as the
// store runs them on Citus, by name: the writes as calls of the functions
// of migration 00016, the reads as they are everywhere.
var CheckoutStatementsOnCitus = map[string]string{
	"create_order":         citusCreateOrderSQL,
	"claim":                citusClaimSQL,
	"create_claimed":       citusCreateClaimedSQL,
	"settle":               citusSettleSQL,
	"transition":           citusTransitionSQL,
	"refund_claim":         citusRefundClaimSQL,
	"refund_settle":        citusRefundSettleSQL,
	"record_gateway_event": citusRecordGatewayEventSQL,
	"order_by_id":          orderByIDSQL,
	"order_by_reference":   orderByReferenceSQL,
	"attempt_by_id":        attemptByIDSQL,
	"attempt_by_request":   attemptByRequestSQL,
	"lock_order":           lockOrderSQL,
	"refund_by_id":         refundByIDSQL,
	"refund_by_request":    refundByRequestSQL,
	"order_refunds":        orderRefundsSQL,
	"list_events":          listEventsSQL,
}

// QueryAll is queryAll, for the tests of scanning.
func QueryAll[T any](ctx context.Context, q querier, sql string) ([]T, error) {
	return queryAll[T](ctx, q, sql, nil)
}

// QueryOne is queryOne, for the tests of scanning.
func QueryOne[T any](ctx context.Context, q querier, sql string) (T, error) {
	return queryOne[T](ctx, q, sql, nil)
}
