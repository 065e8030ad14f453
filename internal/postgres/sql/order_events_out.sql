-- The events out of one order, its own and its refunds' (the two tables
-- share one numbering: migration 00014), with where each one's delivery
-- stands (OpsService.ListOrderEvents), oldest first.
SELECT id AS event_num, type, created_at, delivery_attempts, last_status, delivered_at, failed_at, deliver_at
FROM order_events
WHERE merchant_id = @merchant_id AND order_id = @order_id AND type IS NOT NULL
UNION ALL
SELECT event_id, type, created_at, delivery_attempts, last_status, delivered_at, failed_at, deliver_at
FROM refund_events
WHERE merchant_id = @merchant_id AND order_id = @order_id AND type IS NOT NULL
ORDER BY event_num
LIMIT 500;
