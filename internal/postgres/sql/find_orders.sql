-- The ids of the orders an operator's search names within one merchant:
-- the order of that id or merchant reference; the order of a charge
-- attempt of that id (our reference at the gateway), gateway charge id or
-- request key; the order of a refund, capture or void of that id or
-- request key, or of a refund of that gateway id; the order of a dispute
-- of that gateway id. @uuid is the query as a UUID, NULL when it is not
-- one. Each branch reads one of its table's indexes, all on the
-- merchant's shard on Citus.
SELECT DISTINCT order_id::text AS order_id FROM (
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
) f
LIMIT 20;
