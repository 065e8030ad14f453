-- The REFUNDING refunds due for a check, oldest first, read without locks:
-- on Citus, the first half of the reconciler's refund lease, as
-- claim_due.sql is for orders; lease_refund.sql leases each.
SELECT merchant_id, id::text FROM refunds
WHERE state = 'REFUNDING' AND reconcile_at <= now()
ORDER BY reconcile_at
LIMIT @limit;
