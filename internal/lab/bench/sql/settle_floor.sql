-- The reconciler's floor: the settle statement alone, once per due
-- CHARGING order, on the rows that `settle bench` bulk-inserts for the
-- reconciler drain: order i of the drain tagged T has id
-- md5('drain-T-' || i)::uuid and attempt md5('drain-attempt-T-' || i)::uuid.
-- Each client settles its own slice of the orders, so no two clients touch
-- one row. The guard's state is a parameter, as in Settle's statement (see
-- floor.sql):
--
--   pgbench -M prepared -n -c C -j min(C,2) -t N/C -D per_client=N/C -D k=0 -D tag=T -D charging=CHARGING \
--     -f bench/settle_floor.sql DB

\set k :k + 1
\set n :client_id * :per_client + :k

WITH upd AS (
	UPDATE orders SET state = 'PAID', reconcile_at = NULL, reconcile_count = reconcile_count + 1,
		last_error = '', updated_at = now()
	WHERE merchant_id = 'default' AND id = md5('drain-' || :tag || '-' || :n::bigint)::uuid AND state = :charging
		AND current_attempt = md5('drain-attempt-' || :tag || '-' || :n::bigint)::uuid
	RETURNING merchant_id, id, current_attempt
), att AS (
	UPDATE charge_attempts SET outcome = 'succeeded', gateway_charge_id = 'ch_floor', settled_at = now()
	WHERE merchant_id = 'default' AND id = (SELECT current_attempt FROM upd)
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, :charging, 'PAID', 'succeed', 'reconciler', 'gateway has the charge', current_attempt FROM upd
)
SELECT id AS settled_id FROM upd
\gset
