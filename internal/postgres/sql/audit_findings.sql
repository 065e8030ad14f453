-- The findings an audit run saw (found first, or found again), oldest
-- first.
SELECT merchant_id, id::text, run_id::text, gateway, class, coalesce(order_id::text, '') AS order_id,
	coalesce(attempt_id::text, '') AS attempt_id, gateway_record_id, coalesce(settle, 'null') AS settle,
	coalesce(gateway_record, 'null') AS gateway_record, created_at, resolved_at, actor, note
FROM audit_findings
WHERE merchant_id = @merchant_id AND last_run_id = @run_id::uuid
ORDER BY created_at, id;
