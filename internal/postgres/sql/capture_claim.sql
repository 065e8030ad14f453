-- Admit a capture in one statement, as refund_claim.sql admits a refund
-- (its comments say why each CTE reads what it reads). The FOR UPDATE in
-- ord serializes the claims and settles of one order's captures and
-- voids, and each rule is read from that locked row, never from the
-- captures or voids tables, whose rows this statement's snapshot may
-- predate:
--
--   - the order is capturable (@capturable: AUTHORIZED, or PAID by an
--     earlier capture), made with capture manual, its hold not closed by
--     a final capture;
--   - no void is in flight or in review (voiding);
--   - captured + capturing + this capture <= authorized.
--
-- No clock is read: a capture after capture_before is still sent, and the
-- gateway's answer decides. The hold guard's line must stay as it is,
-- alone and once in this file, as refund_claim.sql's.
--
-- @amount_minor 0 asks for all that is left. The capture is created
-- PENDING and moved to CAPTURING in the same commit (two history rows),
-- with reconcile_at set as a lease.
WITH ord AS (
	SELECT * FROM orders WHERE id = @order_id AND merchant_id = @merchant_id FOR UPDATE
), prior AS (
	SELECT * FROM captures
	WHERE merchant_id = @merchant_id AND request_id = @request_id AND (SELECT count(*) FROM ord) > 0
	FOR SHARE
), ca AS (
	SELECT gateway_charge_id FROM charge_attempts
	WHERE merchant_id = @merchant_id AND id = (SELECT current_attempt FROM ord)
	FOR SHARE
), want AS (
	SELECT id, authorized_minor - captured_minor - capturing_minor AS left_minor,
		coalesce(nullif(@amount_minor::bigint, 0), authorized_minor - captured_minor - capturing_minor) AS amount
	FROM ord
), ins AS (
	INSERT INTO captures (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, final,
		reason, actor, state, reconcile_at)
	SELECT @merchant_id, @capture_id, ord.id, @request_id, @amount_minor, want.amount, ord.currency, @final,
		@reason, @actor, @to_state, now() + @lease::interval
	FROM ord JOIN want ON want.id = ord.id
	WHERE
		ord.state = ANY(@capturable::text[])
		AND ord.capture_mode = 'manual'
		AND NOT ord.hold_closed
		AND NOT ord.voiding
		AND want.amount > 0
		AND want.amount <= want.left_minor
		AND NOT EXISTS (SELECT 1 FROM prior)
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET capturing_minor = ord.capturing_minor + ins.amount_minor
	FROM ord JOIN ins ON ins.order_id = ord.id
	WHERE o.merchant_id = ord.merchant_id AND o.id = ord.id
	RETURNING o.*
), ev AS (
	INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, 'capture', id, NULL, @from_state, @create_event, @actor, reason FROM ins
	UNION ALL
	SELECT merchant_id, order_id, 'capture', id, @from_state, state, @event, @actor, '' FROM ins
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd)
), c AS (
	SELECT * FROM ins UNION ALL SELECT * FROM prior
)
SELECT cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed,
	cur.capture_before,
	coalesce((SELECT gateway_charge_id FROM ca), '') AS charge_id,
	coalesce(c.id::text, '') AS capture_id, coalesce(c.merchant_id, '') AS capture_merchant_id,
	coalesce(c.order_id::text, '') AS capture_order_id, coalesce(c.request_id, '') AS capture_request_id,
	coalesce(c.requested_minor, 0) AS capture_requested_minor, coalesce(c.amount_minor, 0) AS capture_amount_minor,
	coalesce(c.currency, '') AS capture_currency, coalesce(c.final, false) AS capture_final,
	coalesce(c.reason, '') AS capture_reason, coalesce(c.actor, '') AS capture_actor,
	coalesce(c.state, '') AS capture_state, coalesce(c.outcome, '') AS capture_outcome,
	coalesce(c.decline_code, '') AS capture_decline_code, coalesce(c.gateway_capture_id, '') AS capture_gateway_capture_id,
	c.reconcile_at AS capture_reconcile_at, coalesce(c.reconcile_count, 0) AS capture_reconcile_count,
	coalesce(c.last_error, '') AS capture_last_error, coalesce(c.created_at, 'epoch') AS capture_created_at,
	coalesce(c.updated_at, 'epoch') AS capture_updated_at
FROM cur
LEFT JOIN c ON true;
