-- The SQL floor of delivering events: the delivery worker's two statements
-- for a batch of one merchant's events, with no POST between them. The
-- first leases up to 32 due events of the outbox's two tables, orders'
-- and refunds' (the worker's lease_deliveries.sql, without the order,
-- attempt and refund it reads for the payload); the second records them
-- delivered (record_deliveries.sql, for a batch all delivered). Each is
-- its own commit, as in the worker. An event is 1/32 of a transaction when
-- the batches are full.
WITH due_o AS (
	SELECT id, deliver_at FROM order_events
	WHERE merchant_id = 'default' AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
	ORDER BY deliver_at
	LIMIT 32
	FOR UPDATE SKIP LOCKED
), due_r AS (
	SELECT event_id AS id, deliver_at FROM refund_events
	WHERE merchant_id = 'default' AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
	ORDER BY deliver_at
	LIMIT 32
	FOR UPDATE SKIP LOCKED
), due AS (
	SELECT * FROM (SELECT false AS refund, * FROM due_o UNION ALL SELECT true, * FROM due_r) u
	ORDER BY deliver_at, id
	LIMIT 32
), leased_o AS (
	UPDATE order_events e SET deliver_at = now() + interval '5 minutes', delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE NOT due.refund AND e.merchant_id = 'default' AND e.id = due.id
	RETURNING e.id
), leased_r AS (
	UPDATE refund_events e SET deliver_at = now() + interval '5 minutes', delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE due.refund AND e.merchant_id = 'default' AND e.event_id = due.id
	RETURNING e.event_id
)
SELECT coalesce(string_agg(id::text, ','), '0') AS ids FROM (SELECT id FROM leased_o UNION ALL SELECT event_id FROM leased_r) l
\gset
WITH o AS (
	UPDATE order_events SET deliver_at = NULL, delivered_at = now(), failed_at = NULL, last_status = 200
	WHERE merchant_id = 'default' AND id = ANY (string_to_array(:ids, ',')::bigint[]) AND deliver_at IS NOT NULL
), r AS (
	UPDATE refund_events SET deliver_at = NULL, delivered_at = now(), failed_at = NULL, last_status = 200
	WHERE merchant_id = 'default' AND event_id = ANY (string_to_array(:ids, ',')::bigint[]) AND deliver_at IS NOT NULL
)
SELECT 1;
