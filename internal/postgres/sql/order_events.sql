-- An order's events, oldest first.
SELECT id AS seq, order_id::text, coalesce(from_state, '') AS from_state, to_state, event, actor, reason,
	coalesce(attempt_id::text, '') AS attempt_id,
	coalesce(refund_id::text, '') AS refund_id, created_at
FROM order_events
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY id;
