-- The review queue, oldest first: orders, refunds, captures and voids in
-- NEEDS_REVIEW, the open review items and the open findings of the
-- gateway audit (migration 00027), each with what Settle recorded
-- of the gateway's answer; and the disputes waiting on the merchant's
-- evidence that are due within @due_within (database time) or overdue,
-- raised @due_within before they are due. Only items of @kind (every kind when ''),
-- within a scope as in order_by_id.sql (every merchant's with
-- @any_merchant, otherwise only @merchant_id's), after the page that
-- ended with (@after_at, @after_kind, @after_id): the queue's order is
-- when an item entered review, then its kind, then its id. Each kind is
-- read apart, from its own partial index in that order (migrations 00021, 00027),
-- at most @limit of each; the union's first @limit are the page.
SELECT kind, merchant_id, id, order_id, attempt_id, operation_id, gateway, raised_at, reconcile_count, last_error,
	outcome, decline_code, event_id, event_type, decision, actor, note, gateway_outcome, resolved_at, due_by, audit_class,
	gateway_record_id, settle_side, gateway_side
FROM (
	(SELECT 'order'::text AS kind, o.merchant_id, o.id::text AS id, o.id::text AS order_id,
		coalesce(o.current_attempt::text, '') AS attempt_id, ''::text AS operation_id, o.gateway,
		o.updated_at AS raised_at, o.reconcile_count, o.last_error, coalesce(a.outcome, '') AS outcome,
		coalesce(a.decline_code, '') AS decline_code, ''::text AS event_id, ''::text AS event_type,
		''::text AS decision, ''::text AS actor, ''::text AS note, ''::text AS gateway_outcome,
		NULL::timestamptz AS resolved_at, NULL::timestamptz AS due_by, ''::text AS audit_class, ''::text AS gateway_record_id,
		''::text AS settle_side, ''::text AS gateway_side
	FROM orders o
	LEFT JOIN charge_attempts a ON a.merchant_id = o.merchant_id AND a.id = o.current_attempt
	WHERE o.state = 'NEEDS_REVIEW' AND (@any_merchant::bool OR o.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'order') AND o.updated_at >= @after_at::timestamptz
		AND (o.updated_at, 'order'::text, o.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY o.updated_at, o.id
	LIMIT @limit)
	UNION ALL
	(SELECT 'refund', r.merchant_id, r.id::text, r.order_id::text, '', r.id::text, o.gateway,
		r.updated_at, r.reconcile_count, r.last_error, coalesce(r.outcome, ''), r.decline_code, '', '',
		'', '', '', '', NULL, NULL, '', '', '', ''
	FROM refunds r
	JOIN orders o ON o.merchant_id = r.merchant_id AND o.id = r.order_id
	WHERE r.state = 'NEEDS_REVIEW' AND (@any_merchant::bool OR r.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'refund') AND r.updated_at >= @after_at::timestamptz
		AND (r.updated_at, 'refund'::text, r.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY r.updated_at, r.id
	LIMIT @limit)
	UNION ALL
	(SELECT 'capture', c.merchant_id, c.id::text, c.order_id::text, coalesce(o.current_attempt::text, ''),
		c.id::text, o.gateway, c.updated_at, c.reconcile_count, c.last_error, coalesce(c.outcome, ''),
		c.decline_code, '', '', '', '', '', '', NULL, NULL, '', '', '', ''
	FROM captures c
	JOIN orders o ON o.merchant_id = c.merchant_id AND o.id = c.order_id
	WHERE c.state = 'NEEDS_REVIEW' AND (@any_merchant::bool OR c.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'capture') AND c.updated_at >= @after_at::timestamptz
		AND (c.updated_at, 'capture'::text, c.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY c.updated_at, c.id
	LIMIT @limit)
	UNION ALL
	(SELECT 'void', v.merchant_id, v.id::text, v.order_id::text, coalesce(o.current_attempt::text, ''),
		v.id::text, o.gateway, v.updated_at, v.reconcile_count, v.last_error, coalesce(v.outcome, ''),
		v.decline_code, '', '', '', '', '', '', NULL, NULL, '', '', '', ''
	FROM voids v
	JOIN orders o ON o.merchant_id = v.merchant_id AND o.id = v.order_id
	WHERE v.state = 'NEEDS_REVIEW' AND (@any_merchant::bool OR v.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'void') AND v.updated_at >= @after_at::timestamptz
		AND (v.updated_at, 'void'::text, v.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY v.updated_at, v.id
	LIMIT @limit)
	UNION ALL
	(SELECT i.kind, i.merchant_id, i.id::text, i.order_id::text, i.attempt_id::text, '', i.gateway,
		i.created_at, 0, '', coalesce(nullif(e.outcome, ''), CASE WHEN e.succeeded THEN 'succeeded' ELSE '' END),
		coalesce(e.decline_code, ''), i.event_id, coalesce(e.event_type, ''), '', '', '', '', NULL, NULL, '', '', '', ''
	FROM review_items i
	LEFT JOIN gateway_events e ON e.merchant_id = i.merchant_id AND e.gateway = i.gateway AND e.event_id = i.event_id
	WHERE i.resolved_at IS NULL AND (@any_merchant::bool OR i.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', i.kind) AND i.created_at >= @after_at::timestamptz
		AND (i.created_at, i.kind, i.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY i.created_at, i.kind, i.id
	LIMIT @limit)
	UNION ALL
	(SELECT 'audit_finding', f.merchant_id, f.id::text, coalesce(f.order_id::text, ''), coalesce(f.attempt_id::text, ''),
		'', f.gateway, f.created_at, 0, '', '', '', '', '', '', '', '', '', NULL, NULL, f.class, f.gateway_record_id,
		coalesce(f.settle::text, 'null'), coalesce(f.gateway_record::text, 'null')
	FROM audit_findings f
	WHERE f.resolved_at IS NULL AND (@any_merchant::bool OR f.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'audit_finding') AND f.created_at >= @after_at::timestamptz
		AND (f.created_at, 'audit_finding'::text, f.id::text) > (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY f.created_at, f.id
	LIMIT @limit)
	UNION ALL
	(SELECT 'dispute', d.merchant_id, d.id::text, d.order_id::text, coalesce(d.attempt_id::text, ''), d.id::text,
		d.gateway, d.due_by - @due_within::interval, 0, '', '', d.reason, d.gateway_dispute_id, d.stage,
		'', '', '', '', NULL, d.due_by, '', '', '', ''
	FROM disputes d
	WHERE d.status = 'NEEDS_RESPONSE' AND d.due_by < now() + @due_within::interval
		AND (@any_merchant::bool OR d.merchant_id = nullif(@merchant_id, ''))
		AND @kind IN ('', 'dispute') AND d.due_by >= @after_at::timestamptz + @due_within::interval
		AND (d.due_by - @due_within::interval, 'dispute'::text, d.id::text)
			> (@after_at::timestamptz, @after_kind::text, @after_id::text)
	ORDER BY d.due_by, d.id
	LIMIT @limit)
) q
ORDER BY raised_at, kind, id
LIMIT @limit;
