-- Deliver an event again (OpsService/ResendEvent), failed or not: due now,
-- its attempts counted afresh. An event id names a row of order_events, of
-- refund_events or of audit_findings (one numbering: id there, event_id
-- in the others), so one of the three updates finds it.
WITH o AS (
	UPDATE order_events SET deliver_at = now(), failed_at = NULL, delivery_attempts = 0
	WHERE merchant_id = @merchant_id AND id = @id AND type IS NOT NULL
	RETURNING id
), r AS (
	UPDATE refund_events SET deliver_at = now(), failed_at = NULL, delivery_attempts = 0
	WHERE merchant_id = @merchant_id AND event_id = @id AND type IS NOT NULL
	RETURNING event_id
), f AS (
	UPDATE audit_findings SET deliver_at = now(), failed_at = NULL, delivery_attempts = 0
	WHERE merchant_id = @merchant_id AND event_id = @id AND type IS NOT NULL
	RETURNING event_id
)
SELECT id AS event_num FROM o UNION ALL SELECT event_id FROM r UNION ALL SELECT event_id FROM f;
