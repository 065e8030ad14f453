-- The history of an order's refunds, oldest first.
SELECT id AS seq, order_id::text, refund_id::text, coalesce(from_state, '') AS from_state, to_state, event, actor,
	reason, created_at
FROM refund_events
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY id;
