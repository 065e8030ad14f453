-- The next version of a merchant's route rules. The store has read the
-- latest version first; when another change took this version since,
-- the key makes this insert nothing, and the change is refused.
INSERT INTO route_rules (merchant_id, version, rules, actor, note)
VALUES (@merchant_id, @version, @rules::jsonb, @actor, @note)
ON CONFLICT (merchant_id, version) DO NOTHING
RETURNING version, rules::text AS rules, actor, note, created_at;
