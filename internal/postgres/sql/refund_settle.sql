-- Record a gateway's answer for a refund, guarded by the refund still being
-- in @from_state (REFUNDING): of a late server response and a reconciler,
-- exactly one wins and writes its events. A refund that succeeds adds its
-- amount to the order's refunded total and moves the order with
-- @partial_event or @full_event (the latter when the total reaches what was
-- paid); one that fails releases its reservation; one escalated to review
-- keeps it, since the money may have gone back; a recheck only pushes
-- reconcile_at. A reconciler's settle carries its lease and applies only
-- while the refund's reconcile_at is still what the lease set (a gateway
-- event recorded during the lookup moved it; order.RefundSettlement.Lease).
--
-- The order's row is locked before the refund's, the order claims take
-- their locks in, so that a claim and a settle of one order never deadlock.
-- As in claim.sql, the guard and the new totals are read from the locked
-- rows, not from the updates' scans, whose snapshot can predate a change
-- that the locks waited for.
WITH lockedo AS MATERIALIZED (
	SELECT * FROM orders
	WHERE merchant_id = @merchant_id
		AND id = (SELECT order_id FROM refunds WHERE merchant_id = @merchant_id AND id = @refund_id)
	FOR UPDATE
), lockedr AS MATERIALIZED (
	SELECT * FROM refunds WHERE merchant_id = @merchant_id AND id = @refund_id FOR UPDATE
), clock AS (
	-- The times are read here rather than in the UPDATEs' SET lists: Citus
	-- refuses a stable function (now()) inside a CASE in an UPDATE's SET list.
	SELECT now() AS now, now() + @recheck_in::interval AS recheck_at
), upr AS (
	UPDATE refunds r SET
		state = @to_state,
		outcome = @outcome, decline_code = @decline_code, gateway_refund_id = @gateway_refund_id,
		reconcile_at = CASE WHEN @to_state::text = 'REFUNDING' THEN clock.recheck_at END,
		reconcile_count = lockedr.reconcile_count + @checked::bool::int,
		last_error = @last_error,
		updated_at = CASE WHEN @to_state::text = 'REFUNDING' THEN lockedr.updated_at ELSE clock.now END,
		settled_at = CASE WHEN @to_state::text = 'REFUNDING' THEN NULL ELSE clock.now END
	FROM lockedr, clock
	WHERE r.merchant_id = lockedr.merchant_id AND r.id = lockedr.id AND lockedr.state = @from_state
		AND (@lease::timestamptz IS NULL OR lockedr.reconcile_at = @lease::timestamptz)
	RETURNING r.*
), nxt AS (
	-- A refund is full when the refunded total reaches what was paid: the
	-- amount, or for a capture-manual order what was captured.
	SELECT lockedo.id,
		lockedo.refunded_minor + CASE WHEN upr.state = 'SUCCEEDED' THEN upr.amount_minor ELSE 0 END AS refunded,
		lockedo.refunding_minor
			- CASE WHEN upr.state IN ('SUCCEEDED', 'FAILED') THEN upr.amount_minor ELSE 0 END AS refunding,
		CASE
			WHEN upr.state <> 'SUCCEEDED' THEN ''
			WHEN lockedo.refunded_minor + upr.amount_minor >= CASE WHEN lockedo.capture_mode = 'manual' THEN lockedo.captured_minor ELSE lockedo.amount_minor END THEN @full_event
			ELSE @partial_event
		END AS event,
		CASE
			WHEN upr.state <> 'SUCCEEDED' THEN lockedo.state
			WHEN lockedo.refunded_minor + upr.amount_minor >= CASE WHEN lockedo.capture_mode = 'manual' THEN lockedo.captured_minor ELSE lockedo.amount_minor END THEN @full_to
			ELSE @partial_to
		END AS to_state,
		lockedo.state AS from_state, upr.id AS refund_id, lockedo.updated_at,
		upr.state IN ('SUCCEEDED', 'FAILED') AS changed
	FROM lockedo JOIN upr ON upr.order_id = lockedo.id
), upo AS (
	-- Whether the order changes is nxt's to say, from the locked row: a
	-- condition on o here would be checked first on the version in this
	-- statement's snapshot, and a refund claimed meanwhile can make that
	-- version look already settled (two refunds of one amount), leaving
	-- the order's reservation behind.
	UPDATE orders o SET refunded_minor = nxt.refunded, refunding_minor = nxt.refunding, state = nxt.to_state,
		updated_at = CASE WHEN nxt.event = '' THEN nxt.updated_at ELSE clock.now END
	FROM nxt, clock
	WHERE o.merchant_id = @merchant_id AND o.id = nxt.id AND nxt.changed
	RETURNING o.*
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, refund_id)
	SELECT @merchant_id, id, from_state, to_state, event, @actor, '', refund_id FROM nxt WHERE event <> ''
), rev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, id, @from_state, state, @event, @actor, @reason FROM upr WHERE @event <> ''
), cur AS (
	SELECT * FROM upo UNION ALL SELECT * FROM lockedo WHERE NOT EXISTS (SELECT 1 FROM upo)
)
SELECT cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
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
FROM cur JOIN upr ON upr.order_id = cur.id;
