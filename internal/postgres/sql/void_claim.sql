-- Admit a void in one statement, as capture_claim.sql admits a capture.
-- Each rule is read from the locked order row: the order is AUTHORIZED
-- (made with capture manual), nothing is captured (after a capture:
-- refund), no capture is in flight or in review (capturing_minor), and no
-- other void is (voiding). The void is created PENDING and moved to
-- VOIDING in the same commit, and the order is marked voiding, which keeps
-- every capture claim out until the void fails.
WITH ord AS (
	SELECT * FROM orders WHERE id = @order_id AND merchant_id = @merchant_id FOR UPDATE
), prior AS (
	SELECT * FROM voids
	WHERE merchant_id = @merchant_id AND request_id = @request_id AND (SELECT count(*) FROM ord) > 0
	FOR SHARE
), ca AS (
	SELECT gateway_charge_id FROM charge_attempts
	WHERE merchant_id = @merchant_id AND id = (SELECT current_attempt FROM ord)
	FOR SHARE
), ins AS (
	INSERT INTO voids (merchant_id, id, order_id, request_id, reason, actor, state, reconcile_at)
	SELECT @merchant_id, @void_id, ord.id, @request_id, @reason, @actor, @to_state, now() + @lease::interval
	FROM ord
	WHERE
		ord.state = @authorized
		AND ord.capture_mode = 'manual'
		AND ord.captured_minor = 0 AND ord.capturing_minor = 0
		AND NOT ord.voiding
		AND NOT EXISTS (SELECT 1 FROM prior)
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET voiding = true
	FROM ord JOIN ins ON ins.order_id = ord.id
	WHERE o.merchant_id = ord.merchant_id AND o.id = ord.id
	RETURNING o.*
), ev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, 'void', id, NULL, @from_state, @create_event, @actor, reason FROM ins
	UNION ALL
	SELECT merchant_id, order_id, 'void', id, @from_state, state, @event, @actor, '' FROM ins
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd)
), v AS (
	SELECT * FROM ins UNION ALL SELECT * FROM prior
)
SELECT cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed,
	cur.capture_before,
	coalesce((SELECT gateway_charge_id FROM ca), '') AS charge_id,
	coalesce(v.id::text, '') AS void_id, coalesce(v.merchant_id, '') AS void_merchant_id,
	coalesce(v.order_id::text, '') AS void_order_id, coalesce(v.request_id, '') AS void_request_id,
	coalesce(v.reason, '') AS void_reason, coalesce(v.actor, '') AS void_actor,
	coalesce(v.state, '') AS void_state, coalesce(v.outcome, '') AS void_outcome,
	coalesce(v.decline_code, '') AS void_decline_code,
	v.reconcile_at AS void_reconcile_at, coalesce(v.reconcile_count, 0) AS void_reconcile_count,
	coalesce(v.last_error, '') AS void_last_error, coalesce(v.created_at, 'epoch') AS void_created_at,
	coalesce(v.updated_at, 'epoch') AS void_updated_at
FROM cur
LEFT JOIN v ON true;
