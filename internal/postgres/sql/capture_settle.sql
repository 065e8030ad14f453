-- Record a gateway's answer for a capture, guarded by the capture still
-- being in @from_state (CAPTURING): of a late server response and a
-- reconciler, exactly one wins and writes its rows. As refund_settle.sql,
-- it locks the order's row before the capture's, and reads the guard and
-- the new totals from the locked rows.
--
-- A capture that succeeds adds its amount to the order's captured total,
-- closes the hold when it was final, and moves an AUTHORIZED order to
-- @paid_state with @capture_event; a later one leaves the state and
-- writes @captured_event. One that fails releases its reservation and
-- writes @failed_event. Each of these rows in the order's history is the
-- merchant's event (capture.succeeded, capture.failed; migration 00018).
-- One escalated to review keeps its reservation, since the money may have
-- been taken; a recheck only pushes reconcile_at. A reconciler's settle
-- carries its lease and applies only while the capture's reconcile_at is
-- still what the lease set (order.CaptureSettlement.Lease).
WITH lockedo AS MATERIALIZED (
	SELECT * FROM orders
	WHERE merchant_id = @merchant_id
		AND id = (SELECT order_id FROM captures WHERE merchant_id = @merchant_id AND id = @capture_id)
	FOR UPDATE
), lockedc AS MATERIALIZED (
	SELECT * FROM captures WHERE merchant_id = @merchant_id AND id = @capture_id FOR UPDATE
), clock AS (
	SELECT now() AS now, now() + @recheck_in::interval AS recheck_at
), upc AS (
	UPDATE captures c SET
		state = @to_state,
		outcome = @outcome, decline_code = @decline_code, gateway_capture_id = @gateway_capture_id,
		reconcile_at = CASE WHEN @to_state::text = 'CAPTURING' THEN clock.recheck_at END,
		reconcile_count = lockedc.reconcile_count + @checked::bool::int,
		last_error = @last_error,
		updated_at = CASE WHEN @to_state::text = 'CAPTURING' THEN lockedc.updated_at ELSE clock.now END,
		settled_at = CASE WHEN @to_state::text = 'CAPTURING' THEN NULL ELSE clock.now END
	FROM lockedc, clock
	WHERE c.merchant_id = @merchant_id AND c.id = @capture_id AND c.merchant_id = lockedc.merchant_id AND c.id = lockedc.id
		AND lockedc.state = @from_state
		AND (@lease::timestamptz IS NULL OR lockedc.reconcile_at = @lease::timestamptz)
	RETURNING c.*
), nxt AS (
	SELECT lockedo.id,
		lockedo.captured_minor + CASE WHEN upc.state = 'SUCCEEDED' THEN upc.amount_minor ELSE 0 END AS captured,
		lockedo.capturing_minor
			- CASE WHEN upc.state IN ('SUCCEEDED', 'FAILED') THEN upc.amount_minor ELSE 0 END AS capturing,
		lockedo.hold_closed OR (upc.state = 'SUCCEEDED' AND upc.final) AS closed,
		CASE
			WHEN upc.state = 'SUCCEEDED' AND lockedo.state = 'AUTHORIZED' THEN @capture_event
			WHEN upc.state = 'SUCCEEDED' THEN @captured_event
			WHEN upc.state = 'FAILED' THEN @failed_event
			ELSE ''
		END AS event,
		CASE
			WHEN upc.state = 'SUCCEEDED' AND lockedo.state = 'AUTHORIZED' THEN @paid_state
			ELSE lockedo.state
		END AS to_state,
		lockedo.state AS from_state, upc.id AS capture_id, lockedo.updated_at,
		upc.state IN ('SUCCEEDED', 'FAILED') AS changed
	FROM lockedo JOIN upc ON upc.order_id = lockedo.id
), upo AS (
	UPDATE orders o SET captured_minor = nxt.captured, capturing_minor = nxt.capturing, hold_closed = nxt.closed,
		state = nxt.to_state,
		updated_at = CASE WHEN nxt.to_state = nxt.from_state THEN nxt.updated_at ELSE clock.now END
	FROM nxt, clock
	WHERE o.merchant_id = @merchant_id AND o.id = nxt.id AND nxt.changed
	RETURNING o.*
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, capture_id)
	SELECT @merchant_id, id, from_state, to_state, event, @actor, @reason, capture_id FROM nxt WHERE event <> ''
), hev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, 'capture', id, @from_state, state, @event, @actor, @reason FROM upc WHERE @event <> ''
), cur AS (
	SELECT * FROM upo UNION ALL SELECT * FROM lockedo WHERE NOT EXISTS (SELECT 1 FROM upo)
)
SELECT cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed,
	cur.capture_before,
	upc.id::text AS capture_id, upc.merchant_id AS capture_merchant_id, upc.order_id::text AS capture_order_id,
	upc.request_id AS capture_request_id, upc.requested_minor AS capture_requested_minor,
	upc.amount_minor AS capture_amount_minor, upc.currency AS capture_currency, upc.final AS capture_final,
	upc.reason AS capture_reason, upc.actor AS capture_actor, upc.state AS capture_state,
	coalesce(upc.outcome, '') AS capture_outcome, upc.decline_code AS capture_decline_code,
	upc.gateway_capture_id AS capture_gateway_capture_id, upc.reconcile_at AS capture_reconcile_at,
	upc.reconcile_count AS capture_reconcile_count, upc.last_error AS capture_last_error,
	upc.created_at AS capture_created_at, upc.updated_at AS capture_updated_at
FROM cur JOIN upc ON upc.order_id = cur.id;
