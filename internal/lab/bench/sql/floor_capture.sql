-- The SQL floor of a capture: Settle's durable work for one capture, as
-- tight as SQL allows, on Settle's own schema. Two autocommit statements
-- (claim, settle), each a data-modifying CTE: 2 round trips and 2 commits
-- per capture, writing the rows Settle writes (the capture, three hold
-- events, the order's totals and its event) under the same constraints.
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/floor_capture.sql DB
--
-- Each client captures 1 minor unit at a time, not final, from its own
-- AUTHORIZED order (merchant reference capture-floor-<client_id>, capture
-- manual, made by settle bench before the run with a hold that never runs
-- out), as the load client's workers do against Settle, so that clients do
-- not wait for each other's row locks.

-- Claim: lock the order, admit the capture if it fits in what is left of
-- the hold, reserve it, append the capture's creation and claim.
WITH ord AS (
	SELECT id, state, currency, capture_mode, hold_closed, voiding, authorized_minor, captured_minor, capturing_minor
	FROM orders
	WHERE merchant_id = 'default' AND merchant_reference = 'capture-floor-' || :client_id
	FOR UPDATE
), ins AS (
	INSERT INTO captures (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, final, actor,
		state, reconcile_at)
	SELECT 'default', gen_random_uuid(), id, 'capture-' || gen_random_uuid(), 1, 1, currency, false, 'api',
		'CAPTURING', now() + interval '15 seconds'
	FROM ord
	WHERE state IN ('AUTHORIZED', 'PAID') AND capture_mode = 'manual' AND NOT hold_closed AND NOT voiding
		AND 1 <= authorized_minor - captured_minor - capturing_minor
	RETURNING id, order_id, amount_minor
), upd AS (
	UPDATE orders o SET capturing_minor = ord.capturing_minor + ins.amount_minor
	FROM ord JOIN ins ON ins.order_id = ord.id
	WHERE o.merchant_id = 'default' AND o.id = ord.id
), ev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, 'capture', id, NULL, 'PENDING', 'create', 'api' FROM ins
	UNION ALL
	SELECT 'default', order_id, 'capture', id, 'PENDING', 'CAPTURING', 'start', 'api' FROM ins
)
SELECT id AS capture_id, order_id FROM ins
\gset

-- Settle: the gateway said succeeded; guarded by the capture's state.
WITH lockedo AS MATERIALIZED (
	SELECT id, state, captured_minor, capturing_minor FROM orders
	WHERE merchant_id = 'default' AND id = :order_id::uuid
	FOR UPDATE
), upc AS (
	UPDATE captures SET state = 'SUCCEEDED', outcome = 'succeeded', gateway_capture_id = 'cp_floor',
		reconcile_at = NULL, updated_at = now(), settled_at = now()
	WHERE merchant_id = 'default' AND id = :capture_id::uuid AND state = 'CAPTURING'
	RETURNING id, order_id, amount_minor
), upo AS (
	UPDATE orders o SET captured_minor = lockedo.captured_minor + upc.amount_minor,
		capturing_minor = lockedo.capturing_minor - upc.amount_minor, state = 'PAID', updated_at = now()
	FROM lockedo JOIN upc ON upc.order_id = lockedo.id
	WHERE o.merchant_id = 'default' AND o.id = lockedo.id
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, capture_id)
	SELECT 'default', lockedo.id, lockedo.state, 'PAID', 'captured', 'api', upc.id
	FROM lockedo JOIN upc ON upc.order_id = lockedo.id
), hev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, 'capture', id, 'CAPTURING', 'SUCCEEDED', 'succeed', 'api' FROM upc
)
SELECT id AS settled_id FROM upc
\gset
