-- One page of a merchant's events (ListEvents), orders', refunds' and
-- audit findings', in (txid, number) order after the cursor (@after_txid,
-- @after_id): the three tables share one numbering (order_events.id,
-- refund_events.event_id, audit_findings.event_id: migrations 00014 and
-- 00030), so no two events tie. Only rows written by
-- transactions that ended before every transaction still running are
-- returned: a row of a transaction still running could commit
-- later with a smaller (txid, id) than this page's last, and a cursor past
-- it would never return it. sequence is the row's place in its order's
-- history, the order's and its refunds' rows counted together (1: the
-- order's creation; 0 for a finding's event, which may name no order, and
-- whose order's columns are then empty). Each table gives at most @limit rows, from its own
-- feed index, before the page is cut. The subqueries and joins name the
-- merchant themselves: Citus prunes shards by a table's own condition on
-- merchant_id, and without it would read every shard (a condition copied
-- from the outer row prunes nothing).
WITH e AS (
	(SELECT id, type, merchant_id, order_id, to_state, created_at, txid, attempt_id, delivery_attempts,
		NULL::uuid AS refund_id, NULL::uuid AS finding_id, actor
	FROM order_events
	WHERE merchant_id = @merchant_id AND type IS NOT NULL
		AND (txid, id) > (@after_txid::text::xid8, @after_id::bigint)
		AND txid < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY txid, id
	LIMIT @limit)
	UNION ALL
	(SELECT event_id, type, merchant_id, order_id, to_state, created_at, txid, NULL::uuid, delivery_attempts, refund_id,
		NULL::uuid, actor
	FROM refund_events
	WHERE merchant_id = @merchant_id AND type IS NOT NULL
		AND (txid, event_id) > (@after_txid::text::xid8, @after_id::bigint)
		AND txid < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY txid, event_id
	LIMIT @limit)
	UNION ALL
	(SELECT event_id, type, merchant_id, NULL::uuid, ''::text, created_at, txid, NULL::uuid, delivery_attempts, NULL::uuid,
		id, ''::text
	FROM audit_findings
	WHERE merchant_id = @merchant_id AND type IS NOT NULL
		AND (txid, event_id) > (@after_txid::text::xid8, @after_id::bigint)
		AND txid < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY txid, event_id
	LIMIT @limit)
)
SELECT e.id AS event_num, e.type, e.merchant_id, coalesce(e.order_id::text, '') AS order_id, e.to_state, e.created_at,
	e.txid::text AS txid, coalesce(e.attempt_id::text, '') AS attempt_id, e.delivery_attempts, e.actor,
	(SELECT count(*) FROM order_events p WHERE p.merchant_id = @merchant_id AND p.order_id = e.order_id AND p.id <= e.id)
		+ (SELECT count(*) FROM refund_events p WHERE p.merchant_id = @merchant_id AND p.order_id = e.order_id AND p.event_id <= e.id)
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
LEFT JOIN orders o ON o.merchant_id = @merchant_id AND o.id = e.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = e.attempt_id
-- Lateral reads of the event's refund and finding, by their keys: joined
-- plainly, a plan made while refunds was nearly empty read the merchant's
-- every refund at every call.
LEFT JOIN LATERAL (
	SELECT * FROM refunds WHERE merchant_id = @merchant_id AND id = e.refund_id OFFSET 0
) r ON true
LEFT JOIN LATERAL (
	SELECT * FROM audit_findings WHERE merchant_id = @merchant_id AND id = e.finding_id OFFSET 0
) f ON true
ORDER BY e.txid, e.id
LIMIT @limit;
