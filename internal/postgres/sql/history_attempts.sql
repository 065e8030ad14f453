-- One page of an order's attempts, oldest first: up to @limit after the
-- attempt (@after_created, @after_id) in the order (created_at, id), or from
-- the first when @after_created is NULL.
SELECT id::text AS attempt_id, order_id::text AS attempt_order_id, request_id AS attempt_request_id,
	payment_method AS attempt_payment_method, customer AS attempt_customer, amount_minor AS attempt_amount_minor, currency AS attempt_currency,
	coalesce(outcome, '') AS attempt_outcome, decline_code AS attempt_decline_code,
	gateway_charge_id AS attempt_gateway_charge_id, gateway AS attempt_gateway, created_at AS attempt_created_at,
	cascade_after AS attempt_cascade_after, skipped AS attempt_skipped
FROM charge_attempts
WHERE merchant_id = @merchant_id AND order_id = @order_id
	AND (@after_created::timestamptz IS NULL OR (created_at, id) > (@after_created, @after_id::uuid))
ORDER BY created_at, id
LIMIT @limit;
