-- Deliver an event again (OpsService/ResendEvent), failed or not: due now,
-- its attempts counted afresh.
UPDATE order_events SET deliver_at = now(), failed_at = NULL, delivery_attempts = 0
WHERE merchant_id = @merchant_id AND id = @id AND type IS NOT NULL
RETURNING id AS event_num;
