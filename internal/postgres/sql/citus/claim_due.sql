-- The CHARGING and REQUIRES_ACTION orders due for a check, oldest first, read without locks:
-- on Citus, the first half of the reconciler's lease (see ClaimDue). A
-- distributed query may not lock rows on several shards (FOR UPDATE SKIP
-- LOCKED is a single-shard feature there), so each candidate is then
-- leased alone by lease_order.sql, on its merchant's shard.
SELECT merchant_id, id::text FROM orders
WHERE state IN ('CHARGING', 'REQUIRES_ACTION') AND reconcile_at <= now()
ORDER BY reconcile_at
LIMIT @limit;
