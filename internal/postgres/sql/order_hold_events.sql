-- The history of an order's captures and voids (kind says which), oldest
-- first.
SELECT id AS seq, order_id::text, kind, operation_id::text, coalesce(from_state, '') AS from_state, to_state, event,
	actor, reason, created_at
FROM hold_events
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY id;
