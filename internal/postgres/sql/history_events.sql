-- One page of an order's events, oldest first: up to @limit after event
-- @after_seq (0 for the first page).
SELECT id AS seq, order_id::text, coalesce(from_state, '') AS from_state, to_state, event, actor, reason,
	coalesce(attempt_id::text, '') AS attempt_id,
	coalesce(refund_id::text, '') AS refund_id, coalesce(capture_id::text, '') AS capture_id,
	coalesce(void_id::text, '') AS void_id, created_at
FROM order_events
WHERE merchant_id = @merchant_id AND order_id = @order_id AND id > @after_seq
ORDER BY id
LIMIT @limit;
