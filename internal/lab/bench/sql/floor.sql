-- The SQL floor: Settle's durable work for one order, as tight as SQL
-- allows, on Settle's own schema. Three autocommit statements (create,
-- claim, settle), each a data-modifying CTE: 3 round trips and 3 commits
-- per order, writing the same rows Settle writes (the order, its attempt,
-- three events) under the same constraints, indexes and trigger.
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/floor.sql DB
--
-- \gset needs exactly one row, so a step that did nothing fails the run.
-- Each step returns the state it left the order in, and the next step's
-- guard takes it as a parameter, as Settle's statements take theirs: a
-- literal 'CHARGING' would let the planner, which sees from the statistics
-- that almost no order is CHARGING, scan orders by state rather than by id.

\set amount random(100, 100000)

-- Create: the order and its creation event; idempotent on the reference.
WITH ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
	VALUES (gen_random_uuid(), 'default', 'floor-' || gen_random_uuid(), :amount, 'GBP', 'tok_ok', 'instant', 'PENDING')
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING merchant_id, id, state
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
	SELECT merchant_id, id, NULL, state, 'create', 'api' FROM ins
)
SELECT id AS order_id, state AS order_state FROM ins
\gset

-- Claim: lock the PENDING order, create the attempt, move to CHARGING with
-- a lease, append the event.
WITH ord AS (
	SELECT id, state, payment_method, amount_minor, currency FROM orders
	WHERE id = :order_id::uuid AND merchant_id = 'default'
	FOR UPDATE
), att AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
	SELECT gen_random_uuid(), id, 'default', 'req-' || id, payment_method, amount_minor, currency
	FROM ord WHERE state = :order_state
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING id, order_id
), upd AS (
	UPDATE orders o SET state = 'CHARGING', current_attempt = att.id, reconcile_at = now() + interval '15 seconds',
		reconcile_count = 0, last_error = '', updated_at = now()
	FROM att WHERE o.merchant_id = 'default' AND o.id = att.order_id
	RETURNING o.merchant_id, o.id, o.state, o.current_attempt
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
	SELECT merchant_id, id, :order_state, state, 'charge', 'api', current_attempt FROM upd
)
SELECT current_attempt AS attempt_id, state AS order_state FROM upd
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
