-- Starts an audit run, or finds the unfinished run of the same merchant,
-- gateway account and window (audit_runs_open_key), which the caller then
-- resumes from its checkpoint. (A run that is not covered is finished by
-- audit_finish.sql in the same transaction: Citus takes no now() within
-- a CASE of a write.)
WITH ins AS (
	INSERT INTO audit_runs (merchant_id, id, gateway, window_from, window_to, margin, phase, coverage, coverage_reason,
		actor)
	VALUES (@merchant_id, @id::uuid, @gateway, @window_from, @window_to, @margin, @phase, @coverage, @coverage_reason,
		@actor)
	ON CONFLICT (merchant_id, gateway, window_from, window_to) WHERE finished_at IS NULL DO NOTHING
	RETURNING *
)
SELECT merchant_id, id::text, gateway, window_from, window_to, (extract(epoch FROM margin) * 1000000)::bigint AS margin_us, phase, cursor_created,
	cursor_id, seen, counts::text AS counts,
	coverage, coverage_reason, actor, started_at, finished_at
FROM ins
UNION ALL
SELECT merchant_id, id::text, gateway, window_from, window_to, (extract(epoch FROM margin) * 1000000)::bigint AS margin_us, phase, cursor_created,
	cursor_id, seen, counts::text AS counts,
	coverage, coverage_reason, actor, started_at, finished_at
FROM audit_runs
WHERE merchant_id = @merchant_id AND gateway = @gateway AND window_from = @window_from AND window_to = @window_to
	AND finished_at IS NULL AND NOT EXISTS (SELECT 1 FROM ins);
