-- The AUTHORIZED orders past their capture_before whose recheck has come,
-- oldest first, read without locks: on Citus, the first half of the
-- reconciler's hold lease (see sql/claim_due_holds.sql); lease_hold.sql
-- leases each.
SELECT merchant_id, id::text FROM orders
WHERE state = 'AUTHORIZED' AND capture_before <= now() AND coalesce(reconcile_at, capture_before) <= now()
ORDER BY coalesce(reconcile_at, capture_before)
LIMIT @limit;
