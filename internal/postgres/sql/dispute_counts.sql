-- The metrics' counts of disputes (every merchant's): by status, and the
-- open ones due within @within (database time), with no response yet
-- (NEEDS_RESPONSE).
SELECT status, count(*) AS n,
	count(*) FILTER (WHERE status = 'NEEDS_RESPONSE' AND due_by IS NOT NULL AND due_by < now() + @within::interval)
		AS due_soon
FROM disputes
GROUP BY status;
