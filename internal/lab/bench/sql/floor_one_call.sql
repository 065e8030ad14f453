-- The SQL floor of the one-call path (CreateAndChargeOrder): an order
-- created already claimed, then settled. Two autocommit statements, each a
-- data-modifying CTE: 2 commits and 2 round trips per order, writing the
-- same rows as floor.sql (the order, its attempt, three events).
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/floor_one_call.sql DB
--
-- As in floor.sql, each step returns the state it left the order in and the
-- next step's guard takes it as a parameter.

\set amount random(100, 100000)

-- Create and claim: the order in CHARGING with its attempt and a lease,
-- its creation and charge events; idempotent on the reference.
WITH ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		state, current_attempt, reconcile_at)
	VALUES (gen_random_uuid(), 'default', 'floor1-' || gen_random_uuid(), :amount, 'GBP', 'tok_ok', 'instant',
		'CHARGING', gen_random_uuid(), now() + interval '15 seconds')
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

-- Settle: the gateway said succeeded; guarded by state and attempt.
WITH upd AS (
	UPDATE orders SET state = 'PAID', reconcile_at = NULL, last_error = '', updated_at = now()
	WHERE merchant_id = 'default' AND id = :order_id::uuid AND state = :order_state AND current_attempt = :attempt_id::uuid
	RETURNING merchant_id, id, state
), att AS (
	UPDATE charge_attempts SET outcome = 'succeeded', gateway_charge_id = 'ch_floor', settled_at = now()
	WHERE merchant_id = 'default' AND id = :attempt_id::uuid AND EXISTS (SELECT 1 FROM upd)
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, :order_state, state, 'succeed', 'api', '', :attempt_id::uuid FROM upd
)
SELECT id AS settled_id FROM upd
\gset
