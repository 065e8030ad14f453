-- Record gateways' answers for one or many orders in one statement, so one
-- round trip and one commit however many it settles. Element i of each
-- array is the i-th settlement, and the row returned for it carries i. Each
-- row is guarded by its order still being in from_state (CHARGING, or
-- REQUIRES_ACTION) for its attempt: of a late server response, a returning
-- customer and a reconciler, exactly one wins and writes one event. A
-- settlement with no event leaves its order in from_state (to_state is
-- from_state), to be checked again after its recheck_in. No order may appear twice: which of
-- two settlements of one order a single UPDATE applies is undefined.
-- A reconciler's settlement carries its lease (the reconcile_at its lease
-- set) and applies only while the order's reconcile_at is still that: a
-- gateway event recorded during the lookup brought it to now, and the
-- lookup's verdict may predate what the event says (order.Settlement.Lease).
--
-- locked takes the orders' row locks in id order before anything is
-- written, so that two statements settling overlapping sets of orders wait
-- for each other instead of deadlocking. As in claim.sql, the guard is
-- checked once, on the latest versions that locked holds, not on upd's
-- scan, whose snapshot can predate a settle that locked waited for.
--
-- Each array argument is read through a subquery of its own, so that the
-- planner cannot see its length: PostgreSQL then keeps one plan per
-- connection instead of planning every run afresh for the group at hand,
-- which cost more than running it (internal/onerow says why and how much).
--
-- settle.sql is this statement for one settlement, which is every
-- settle without load: go generate derives it from this file, each array
-- argument a scalar of the same name. It is kept because a group of one
-- runs faster as a single row than as arrays of one (0.4 ms per order at
-- one client, p50, settle bench, when the grouped form was planned at
-- every run).
WITH st AS (
	SELECT * FROM unnest((SELECT @merchant_id::text[]), (SELECT @order_id::uuid[]), (SELECT @attempt_id::uuid[]),
		(SELECT @to_state::text[]), (SELECT @recheck_in::interval[]), (SELECT @checked::bool[]),
		(SELECT @last_error::text[]), (SELECT @outcome::text[]), (SELECT @decline_code::text[]),
		(SELECT @charge_id::text[]), (SELECT @event::text[]), (SELECT @actor::text[]),
		(SELECT @reason::text[]), (SELECT @from_state::text[]), (SELECT @authorized_minor::bigint[]),
		(SELECT @capture_before::timestamptz[]), (SELECT @lease::timestamptz[])) WITH ORDINALITY
		AS st(merchant_id, order_id, attempt_id, to_state, recheck_in, checked, last_error,
			outcome, decline_code, charge_id, event, actor, reason, from_state, authorized_minor, capture_before,
			lease, i)
), timed AS (
	-- The times are read here rather than in the UPDATEs' SET lists: Citus
	-- refuses a stable function (now(), timestamptz + interval) applied to a
	-- column, or inside a CASE, in an UPDATE's SET list.
	SELECT st.*, now() AS now, now() + st.recheck_in AS recheck_at FROM st
), locked AS MATERIALIZED (
	-- Each order read by its key, in id order (see sql/README.md, "Plans
	-- that do not depend on the statistics").
	SELECT o.* FROM (SELECT merchant_id, order_id FROM st ORDER BY order_id) k
	CROSS JOIN LATERAL (
		SELECT merchant_id, id, state, current_attempt, reconcile_at FROM orders
		WHERE merchant_id = k.merchant_id AND id = k.order_id OFFSET 0 FOR UPDATE
	) o
), upd AS (
	UPDATE orders o SET
		state = st.to_state,
		reconcile_at = CASE WHEN st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN st.recheck_at END,
		reconcile_count = o.reconcile_count + st.checked::int,
		last_error = st.last_error,
		updated_at = CASE WHEN st.to_state = st.from_state THEN o.updated_at ELSE st.now END,
		-- An authorization (capture manual) records what the gateway holds.
		authorized_minor = CASE WHEN st.to_state = 'AUTHORIZED' THEN coalesce(nullif(st.authorized_minor, 0), o.amount_minor) ELSE o.authorized_minor END,
		capture_before = CASE WHEN st.to_state = 'AUTHORIZED' THEN st.capture_before ELSE o.capture_before END
	FROM locked JOIN timed st ON st.merchant_id = locked.merchant_id AND st.order_id = locked.id
	WHERE o.merchant_id = locked.merchant_id AND o.id = locked.id
		AND locked.state = st.from_state AND locked.current_attempt = st.attempt_id
		AND (st.lease IS NULL OR locked.reconcile_at = st.lease)
	RETURNING o.*, st.i, st.outcome, st.decline_code, st.charge_id, st.event, st.actor, st.reason, st.now, st.from_state
), att AS (
	UPDATE charge_attempts a SET outcome = upd.outcome, decline_code = upd.decline_code,
		gateway_charge_id = upd.charge_id,
		settled_at = CASE WHEN upd.state IN ('CHARGING', 'REQUIRES_ACTION') THEN NULL ELSE upd.now END
	FROM upd WHERE a.merchant_id = upd.merchant_id AND a.id = upd.current_attempt
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, from_state, state, event, actor, reason, current_attempt FROM upd WHERE event <> ''
)
SELECT i,
	id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at,
	refunded_minor, refunding_minor, capture_mode, authorized_minor, captured_minor, capturing_minor, voiding, hold_closed, capture_before
FROM upd;
