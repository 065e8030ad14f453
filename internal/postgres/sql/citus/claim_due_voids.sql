-- The VOIDING voids due for a check, oldest first, read without locks: on
-- Citus, the first half of the reconciler's void lease, as
-- claim_due_refunds.sql is for refunds; lease_void.sql leases each.
SELECT merchant_id, id::text FROM voids
WHERE state = 'VOIDING' AND reconcile_at <= now()
ORDER BY reconcile_at
LIMIT @limit;
