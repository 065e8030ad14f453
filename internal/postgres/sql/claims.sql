-- Claim one or many orders for new attempts in one statement, so one round
-- trip and one commit however many it claims. Element i of each array is
-- the i-th claim, and the row returned for it carries i. No order may appear
-- twice: the store's batcher puts two claims of one order in two
-- statements.
--
-- ord locks the orders, in id order before anything is written (att sorts
-- its input, which reads all of ord first), so that two statements claiming
-- overlapping sets of orders, or a claim and a settle (settles.sql locks in
-- the same order), wait for each other instead of deadlocking. The FOR
-- UPDATE waits for any other claim or settle of an order and then sees its
-- latest version, so two claims of one order are serialized and only one
-- finds it in from_state. The unique (merchant_id, request_id) key makes a
-- request id name one attempt, even when two claims with it race, or meet
-- in one statement: there the second insert does nothing, and a names for
-- its row the attempt that the first inserted.
--
-- The guard is checked once, in att, on the latest version that ord holds
-- locked; upd must not check it again. Its scan sees the statement's
-- snapshot, which can predate a settle that ord waited for: a claim that
-- began while the previous attempt's settle (CHARGING to PENDING) held the
-- row would see CHARGING there and skip the row, leaving the attempt that
-- att inserted without its claim.
--
-- The guard's line must stay as it is, alone and once in this file: the
-- chaos harness's test builds a broken Settle by replacing it with true.
--
-- It returns one row per claim whose order exists: the order (claimed says
-- whether this statement moved it) and the attempt that the request id
-- names, if any; every attempt column is coalesced, because the join reads
-- a missing attempt as NULLs.
--
-- claim.sql is this statement for one claim, which is every claim without
-- load: go generate derives it from this file (see settles.sql for why the
-- one-row form is kept).
WITH st AS (
	SELECT * FROM unnest((SELECT @merchant_id::text[]), (SELECT @order_id::uuid[]), (SELECT @request_id::text[]),
		(SELECT @attempt_id::uuid[]), (SELECT @payment_method::text[]), (SELECT @customer::text[]),
		(SELECT @from_state::text[]), (SELECT @to_state::text[]), (SELECT @lease::interval[]),
		(SELECT @event::text[]), (SELECT @actor::text[]), (SELECT @gateway::text[]),
		(SELECT @cascade_after::text[]), (SELECT @skipped::text[]), (SELECT @reason::text[]),
		(SELECT @check_follows::boolean[]), (SELECT @follows::text[])) WITH ORDINALITY
		AS st(merchant_id, order_id, request_id, attempt_id, payment_method, customer, from_state, to_state, lease,
			event, actor, gateway, cascade_after, skipped, reason, check_follows, follows, i)
), timed AS (
	-- The times are read here rather than in upd's SET list: Citus refuses
	-- a stable function (now(), timestamptz + interval) applied to a column
	-- in an UPDATE's SET list.
	SELECT st.*, now() AS now, now() + st.lease AS lease_until FROM st
), ord AS MATERIALIZED (
	-- Each order read by its key, in id order (see sql/README.md, "Plans
	-- that do not depend on the statistics").
	SELECT o.* FROM (SELECT merchant_id, order_id FROM st ORDER BY order_id) k
	CROSS JOIN LATERAL (
		SELECT * FROM orders WHERE merchant_id = k.merchant_id AND id = k.order_id OFFSET 0 FOR UPDATE
	) o
), prior AS (
	-- Read once ord holds every order: the count makes ord run to its end
	-- first, and FOR SHARE returns each attempt's latest committed version,
	-- not the one in this statement's snapshot, which can predate a settle
	-- that ord waited for (a replay's reply would show the attempt still in
	-- flight beside the order it has already made PAID). An attempt
	-- changes only under its order's lock, so the attempt read here is the
	-- one that goes with ord's row.
	SELECT p.* FROM st CROSS JOIN LATERAL (
		SELECT * FROM charge_attempts WHERE merchant_id = st.merchant_id AND request_id = st.request_id OFFSET 0 FOR SHARE
	) p
	WHERE (SELECT count(*) FROM ord) > 0
), att AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor, currency,
		gateway, cascade_after, skipped)
	SELECT st.attempt_id, ord.id, st.merchant_id, st.request_id, coalesce(nullif(st.payment_method, ''), ord.payment_method),
		st.customer, ord.amount_minor, ord.currency, coalesce(nullif(st.gateway, ''), ord.gateway), st.cascade_after,
		st.skipped
	FROM st JOIN ord ON ord.merchant_id = st.merchant_id AND ord.id = st.order_id
	WHERE
		ord.state = st.from_state
		-- A route chosen after an attempt holds only while that attempt is
		-- the order's last (order.Claim's Follows).
		AND (NOT st.check_follows OR coalesce(ord.current_attempt::text, '') = st.follows)
		AND NOT EXISTS (SELECT 1 FROM prior WHERE prior.merchant_id = st.merchant_id AND prior.request_id = st.request_id)
	ORDER BY st.i
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	-- The order's gateway is its current attempt's.
	UPDATE orders o SET state = st.to_state, gateway = att.gateway, current_attempt = att.id, reconcile_at = st.lease_until,
		reconcile_count = 0, last_error = '', updated_at = st.now
	FROM att JOIN timed st ON st.merchant_id = att.merchant_id AND st.attempt_id = att.id
	WHERE o.merchant_id = att.merchant_id AND o.id = att.order_id
	RETURNING o.*, st.from_state AS claimed_from, st.event AS claim_event, st.actor AS claim_actor,
		st.reason AS claim_reason
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id, reason)
	SELECT merchant_id, id, claimed_from, state, claim_event, claim_actor, current_attempt, claim_reason FROM upd
), cur AS (
	SELECT true AS claimed, merchant_id, id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
		current_attempt, reconcile_at, reconcile_count, last_error, created_at, updated_at, capture_mode
	FROM upd
	UNION ALL
	SELECT false, merchant_id, id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
		current_attempt, reconcile_at, reconcile_count, last_error, created_at, updated_at, capture_mode
	FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd WHERE upd.merchant_id = ord.merchant_id AND upd.id = ord.id)
), a AS (
	SELECT * FROM att UNION ALL SELECT * FROM prior
)
SELECT st.i, cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.capture_mode,
	coalesce(a.id::text, '') AS attempt_id, coalesce(a.order_id::text, '') AS attempt_order_id,
	coalesce(a.request_id, '') AS attempt_request_id, coalesce(a.payment_method, '') AS attempt_payment_method,
	coalesce(a.customer, '') AS attempt_customer,
	coalesce(a.amount_minor, 0) AS attempt_amount_minor, coalesce(a.currency, '') AS attempt_currency,
	coalesce(a.outcome, '') AS attempt_outcome, coalesce(a.decline_code, '') AS attempt_decline_code,
	coalesce(a.gateway_charge_id, '') AS attempt_gateway_charge_id, coalesce(a.gateway, '') AS attempt_gateway,
	coalesce(a.created_at, 'epoch') AS attempt_created_at
FROM st JOIN cur ON cur.merchant_id = st.merchant_id AND cur.id = st.order_id
	LEFT JOIN a ON a.merchant_id = st.merchant_id AND a.request_id = st.request_id;
