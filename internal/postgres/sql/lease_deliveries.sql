-- Lease due events for delivery: for each merchant of @merchant_id, up to
-- @per_merchant of its undelivered events whose time has come, so that one
-- merchant's backlog never fills another's turn. SKIP LOCKED leaves rows
-- that another worker is leasing to it, and the lease moves deliver_at past
-- the delivery's time: a worker that dies holding events has them
-- delivered again, with the same ids, once the lease ends. The attempt is
-- counted here, before the POST, so that a worker killed in the middle of
-- every try still backs off.
WITH due AS (
	SELECT d.merchant_id, d.id
	FROM unnest(@merchant_id::text[]) AS m(merchant_id)
	CROSS JOIN LATERAL (
		SELECT merchant_id, id FROM order_events
		WHERE merchant_id = m.merchant_id AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
		ORDER BY deliver_at
		LIMIT @per_merchant
		FOR UPDATE SKIP LOCKED
	) d
), leased AS (
	UPDATE order_events e SET deliver_at = now() + @lease::interval, delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE e.merchant_id = due.merchant_id AND e.id = due.id
	RETURNING e.*
)
SELECT e.id AS event_num, e.type, e.merchant_id, e.order_id::text, e.to_state, e.created_at,
	e.txid::text AS txid, coalesce(e.attempt_id::text, '') AS attempt_id, e.delivery_attempts,
	(SELECT count(*) FROM order_events p WHERE p.merchant_id = e.merchant_id AND p.order_id = e.order_id AND p.id <= e.id) AS sequence,
	o.merchant_reference, o.amount_minor, o.currency, o.gateway, o.created_at AS order_created_at,
	coalesce(a.gateway_charge_id, '') AS gateway_charge_id, coalesce(a.decline_code, '') AS decline_code
FROM leased e
JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = e.merchant_id AND a.id = e.attempt_id
ORDER BY e.merchant_id, e.deliver_at, e.id;
