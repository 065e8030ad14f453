-- Record gateways' answers for one or many refunds in one statement, so
-- one round trip and one commit however many it settles. Element i of each
-- array is the i-th settlement, and the row returned for it carries i. No
-- order may appear twice: the store's batcher puts two settlements of one
-- order's refunds in two statements, since one UPDATE of the order could
-- not apply both.
--
-- Each row is guarded by its refund still being in from_state
-- (REFUNDING, or NEEDS_REVIEW for an operator's decision) and belonging to
-- order_id: of a late server response and a reconciler, exactly one wins
-- and writes its events. A refund that succeeds adds its amount to the
-- order's refunded total and moves the order with partial_event or
-- full_event (the latter when the total reaches what was paid); one that
-- fails releases its reservation; one escalated to review keeps it, since
-- the money may have gone back; a recheck only pushes reconcile_at. A
-- reconciler's settle carries its lease and applies only while the
-- refund's reconcile_at is still what the lease set (a gateway event
-- recorded during the lookup moved it; order.RefundSettlement.Lease).
--
-- lockedo locks the orders, in id order, before lockedr locks any refund
-- (the count makes lockedo run to its end first): the order claims, refund
-- claims and settles take their locks in, so that two statements never
-- deadlock. As in claims.sql, the guard and the new totals are read from
-- the locked rows, not from the updates' scans, whose snapshot can predate
-- a change that the locks waited for.
--
-- refund_settle.sql is this statement for one settlement, which is every
-- settle without load: go generate derives it from this file.
WITH st AS (
	SELECT * FROM unnest((SELECT @merchant_id::text[]), (SELECT @order_id::uuid[]), (SELECT @refund_id::uuid[]),
		(SELECT @from_state::text[]), (SELECT @to_state::text[]), (SELECT @outcome::text[]),
		(SELECT @decline_code::text[]), (SELECT @gateway_refund_id::text[]), (SELECT @recheck_in::interval[]),
		(SELECT @checked::bool[]), (SELECT @last_error::text[]), (SELECT @event::text[]), (SELECT @actor::text[]),
		(SELECT @reason::text[]), (SELECT @partial_event::text[]), (SELECT @partial_to::text[]),
		(SELECT @full_event::text[]), (SELECT @full_to::text[]), (SELECT @lease::timestamptz[])) WITH ORDINALITY
		AS st(merchant_id, order_id, refund_id, from_state, to_state, outcome, decline_code, gateway_refund_id,
			recheck_in, checked, last_error, event, actor, reason, partial_event, partial_to, full_event, full_to,
			lease, i)
), timed AS (
	-- The times are read here rather than in the UPDATEs' SET lists: Citus
	-- refuses a stable function (now()) inside a CASE in an UPDATE's SET list.
	SELECT st.*, now() AS now, now() + st.recheck_in AS recheck_at FROM st
), lockedo AS MATERIALIZED (
	-- Each order read by its key, in id order (see sql/README.md, "Plans
	-- that do not depend on the statistics").
	SELECT o.* FROM (SELECT merchant_id, order_id FROM st ORDER BY order_id) k
	CROSS JOIN LATERAL (
		SELECT * FROM orders WHERE merchant_id = k.merchant_id AND id = k.order_id OFFSET 0 FOR UPDATE
	) o
), lockedr AS MATERIALIZED (
	SELECT r.* FROM st CROSS JOIN LATERAL (
		SELECT * FROM refunds WHERE merchant_id = st.merchant_id AND id = st.refund_id OFFSET 0 FOR UPDATE
	) r
	WHERE (SELECT count(*) FROM lockedo) > 0
), upr AS (
	UPDATE refunds r SET
		state = st.to_state,
		outcome = nullif(st.outcome, ''), decline_code = st.decline_code, gateway_refund_id = st.gateway_refund_id,
		reconcile_at = CASE WHEN st.to_state = 'REFUNDING' THEN st.recheck_at END,
		reconcile_count = lockedr.reconcile_count + st.checked::int,
		last_error = st.last_error,
		updated_at = CASE WHEN st.to_state = 'REFUNDING' THEN lockedr.updated_at ELSE st.now END,
		settled_at = CASE WHEN st.to_state = 'REFUNDING' THEN NULL ELSE st.now END
	FROM lockedr JOIN timed st ON st.merchant_id = lockedr.merchant_id AND st.refund_id = lockedr.id
	WHERE r.merchant_id = lockedr.merchant_id AND r.id = lockedr.id AND lockedr.state = st.from_state
		AND lockedr.order_id = st.order_id
		AND (st.lease IS NULL OR lockedr.reconcile_at = st.lease)
	RETURNING r.*, st.i
), nxt AS (
	-- A refund is full when the refunded total reaches what was paid: the
	-- amount, or for a capture-manual order what was captured.
	SELECT lockedo.merchant_id, lockedo.id, upr.i,
		lockedo.refunded_minor + CASE WHEN upr.state = 'SUCCEEDED' THEN upr.amount_minor ELSE 0 END AS refunded,
		lockedo.refunding_minor
			- CASE WHEN upr.state IN ('SUCCEEDED', 'FAILED') THEN upr.amount_minor ELSE 0 END AS refunding,
		CASE
			WHEN upr.state <> 'SUCCEEDED' THEN ''
			WHEN lockedo.refunded_minor + upr.amount_minor >= CASE WHEN lockedo.capture_mode = 'manual' THEN lockedo.captured_minor ELSE lockedo.amount_minor END THEN st.full_event
			ELSE st.partial_event
		END AS event,
		CASE
			WHEN upr.state <> 'SUCCEEDED' THEN lockedo.state
			WHEN lockedo.refunded_minor + upr.amount_minor >= CASE WHEN lockedo.capture_mode = 'manual' THEN lockedo.captured_minor ELSE lockedo.amount_minor END THEN st.full_to
			ELSE st.partial_to
		END AS to_state,
		lockedo.state AS from_state, upr.id AS refund_id, lockedo.updated_at, st.actor, st.now,
		upr.state IN ('SUCCEEDED', 'FAILED') AS changed
	FROM lockedo JOIN upr ON upr.merchant_id = lockedo.merchant_id AND upr.order_id = lockedo.id
		JOIN timed st ON st.i = upr.i
), upo AS (
	-- Whether the order changes is nxt's to say, from the locked row: a
	-- condition on o here would be checked first on the version in this
	-- statement's snapshot, and a refund claimed meanwhile can make that
	-- version look already settled (two refunds of one amount), leaving
	-- the order's reservation behind.
	UPDATE orders o SET refunded_minor = nxt.refunded, refunding_minor = nxt.refunding, state = nxt.to_state,
		updated_at = CASE WHEN nxt.event = '' THEN nxt.updated_at ELSE nxt.now END
	FROM nxt
	WHERE o.merchant_id = nxt.merchant_id AND o.id = nxt.id AND nxt.changed
	RETURNING o.*
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, refund_id)
	SELECT merchant_id, id, from_state, to_state, event, actor, '', refund_id FROM nxt WHERE event <> ''
), rev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
	SELECT r.merchant_id, r.order_id, r.id, st.from_state, r.state, st.event, st.actor, st.reason
	FROM upr r JOIN st ON st.refund_id = r.id WHERE st.event <> ''
), cur AS (
	SELECT * FROM upo
	UNION ALL
	SELECT * FROM lockedo WHERE NOT EXISTS (SELECT 1 FROM upo WHERE upo.merchant_id = lockedo.merchant_id AND upo.id = lockedo.id)
)
SELECT upr.i,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed, cur.capture_before,
	cur.open_disputes, cur.disputed_minor, cur.charged_back_minor,
	upr.id::text AS refund_id, upr.merchant_id AS refund_merchant_id, upr.order_id::text AS refund_order_id,
	upr.request_id AS refund_request_id, upr.requested_minor AS refund_requested_minor,
	upr.amount_minor AS refund_amount_minor, upr.currency AS refund_currency, upr.reason AS refund_reason,
	upr.actor AS refund_actor, upr.state AS refund_state, coalesce(upr.outcome, '') AS refund_outcome,
	upr.decline_code AS refund_decline_code, upr.gateway_refund_id AS refund_gateway_refund_id,
	upr.reconcile_at AS refund_reconcile_at, upr.reconcile_count AS refund_reconcile_count,
	upr.last_error AS refund_last_error, upr.created_at AS refund_created_at, upr.updated_at AS refund_updated_at
FROM cur JOIN upr ON upr.merchant_id = cur.merchant_id AND upr.order_id = cur.id;
