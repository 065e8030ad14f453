-- The orders an operator's search names within one merchant, newest first:
-- the order of that id or merchant reference; the order of a charge
-- attempt of that id (our reference at the gateway), gateway charge id or
-- request key; the order of a refund, capture or void of that id or
-- request key, or of a refund of that gateway id; the order of a dispute
-- of that gateway id. @uuid is the query as a UUID, NULL when it is not
-- one. Each branch reads one of its table's indexes, all on the
-- merchant's shard on Citus.
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at, refunded_minor, refunding_minor,
	capture_mode, authorized_minor, captured_minor, capturing_minor, voiding, hold_closed, capture_before,
	open_disputes, disputed_minor, charged_back_minor
FROM orders
WHERE merchant_id = @merchant_id AND id IN (
	SELECT id AS order_id FROM orders WHERE merchant_id = @merchant_id AND id = @uuid::uuid
	UNION ALL
	SELECT id FROM orders WHERE merchant_id = @merchant_id AND merchant_reference = @query
	UNION ALL
	SELECT order_id FROM charge_attempts WHERE merchant_id = @merchant_id AND id = @uuid::uuid
	UNION ALL
	SELECT order_id FROM charge_attempts WHERE merchant_id = @merchant_id AND request_id = @query
	UNION ALL
	SELECT order_id FROM charge_attempts WHERE merchant_id = @merchant_id AND gateway_charge_id = @query AND @query <> ''
	UNION ALL
	SELECT order_id FROM refunds WHERE merchant_id = @merchant_id AND id = @uuid::uuid
	UNION ALL
	SELECT order_id FROM refunds WHERE merchant_id = @merchant_id AND request_id = @query
	UNION ALL
	SELECT order_id FROM refunds WHERE merchant_id = @merchant_id AND gateway_refund_id = @query AND @query <> ''
	UNION ALL
	SELECT order_id FROM captures WHERE merchant_id = @merchant_id AND id = @uuid::uuid
	UNION ALL
	SELECT order_id FROM captures WHERE merchant_id = @merchant_id AND request_id = @query
	UNION ALL
	SELECT order_id FROM voids WHERE merchant_id = @merchant_id AND id = @uuid::uuid
	UNION ALL
	SELECT order_id FROM voids WHERE merchant_id = @merchant_id AND request_id = @query
	UNION ALL
	SELECT order_id FROM disputes WHERE merchant_id = @merchant_id AND gateway_dispute_id = @query
)
ORDER BY created_at DESC, id
LIMIT 20;
