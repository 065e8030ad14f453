-- The merchant's finished audit run of a gateway account whose window
-- ends latest: where the schedule's next window starts.
SELECT merchant_id, id::text, gateway, window_from, window_to, (extract(epoch FROM margin) * 1000000)::bigint AS margin_us, phase, cursor_created,
	cursor_id, seen, counts::text AS counts,
	coverage, coverage_reason, actor, started_at, finished_at
FROM audit_runs
WHERE merchant_id = @merchant_id AND gateway = @gateway AND finished_at IS NOT NULL
ORDER BY window_to DESC
LIMIT 1;
