-- Admit one or many refunds in one statement, so one round trip and one
-- commit however many it admits. Element i of each array is the i-th
-- claim, and the row returned for it carries i. No order may appear twice:
-- the store's batcher puts two refund claims of one order in two
-- statements.
--
-- ord locks the orders, in id order, before anything is written, so that
-- two statements claiming overlapping sets of orders, or a claim and a
-- settle (refund_settles.sql, settles.sql and claims.sql lock in the same
-- order), wait for each other instead of deadlocking. The FOR UPDATE
-- waits for any other claim or settle of an order's refunds and then sees
-- the order's latest version, so two refund claims of one order are
-- serialized, and each sees what the other reserved: what is left to
-- refund is read from that locked row (amount - refunded - refunding),
-- never summed from the refunds table, whose rows this statement's
-- snapshot may predate. The unique (merchant_id, request_id) key makes a
-- request id name one refund, even when two claims with it race, or meet
-- in one statement: there the second insert does nothing, and r names for
-- its row the refund that the first inserted.
--
-- As in claims.sql, the guard is checked once, in ins, on the row ord
-- holds locked, and upd computes the order's new reservation from that row
-- too. The amount guard's line must stay as it is, alone and once in this
-- file: the chaos harness's test builds a broken Settle by replacing it
-- with true.
--
-- An amount_minor of 0 asks for what is left. A refund is created PENDING
-- and moved to REFUNDING in the same commit (two events), with
-- reconcile_at set as a lease, so that a crash from then on is found by
-- the reconciler. A refund is admitted only of an order whose gateway is
-- one of the claim's gateways (a comma-separated list of those that can
-- refund, or '' for any), so that the service need not read the order
-- before the claim.
--
-- It returns one row per claim whose order exists: the order (claimed
-- says whether this statement made a refund), the gateway id of the charge
-- being refunded, and the refund that the request id names, if any, every
-- refund column coalesced.
--
-- refund_claim.sql is this statement for one claim, which is every claim
-- without load: go generate derives it from this file (see settles.sql for
-- why the one-row form is kept).
WITH st AS (
	SELECT * FROM unnest((SELECT @merchant_id::text[]), (SELECT @order_id::uuid[]), (SELECT @request_id::text[]),
		(SELECT @refund_id::uuid[]), (SELECT @amount_minor::bigint[]), (SELECT @reason::text[]),
		(SELECT @actor::text[]), (SELECT @lease::interval[]), (SELECT @gateways::text[])) WITH ORDINALITY
		AS st(merchant_id, order_id, request_id, refund_id, amount_minor, reason, actor, lease, gateways, i)
), ord AS MATERIALIZED (
	-- Each order read by its key, in id order (see sql/README.md, "Plans
	-- that do not depend on the statistics").
	SELECT o.* FROM (SELECT merchant_id, order_id FROM st ORDER BY order_id) k
	CROSS JOIN LATERAL (
		SELECT * FROM orders WHERE merchant_id = k.merchant_id AND id = k.order_id OFFSET 0 FOR UPDATE
	) o
), prior AS (
	-- Read once ord holds every order: the count makes ord run to its end
	-- first, and FOR SHARE returns each refund's latest committed version,
	-- not the one in this statement's snapshot, which can predate a settle
	-- that ord waited for (the reply would show the refund REFUNDING beside
	-- the order it has already moved). Every change of a refund's state
	-- locks its order first, so the refund read here is the one that goes
	-- with ord's row.
	SELECT p.* FROM st CROSS JOIN LATERAL (
		SELECT * FROM refunds WHERE merchant_id = st.merchant_id AND request_id = st.request_id OFFSET 0 FOR SHARE
	) p
	WHERE (SELECT count(*) FROM ord) > 0
), ca AS (
	-- The charge being refunded, read as prior is: its gateway id is
	-- written by the settle that made the order PAID, which ord may have
	-- waited for.
	SELECT ord.merchant_id, ord.id AS order_id, a.gateway_charge_id
	FROM ord CROSS JOIN LATERAL (
		SELECT gateway_charge_id FROM charge_attempts
		WHERE merchant_id = ord.merchant_id AND id = ord.current_attempt OFFSET 0 FOR SHARE
	) a
	WHERE (SELECT count(*) FROM ord) > 0
), want AS (
	-- What was paid: the amount, or for a capture-manual order what was
	-- captured (refunds apply to what was taken, never to a hold), less
	-- what a dispute charged back (migration 00025).
	SELECT st.i, p.paid - p.refunded_minor - p.refunding_minor - p.charged_back_minor AS left_minor,
		coalesce(nullif(st.amount_minor, 0), p.paid - p.refunded_minor - p.refunding_minor - p.charged_back_minor) AS amount
	FROM st JOIN (SELECT *, CASE WHEN capture_mode = 'manual' THEN captured_minor ELSE amount_minor END AS paid FROM ord) p
		ON p.merchant_id = st.merchant_id AND p.id = st.order_id
), ins AS (
	INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, reason,
		actor, state, reconcile_at)
	SELECT st.merchant_id, st.refund_id, ord.id, st.request_id, st.amount_minor, want.amount, ord.currency, st.reason,
		st.actor, @to_state, now() + st.lease
	FROM st JOIN ord ON ord.merchant_id = st.merchant_id AND ord.id = st.order_id
		JOIN want ON want.i = st.i
	WHERE
		ord.state = ANY(string_to_array(@refundable, ','))
		AND (st.gateways = '' OR ord.gateway = ANY(string_to_array(st.gateways, ',')))
		-- Refunds wait while a dispute of the order is open: read from
		-- the locked row, which every change of a dispute updates under
		-- the same lock.
		AND ord.open_disputes = 0
		AND want.amount > 0
		AND want.amount <= want.left_minor
		AND NOT EXISTS (SELECT 1 FROM prior WHERE prior.merchant_id = st.merchant_id AND prior.request_id = st.request_id)
	-- In key order, so that two statements inserting one request id each
	-- wait for the other's insert in the same order.
	ORDER BY st.merchant_id, st.request_id
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET refunding_minor = ord.refunding_minor + ins.amount_minor
	FROM ord JOIN ins ON ins.merchant_id = ord.merchant_id AND ins.order_id = ord.id
	WHERE o.merchant_id = ord.merchant_id AND o.id = ord.id
	RETURNING o.*
), ev AS (
	INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
	SELECT merchant_id, order_id, id, NULL, @from_state, @create_event, actor, reason FROM ins
	UNION ALL
	SELECT merchant_id, order_id, id, @from_state, state, @event, actor, '' FROM ins
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd WHERE upd.merchant_id = ord.merchant_id AND upd.id = ord.id)
), r AS (
	SELECT * FROM ins UNION ALL SELECT * FROM prior
)
SELECT st.i, cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.refunded_minor, cur.refunding_minor,
	cur.capture_mode, cur.authorized_minor, cur.captured_minor, cur.capturing_minor, cur.voiding, cur.hold_closed, cur.capture_before,
	cur.open_disputes, cur.disputed_minor, cur.charged_back_minor,
	coalesce(ca.gateway_charge_id, '') AS charge_id,
	coalesce(r.id::text, '') AS refund_id, coalesce(r.merchant_id, '') AS refund_merchant_id,
	coalesce(r.order_id::text, '') AS refund_order_id, coalesce(r.request_id, '') AS refund_request_id,
	coalesce(r.requested_minor, 0) AS refund_requested_minor, coalesce(r.amount_minor, 0) AS refund_amount_minor,
	coalesce(r.currency, '') AS refund_currency, coalesce(r.reason, '') AS refund_reason,
	coalesce(r.actor, '') AS refund_actor, coalesce(r.state, '') AS refund_state,
	coalesce(r.outcome, '') AS refund_outcome, coalesce(r.decline_code, '') AS refund_decline_code,
	coalesce(r.gateway_refund_id, '') AS refund_gateway_refund_id, r.reconcile_at AS refund_reconcile_at,
	coalesce(r.reconcile_count, 0) AS refund_reconcile_count, coalesce(r.last_error, '') AS refund_last_error,
	coalesce(r.created_at, 'epoch') AS refund_created_at, coalesce(r.updated_at, 'epoch') AS refund_updated_at
FROM st JOIN cur ON cur.merchant_id = st.merchant_id AND cur.id = st.order_id
	LEFT JOIN ca ON ca.merchant_id = st.merchant_id AND ca.order_id = st.order_id
	LEFT JOIN r ON r.merchant_id = st.merchant_id AND r.request_id = st.request_id;
