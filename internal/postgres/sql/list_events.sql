-- One page of a merchant's events (ListEvents), in (txid, id) order after
-- the cursor (@after_txid, @after_id). Only rows written by transactions
-- that ended before every transaction still running are returned: a row of
-- a transaction still running could commit later with a smaller (txid, id)
-- than this page's last, and a cursor past it would never return it.
-- sequence is the row's place in its order's history (1: the creation).
-- Its subquery names the merchant itself: Citus prunes shards by a
-- table's own condition on merchant_id, and without it would read every
-- shard (a condition copied from the outer row prunes nothing).
SELECT e.id AS event_num, e.type, e.merchant_id, e.order_id::text, e.to_state, e.created_at,
	e.txid::text AS txid, coalesce(e.attempt_id::text, '') AS attempt_id, e.delivery_attempts,
	(SELECT count(*) FROM order_events p WHERE p.merchant_id = @merchant_id AND p.order_id = e.order_id AND p.id <= e.id) AS sequence,
	o.merchant_reference, o.amount_minor, o.currency, o.gateway, o.created_at AS order_created_at,
	coalesce(a.gateway_charge_id, '') AS gateway_charge_id, coalesce(a.decline_code, '') AS decline_code
FROM order_events e
JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = e.merchant_id AND a.id = e.attempt_id
WHERE e.merchant_id = @merchant_id AND e.type IS NOT NULL
	AND (e.txid, e.id) > (@after_txid::text::xid8, @after_id::bigint)
	AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY e.txid, e.id
LIMIT @limit;
