-- The SQL floor of delivering events: the delivery worker's two statements
-- for a batch of one merchant's events, with no POST between them. The
-- first leases up to 32 due events (the worker's lease_deliveries.sql,
-- without the order and attempt it reads for the payload); the second
-- records them delivered (record_deliveries.sql, for a batch all
-- delivered). Each is its own commit, as in the worker. An event is
-- 1/32 of a transaction when the batches are full.
WITH due AS (
	SELECT merchant_id, id FROM order_events
	WHERE merchant_id = 'default' AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
	ORDER BY deliver_at
	LIMIT 32
	FOR UPDATE SKIP LOCKED
), leased AS (
	UPDATE order_events e SET deliver_at = now() + interval '5 minutes', delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE e.merchant_id = due.merchant_id AND e.id = due.id
	RETURNING e.id
)
SELECT coalesce(string_agg(id::text, ','), '0') AS ids FROM leased
\gset
UPDATE order_events SET deliver_at = NULL, delivered_at = now(), failed_at = NULL, last_status = 200
WHERE merchant_id = 'default' AND id = ANY (string_to_array(:ids, ',')::bigint[]) AND deliver_at IS NOT NULL;
