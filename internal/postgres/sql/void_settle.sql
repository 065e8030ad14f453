-- Record a gateway's answer for a void, guarded by the void still being in
-- @from_state (VOIDING), as capture_settle.sql does for a capture. A void
-- that succeeds moves its AUTHORIZED order to @voided_state with
-- @void_event (the merchant's order.voided) and clears voiding; one that
-- fails clears voiding, so that captures may be claimed again; one
-- escalated to review keeps it, since the hold may be gone.
WITH lockedo AS MATERIALIZED (
	SELECT * FROM orders
	WHERE merchant_id = @merchant_id
		AND id = (SELECT order_id FROM voids WHERE merchant_id = @merchant_id AND id = @void_id)
	FOR UPDATE
), lockedv AS MATERIALIZED (
	SELECT * FROM voids WHERE merchant_id = @merchant_id AND id = @void_id FOR UPDATE
), clock AS (
	SELECT now() AS now, now() + @recheck_in::interval AS recheck_at
), upv AS (
	UPDATE voids v SET
		state = @to_state,
		outcome = @outcome, decline_code = @decline_code,
		reconcile_at = CASE WHEN @to_state::text = 'VOIDING' THEN clock.recheck_at END,
		reconcile_count = lockedv.reconcile_count + @checked::bool::int,
		last_error = @last_error,
		updated_at = CASE WHEN @to_state::text = 'VOIDING' THEN lockedv.updated_at ELSE clock.now END,
		settled_at = CASE WHEN @to_state::text = 'VOIDING' THEN NULL ELSE clock.now END
	FROM lockedv, clock
	WHERE v.merchant_id = @merchant_id AND v.id = @void_id AND v.merchant_id = lockedv.merchant_id AND v.id = lockedv.id
		AND lockedv.state = @from_state
	RETURNING v.*
), nxt AS (
	SELECT lockedo.id,
		CASE WHEN upv.state = 'SUCCEEDED' AND lockedo.state = 'AUTHORIZED' THEN @void_event ELSE '' END AS event,
		CASE WHEN upv.state = 'SUCCEEDED' AND lockedo.state = 'AUTHORIZED' THEN @voided_state ELSE lockedo.state END
			AS to_state,
		lockedo.state AS from_state, upv.id AS void_id, lockedo.updated_at,
		upv.state IN ('SUCCEEDED', 'FAILED') AS changed
	FROM lockedo JOIN upv ON upv.order_id = lockedo.id
), upo AS (
	UPDATE orders o SET voiding = false, state = nxt.to_state,
		updated_at = CASE WHEN nxt.to_state = nxt.from_state THEN nxt.updated_at ELSE clock.now END
	FROM nxt, clock
	WHERE o.merchant_id = @merchant_id AND o.id = nxt.id AND nxt.changed
	RETURNING o.*
), oev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, void_id)
	SELECT @merchant_id, id, from_state, to_state, event, @actor, @reason, void_id FROM nxt WHERE event <> ''
), hev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, 'void', id, @from_state, state, @event, @actor, @reason FROM upv WHERE @event <> ''
), cur AS (
	SELECT * FROM upo UNION ALL SELECT * FROM lockedo WHERE NOT EXISTS (SELECT 1 FROM upo)
)
SELECT cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed,
	cur.capture_before,
	upv.id::text AS void_id, upv.merchant_id AS void_merchant_id, upv.order_id::text AS void_order_id,
	upv.request_id AS void_request_id, upv.reason AS void_reason, upv.actor AS void_actor, upv.state AS void_state,
	coalesce(upv.outcome, '') AS void_outcome, upv.decline_code AS void_decline_code,
	upv.reconcile_at AS void_reconcile_at, upv.reconcile_count AS void_reconcile_count,
	upv.last_error AS void_last_error, upv.created_at AS void_created_at, upv.updated_at AS void_updated_at
FROM cur JOIN upv ON upv.order_id = cur.id;
