-- An order's voids, oldest first.
SELECT id::text AS void_id, merchant_id AS void_merchant_id, order_id::text AS void_order_id,
	request_id AS void_request_id, reason AS void_reason, actor AS void_actor, state AS void_state,
	coalesce(outcome, '') AS void_outcome, decline_code AS void_decline_code, reconcile_at AS void_reconcile_at,
	reconcile_count AS void_reconcile_count, last_error AS void_last_error,
	created_at AS void_created_at, updated_at AS void_updated_at
FROM voids
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY created_at, id;
