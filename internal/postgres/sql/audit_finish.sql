-- Finishes an audit run that reached its last phase: it leaves
-- audit_runs_open_key, and the schedule's next window starts at its end.
UPDATE audit_runs
SET finished_at = now(), updated_at = now()
WHERE merchant_id = @merchant_id AND id = @id::uuid AND phase = 'done' AND finished_at IS NULL
RETURNING id::text, finished_at;
