-- Admit a refund in one statement. The FOR UPDATE in ord waits for any
-- other claim or settle of the order's refunds and then sees the order's
-- latest version, so two refund claims of one order are serialized, and
-- each sees what the other reserved: what is left to refund is read from
-- that locked row (amount - refunded - refunding), never summed from the
-- refunds table, whose rows this statement's snapshot may predate. The
-- unique (merchant_id, request_id) key makes a request id name one refund,
-- even when two claims with it race.
--
-- As in claim.sql, the guard is checked once, in ins, on the row ord holds
-- locked, and upd computes the order's new reservation from that row too.
-- The amount guard's line must stay as it is, alone and once in this file:
-- the chaos harness's test builds a broken Settle by replacing it with true.
--
-- @amount_minor 0 asks for what is left. The refund is created PENDING and
-- moved to REFUNDING in the same commit (two events), with reconcile_at set
-- as a lease, so that a crash from then on is found by the reconciler.
--
-- It returns one row: the order (claimed says whether this statement made
-- a refund), the gateway id of the charge being refunded, and the refund
-- that the request id names, if any, every refund column coalesced.
WITH ord AS (
	SELECT * FROM orders WHERE id = @order_id AND merchant_id = @merchant_id FOR UPDATE
), prior AS (
	-- Read once ord holds the order: the subquery makes ord run first, and
	-- FOR SHARE returns the refund's latest committed version, not the one
	-- in this statement's snapshot, which can predate a settle that ord
	-- waited for (the reply would show the refund REFUNDING beside the
	-- order it has already moved). Every change of a refund's state locks
	-- its order first, so the refund read here is the one that goes with
	-- ord's row.
	SELECT * FROM refunds
	WHERE merchant_id = @merchant_id AND request_id = @request_id AND (SELECT count(*) FROM ord) > 0
	FOR SHARE
), ca AS (
	-- The charge being refunded, read as prior is: its gateway id is
	-- written by the settle that made the order PAID, which ord may have
	-- waited for.
	SELECT gateway_charge_id FROM charge_attempts
	WHERE merchant_id = @merchant_id AND id = (SELECT current_attempt FROM ord)
	FOR SHARE
), want AS (
	-- What was paid: the amount, or for a capture-manual order what was
	-- captured (refunds apply to what was taken, never to a hold), less
	-- what a dispute charged back (migration 00025).
	SELECT id, paid - refunded_minor - refunding_minor - charged_back_minor AS left_minor,
		coalesce(nullif(@amount_minor::bigint, 0), paid - refunded_minor - refunding_minor - charged_back_minor) AS amount
	FROM (SELECT *, CASE WHEN capture_mode = 'manual' THEN captured_minor ELSE amount_minor END AS paid FROM ord) p
), ins AS (
	INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, reason,
		actor, state, reconcile_at)
	SELECT @merchant_id, @refund_id, ord.id, @request_id, @amount_minor, want.amount, ord.currency, @reason,
		@actor, @to_state, now() + @lease::interval
	FROM ord JOIN want ON want.id = ord.id
	WHERE
		ord.state = ANY(@refundable::text[])
		-- Refunds wait while a dispute of the order is open: read from
		-- the locked row, which every change of a dispute updates under
		-- the same lock.
		AND ord.open_disputes = 0
		AND want.amount > 0
		AND want.amount <= want.left_minor
		AND NOT EXISTS (SELECT 1 FROM prior)
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET refunding_minor = ord.refunding_minor + ins.amount_minor
	FROM ord JOIN ins ON ins.order_id = ord.id
	WHERE o.merchant_id = ord.merchant_id AND o.id = ord.id
	RETURNING o.*
), ev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, id, NULL, @from_state, @create_event, @actor, reason FROM ins
	UNION ALL
	SELECT merchant_id, order_id, id, @from_state, state, @event, @actor, '' FROM ins
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd)
), r AS (
	SELECT * FROM ins UNION ALL SELECT * FROM prior
)
SELECT cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed, cur.capture_before,
	cur.open_disputes, cur.disputed_minor, cur.charged_back_minor,
	coalesce((SELECT gateway_charge_id FROM ca), '') AS charge_id,
	coalesce(r.id::text, '') AS refund_id, coalesce(r.merchant_id, '') AS refund_merchant_id,
	coalesce(r.order_id::text, '') AS refund_order_id, coalesce(r.request_id, '') AS refund_request_id,
	coalesce(r.requested_minor, 0) AS refund_requested_minor, coalesce(r.amount_minor, 0) AS refund_amount_minor,
	coalesce(r.currency, '') AS refund_currency, coalesce(r.reason, '') AS refund_reason,
	coalesce(r.actor, '') AS refund_actor, coalesce(r.state, '') AS refund_state,
	coalesce(r.outcome, '') AS refund_outcome, coalesce(r.decline_code, '') AS refund_decline_code,
	coalesce(r.gateway_refund_id, '') AS refund_gateway_refund_id, r.reconcile_at AS refund_reconcile_at,
	coalesce(r.reconcile_count, 0) AS refund_reconcile_count, coalesce(r.last_error, '') AS refund_last_error,
	coalesce(r.created_at, 'epoch') AS refund_created_at, coalesce(r.updated_at, 'epoch') AS refund_updated_at
FROM cur
LEFT JOIN r ON true;
