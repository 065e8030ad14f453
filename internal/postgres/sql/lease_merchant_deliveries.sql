-- lease_deliveries.sql for one merchant, on Citus: there a statement may
-- lock rows on one shard only, and a merchant's events are on one shard, so
-- LeaseDeliveries leases each merchant's events with a statement of its
-- own. Keep it in step with lease_deliveries.sql, which says what the lease
-- does. Every table is named with @merchant_id, not only joined on it:
-- Citus routes a statement to one shard only when it sees each table's
-- merchant.
WITH due AS (
	SELECT merchant_id, id FROM order_events
	WHERE merchant_id = @merchant_id AND type IS NOT NULL AND deliver_at IS NOT NULL AND deliver_at <= now()
	ORDER BY deliver_at
	LIMIT @per_merchant
	FOR UPDATE SKIP LOCKED
), leased AS (
	UPDATE order_events e SET deliver_at = now() + @lease::interval, delivery_attempts = e.delivery_attempts + 1
	FROM due WHERE e.merchant_id = due.merchant_id AND e.id = due.id
	RETURNING e.*
)
SELECT e.id AS event_num, e.type, e.merchant_id, e.order_id::text, e.to_state, e.created_at,
	e.txid::text AS txid, coalesce(e.attempt_id::text, '') AS attempt_id, e.delivery_attempts,
	(SELECT count(*) FROM order_events p WHERE p.merchant_id = @merchant_id AND p.order_id = e.order_id AND p.id <= e.id) AS sequence,
	o.merchant_reference, o.amount_minor, o.currency, o.gateway, o.created_at AS order_created_at,
	coalesce(a.gateway_charge_id, '') AS gateway_charge_id, coalesce(a.decline_code, '') AS decline_code
FROM leased e
JOIN orders o ON o.merchant_id = @merchant_id AND o.id = e.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = e.attempt_id
ORDER BY e.merchant_id, e.deliver_at, e.id;
