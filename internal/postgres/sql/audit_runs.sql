-- A merchant's audit runs, the latest started first.
SELECT merchant_id, id::text, gateway, window_from, window_to, (extract(epoch FROM margin) * 1000000)::bigint AS margin_us, phase, cursor_created,
	cursor_id, seen, counts::text AS counts,
	coverage, coverage_reason, actor, started_at, finished_at
FROM audit_runs
WHERE merchant_id = @merchant_id
ORDER BY started_at DESC, id
LIMIT @limit;
