-- The CAPTURING captures due for a check, oldest first, read without
-- locks: on Citus, the first half of the reconciler's capture lease, as
-- claim_due_refunds.sql is for refunds; lease_capture.sql leases each.
SELECT merchant_id, id::text FROM captures
WHERE state = 'CAPTURING' AND reconcile_at <= now()
ORDER BY reconcile_at
LIMIT @limit;
