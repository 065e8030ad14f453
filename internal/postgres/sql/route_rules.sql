-- A merchant's latest route rules (migration 00026); no row when it has
-- none.
SELECT version, rules::text AS rules, actor, note, created_at
FROM route_rules
WHERE merchant_id = @merchant_id
ORDER BY version DESC
LIMIT 1;
