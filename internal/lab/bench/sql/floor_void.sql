-- The SQL floor of a hold placed and released: an order created already
-- claimed with capture manual, settled AUTHORIZED, then voided (the void
-- claimed, then settled), as CreateAndChargeOrder (capture manual) and
-- VoidOrder do. Four autocommit statements, each a data-modifying CTE: 4
-- round trips and 4 commits per void, writing the rows Settle writes (the
-- order, its attempt, its events, the void and its hold events) under
-- the same constraints.
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/floor_void.sql DB
--
-- As in floor.sql, each step returns what the next step's guard takes.

\set amount random(100, 100000)

-- Create and claim: the order in CHARGING with its attempt and a lease.
WITH ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		state, current_attempt, reconcile_at, capture_mode)
	VALUES (gen_random_uuid(), 'default', 'floorv-' || gen_random_uuid(), :amount, 'GBP', 'tok_ok', 'instant',
		'CHARGING', gen_random_uuid(), now() + interval '15 seconds', 'manual')
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING merchant_id, id, state, current_attempt, payment_method, amount_minor, currency
), att AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
	SELECT current_attempt, id, 'default', 'req-' || id, payment_method, amount_minor, currency FROM ins
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
	SELECT merchant_id, id, NULL, 'PENDING', 'create', 'api', NULL FROM ins
	UNION ALL
	SELECT merchant_id, id, 'PENDING', state, 'charge', 'api', current_attempt FROM ins
)
SELECT id AS order_id, current_attempt AS attempt_id, state AS order_state FROM ins
\gset

-- Settle: the gateway authorized; guarded by state and attempt.
WITH upd AS (
	UPDATE orders SET state = 'AUTHORIZED', reconcile_at = NULL, last_error = '', updated_at = now(),
		authorized_minor = amount_minor, capture_before = now() + interval '7 days'
	WHERE merchant_id = 'default' AND id = :order_id::uuid AND state = :order_state AND current_attempt = :attempt_id::uuid
	RETURNING merchant_id, id, state
), att AS (
	UPDATE charge_attempts SET outcome = 'succeeded', gateway_charge_id = 'ch_floor', settled_at = now()
	WHERE merchant_id = 'default' AND id = :attempt_id::uuid AND EXISTS (SELECT 1 FROM upd)
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, :order_state, state, 'authorize', 'api', '', :attempt_id::uuid FROM upd
)
SELECT state AS order_state FROM upd
\gset

-- Void claim: lock the order, admit the void while nothing is captured
-- or voiding, mark the order voiding, append the void's creation and
-- start.
WITH ord AS (
	SELECT id, state, capture_mode, captured_minor, capturing_minor, voiding FROM orders
	WHERE merchant_id = 'default' AND id = :order_id::uuid
	FOR UPDATE
), ins AS (
	INSERT INTO voids (merchant_id, id, order_id, request_id, reason, actor, state, reconcile_at)
	SELECT 'default', gen_random_uuid(), id, 'void-' || id, '', 'api', 'VOIDING', now() + interval '15 seconds'
	FROM ord
	WHERE state = 'AUTHORIZED' AND capture_mode = 'manual' AND captured_minor = 0 AND capturing_minor = 0 AND NOT voiding
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING id, order_id
), upd AS (
	UPDATE orders o SET voiding = true
	FROM ins WHERE o.merchant_id = 'default' AND o.id = ins.order_id
), ev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, 'void', id, NULL, 'PENDING', 'create', 'api' FROM ins
	UNION ALL
	SELECT 'default', order_id, 'void', id, 'PENDING', 'VOIDING', 'start', 'api' FROM ins
)
SELECT id AS void_id FROM ins
\gset

-- Void settle: the gateway said succeeded; guarded by the void's state.
WITH lockedo AS MATERIALIZED (
	SELECT id, state FROM orders WHERE merchant_id = 'default' AND id = :order_id::uuid FOR UPDATE
), upv AS (
	UPDATE voids SET state = 'SUCCEEDED', outcome = 'succeeded', reconcile_at = NULL, updated_at = now(),
		settled_at = now()
	WHERE merchant_id = 'default' AND id = :void_id::uuid AND state = 'VOIDING'
	RETURNING id, order_id
), upo AS (
	UPDATE orders o SET voiding = false, state = 'VOIDED', updated_at = now()
	FROM lockedo JOIN upv ON upv.order_id = lockedo.id
	WHERE o.merchant_id = 'default' AND o.id = lockedo.id AND lockedo.state = 'AUTHORIZED'
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, void_id)
	SELECT 'default', lockedo.id, lockedo.state, 'VOIDED', 'void', 'api', '', upv.id
	FROM lockedo JOIN upv ON upv.order_id = lockedo.id
), hev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, 'void', id, 'VOIDING', 'SUCCEEDED', 'succeed', 'api' FROM upv
)
SELECT id AS settled_id FROM upv
\gset
