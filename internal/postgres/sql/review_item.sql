-- A merchant's review item (review_items) by id, with the event that
-- raised it, or a finding of the gateway audit (audit_findings), resolved
-- or not (an event recorded before migration 00020 kept only whether it
-- said succeeded).
SELECT i.kind, i.merchant_id, i.id::text, i.order_id::text, i.attempt_id::text, ''::text AS operation_id, i.gateway,
	i.created_at AS raised_at, 0 AS reconcile_count, ''::text AS last_error,
	coalesce(nullif(e.outcome, ''), CASE WHEN e.succeeded THEN 'succeeded' ELSE '' END) AS outcome,
	coalesce(e.decline_code, '') AS decline_code, i.event_id, coalesce(e.event_type, '') AS event_type,
	coalesce(i.decision, '') AS decision, i.actor, i.note, i.gateway_outcome, i.resolved_at, NULL::timestamptz AS due_by, ''::text AS audit_class,
	''::text AS gateway_record_id, ''::text AS settle_side, ''::text AS gateway_side
FROM review_items i
-- Lateral, by the event's key: a plain join planned while gateway_events
-- was nearly empty read every event at every call.
LEFT JOIN LATERAL (
	SELECT * FROM gateway_events g
	WHERE g.merchant_id = i.merchant_id AND g.gateway = i.gateway AND g.event_id = i.event_id OFFSET 0
) e ON true
WHERE i.merchant_id = @merchant_id AND i.id = @id::uuid
UNION ALL
SELECT 'audit_finding', f.merchant_id, f.id::text, coalesce(f.order_id::text, ''), coalesce(f.attempt_id::text, ''), '',
	f.gateway, f.created_at, 0, '', '', '', '', '', '', f.actor, f.note, '', f.resolved_at, NULL, f.class, f.gateway_record_id,
	coalesce(f.settle::text, 'null'), coalesce(f.gateway_record::text, 'null')
FROM audit_findings f
WHERE f.merchant_id = @merchant_id AND f.id = @id::uuid;
