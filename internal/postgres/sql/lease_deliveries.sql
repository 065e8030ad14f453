-- Lease due events for delivery, orders', refunds' and audit findings'
-- (one outbox in three tables, one numbering): for each merchant of @merchant_id, up to
-- @per_merchant of its undelivered events whose time has come, so that one
-- merchant's backlog never fills another's turn. SKIP LOCKED leaves rows
-- that another worker is leasing to it, and the lease moves deliver_at past
-- the delivery's time: a worker that dies holding events has them
-- delivered again, with the same ids, once the lease ends. The attempt is
-- counted here, before the POST, so that a worker killed in the middle of
-- every try still backs off. Each table offers up to @per_merchant rows of
-- a merchant; the earliest due of all are leased, and the rest, locked
-- only until this statement ends, stay due. A finding's event (finding_id
-- set) may name no order: its order's columns are then empty, and its
-- sequence 0.
WITH m AS (
	SELECT unnest(@merchant_id::text[]) AS merchant_id
), due_o AS (
	SELECT d.* FROM m CROSS JOIN LATERAL (
		SELECT merchant_id, id, deliver_at FROM order_events
		WHERE merchant_id = m.merchant_id AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
		ORDER BY deliver_at
		LIMIT @per_merchant
		FOR UPDATE SKIP LOCKED
	) d
), due_r AS (
	SELECT d.* FROM m CROSS JOIN LATERAL (
		SELECT merchant_id, event_id AS id, deliver_at FROM refund_events
		WHERE merchant_id = m.merchant_id AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
		ORDER BY deliver_at
		LIMIT @per_merchant
		FOR UPDATE SKIP LOCKED
	) d
), due_f AS (
	SELECT d.* FROM m CROSS JOIN LATERAL (
		SELECT merchant_id, event_id AS id, deliver_at FROM audit_findings
		WHERE merchant_id = m.merchant_id AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
		ORDER BY deliver_at
		LIMIT @per_merchant
		FOR UPDATE SKIP LOCKED
	) d
), due AS (
	SELECT * FROM (
		SELECT u.*, row_number() OVER (PARTITION BY u.merchant_id ORDER BY u.deliver_at, u.id) AS n
		FROM (SELECT 'order' AS kind, * FROM due_o UNION ALL SELECT 'refund', * FROM due_r
			UNION ALL SELECT 'finding', * FROM due_f) u
	) ranked
	WHERE n <= @per_merchant
), leased_o AS (
	UPDATE order_events e SET deliver_at = now() + @lease::interval, delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE due.kind = 'order' AND e.merchant_id = due.merchant_id AND e.id = due.id
	RETURNING e.id, e.type, e.merchant_id, e.order_id, e.to_state, e.created_at, e.txid, e.attempt_id,
		e.delivery_attempts, NULL::uuid AS refund_id, NULL::uuid AS finding_id, e.deliver_at, e.actor
), leased_r AS (
	UPDATE refund_events e SET deliver_at = now() + @lease::interval, delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE due.kind = 'refund' AND e.merchant_id = due.merchant_id AND e.event_id = due.id
	RETURNING e.event_id, e.type, e.merchant_id, e.order_id, e.to_state, e.created_at, e.txid, NULL::uuid,
		e.delivery_attempts, e.refund_id, NULL::uuid, e.deliver_at, e.actor
), leased_f AS (
	UPDATE audit_findings e SET deliver_at = now() + @lease::interval, delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE due.kind = 'finding' AND e.merchant_id = due.merchant_id AND e.event_id = due.id
	RETURNING e.event_id, e.type, e.merchant_id, NULL::uuid, ''::text, e.created_at, e.txid, NULL::uuid,
		e.delivery_attempts, NULL::uuid, e.id, e.deliver_at, ''::text
), e AS (
	SELECT * FROM leased_o UNION ALL SELECT * FROM leased_r UNION ALL SELECT * FROM leased_f
)
SELECT e.id AS event_num, e.type, e.merchant_id, coalesce(e.order_id::text, '') AS order_id, e.to_state, e.created_at,
	e.txid::text AS txid, coalesce(e.attempt_id::text, '') AS attempt_id, e.delivery_attempts, e.actor,
	(SELECT count(*) FROM order_events p WHERE p.merchant_id = e.merchant_id AND p.order_id = e.order_id AND p.id <= e.id)
		+ (SELECT count(*) FROM refund_events p WHERE p.merchant_id = e.merchant_id AND p.order_id = e.order_id AND p.event_id <= e.id)
		AS sequence,
	coalesce(o.merchant_reference, '') AS merchant_reference, coalesce(o.amount_minor, 0) AS amount_minor,
	coalesce(o.currency, '') AS currency, coalesce(o.gateway, '') AS gateway,
	coalesce(o.created_at, 'epoch') AS order_created_at,
	coalesce(a.gateway_charge_id, '') AS gateway_charge_id, coalesce(a.decline_code, '') AS decline_code,
	coalesce(r.id::text, '') AS refund_id, coalesce(r.request_id, '') AS refund_request_id,
	coalesce(r.amount_minor, 0) AS refund_amount_minor, coalesce(r.reason, '') AS refund_reason,
	coalesce(r.actor, '') AS refund_actor,
	coalesce(r.outcome, '') AS refund_outcome, coalesce(r.decline_code, '') AS refund_decline_code,
	coalesce(r.gateway_refund_id, '') AS refund_gateway_refund_id,
	coalesce(r.created_at, 'epoch') AS refund_created_at,
	coalesce(f.id::text, '') AS finding_id, coalesce(f.run_id::text, '') AS finding_run_id,
	coalesce(f.class, '') AS finding_class, coalesce(f.gateway, '') AS finding_gateway,
	coalesce(f.gateway_record_id, '') AS finding_gateway_record_id,
	coalesce(f.order_id::text, '') AS finding_order_id, coalesce(f.attempt_id::text, '') AS finding_attempt_id,
	coalesce(f.settle, 'null')::text AS finding_settle, coalesce(f.gateway_record, 'null')::text AS finding_gateway_record
FROM e
LEFT JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = e.merchant_id AND a.id = e.attempt_id
LEFT JOIN refunds r ON r.merchant_id = e.merchant_id AND r.id = e.refund_id
LEFT JOIN audit_findings f ON f.merchant_id = e.merchant_id AND f.id = e.finding_id
ORDER BY e.merchant_id, e.deliver_at, e.id;
