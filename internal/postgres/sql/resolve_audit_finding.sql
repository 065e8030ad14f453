-- Resolves a merchant's open audit finding with an operator's note,
-- guarded by resolved_at IS NULL: of two operators resolving at once, one
-- does; a resolved finding is left as it is, and the statement returns no
-- row.
UPDATE audit_findings
SET actor = @actor, note = @note, resolved_at = now()
WHERE merchant_id = @merchant_id AND id = @id::uuid AND resolved_at IS NULL
RETURNING id::text;
