-- An order's events, oldest first.
SELECT id AS seq, order_id::text, coalesce(from_state, '') AS from_state, to_state, event, actor, reason,
	coalesce(attempt_id::text, '') AS attempt_id,
	coalesce(refund_id::text, '') AS refund_id, coalesce(capture_id::text, '') AS capture_id,
	coalesce(void_id::text, '') AS void_id, created_at
FROM order_events
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY id;
