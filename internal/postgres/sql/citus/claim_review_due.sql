-- The NEEDS_REVIEW orders whose slow recheck has come, oldest first, read
-- without locks: on Citus, the first half of the reconciler's review lease,
-- as claim_due.sql is for CHARGING orders; lease_review.sql leases each.
SELECT merchant_id, id::text FROM orders
WHERE state = 'NEEDS_REVIEW' AND coalesce(reconcile_at, updated_at + @cadence::interval) <= now()
ORDER BY coalesce(reconcile_at, updated_at + @cadence::interval)
LIMIT @limit;
