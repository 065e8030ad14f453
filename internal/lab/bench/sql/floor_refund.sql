-- The SQL floor of a refund: Settle's durable work for one refund, as
-- tight as SQL allows, on Settle's own schema. Two autocommit statements
-- (claim, settle), each a data-modifying CTE: 2 round trips and 2 commits
-- per refund, writing the rows Settle writes (the refund, three refund
-- events, the order's totals and its event) under the same constraints.
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/floor_refund.sql DB
--
-- Each client refunds 1 minor unit at a time from its own PAID order
-- (merchant reference refund-floor-<client_id>, made by settle bench before
-- the run with an amount that never runs out), as the load client's
-- workers do against Settle, so that clients do not wait for each other's
-- row locks.

-- Claim: lock the order, admit the refund if it fits in what is left,
-- reserve it, append the refund's creation and claim.
WITH ord AS (
	SELECT id, state, currency, amount_minor, refunded_minor, refunding_minor FROM orders
	WHERE merchant_id = 'default' AND merchant_reference = 'refund-floor-' || :client_id
	FOR UPDATE
), ins AS (
	INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, actor, state,
		reconcile_at)
	SELECT 'default', gen_random_uuid(), id, 'refund-' || gen_random_uuid(), 1, 1, currency, 'api', 'REFUNDING',
		now() + interval '15 seconds'
	FROM ord
	WHERE state IN ('PAID', 'PARTIALLY_REFUNDED') AND 1 <= amount_minor - refunded_minor - refunding_minor
	RETURNING id, order_id, amount_minor
), upd AS (
	UPDATE orders o SET refunding_minor = ord.refunding_minor + ins.amount_minor
	FROM ord JOIN ins ON ins.order_id = ord.id
	WHERE o.merchant_id = 'default' AND o.id = ord.id
), ev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, id, NULL, 'PENDING', 'create', 'api' FROM ins
	UNION ALL
	SELECT 'default', order_id, id, 'PENDING', 'REFUNDING', 'refund', 'api' FROM ins
)
SELECT id AS refund_id, order_id FROM ins
\gset

-- Settle: the gateway said succeeded; guarded by the refund's state.
WITH lockedo AS MATERIALIZED (
	SELECT id, state, refunded_minor, refunding_minor FROM orders
	WHERE merchant_id = 'default' AND id = :order_id::uuid
	FOR UPDATE
), upr AS (
	UPDATE refunds SET state = 'SUCCEEDED', outcome = 'succeeded', gateway_refund_id = 're_floor', reconcile_at = NULL,
		updated_at = now(), settled_at = now()
	WHERE merchant_id = 'default' AND id = :refund_id::uuid AND state = 'REFUNDING'
	RETURNING id, order_id, amount_minor
), upo AS (
	UPDATE orders o SET refunded_minor = lockedo.refunded_minor + upr.amount_minor,
		refunding_minor = lockedo.refunding_minor - upr.amount_minor, state = 'PARTIALLY_REFUNDED', updated_at = now()
	FROM lockedo JOIN upr ON upr.order_id = lockedo.id
	WHERE o.merchant_id = 'default' AND o.id = lockedo.id
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, refund_id)
	SELECT 'default', lockedo.id, lockedo.state, 'PARTIALLY_REFUNDED', 'refund_partial', 'api', upr.id
	FROM lockedo JOIN upr ON upr.order_id = lockedo.id
), rev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor)
	SELECT 'default', order_id, id, 'REFUNDING', 'SUCCEEDED', 'succeed', 'api' FROM upr
)
SELECT id AS settled_id FROM upr
\gset
