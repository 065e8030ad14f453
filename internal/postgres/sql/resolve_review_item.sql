-- Resolves a merchant's open review item with an operator's decision,
-- guarded by resolved_at IS NULL: of two operators deciding at once, one
-- does; a resolved item is left as it is, and the statement returns no
-- row.
UPDATE review_items
SET decision = @decision, actor = @actor, note = @note, gateway_outcome = @gateway_outcome, resolved_at = now()
WHERE merchant_id = @merchant_id AND id = @id::uuid AND resolved_at IS NULL
RETURNING id::text;
