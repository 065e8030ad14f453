-- Moves an audit run's checkpoint, guarded by the checkpoint the caller
-- read (phase and cursor): of two processes resuming one run, one moves
-- it, and the other's transaction, which gets no row, is rolled back with
-- what it matched. It runs first in its transaction, so that the run's
-- row lock orders them. A run moved to done is then finished by
-- audit_finish.sql.
UPDATE audit_runs
SET phase = @phase, cursor_created = @cursor_created, cursor_id = @cursor_id, seen = @seen, counts = @counts::jsonb,
	updated_at = now()
WHERE merchant_id = @merchant_id AND id = @id::uuid AND finished_at IS NULL
	AND phase = @from_phase AND cursor_created = @from_created AND cursor_id = @from_id
RETURNING id::text;
