-- Claim an order for a new attempt in one statement. The FOR UPDATE in ord
-- waits for any other claim or settle of the order and then sees its latest
-- version, so two claims of one order are serialized and only one finds it
-- in @from_state. The unique (merchant_id, request_id) key makes a request
-- id name one attempt, even when two claims with it race.
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
-- It returns one row: the order (claimed says whether this statement moved
-- it) and the attempt that the request id names, if any; every attempt
-- column is coalesced, because the join reads a missing attempt as NULLs.
WITH ord AS (
	SELECT * FROM orders WHERE id = @order_id AND merchant_id = @merchant_id FOR UPDATE
), prior AS (
	SELECT * FROM charge_attempts WHERE merchant_id = @merchant_id AND request_id = @request_id
), att AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor, currency)
	SELECT @attempt_id, ord.id, @merchant_id, @request_id, coalesce(nullif(@payment_method, ''), ord.payment_method),
		@customer, ord.amount_minor, ord.currency
	FROM ord
	WHERE
		ord.state = @from_state
		AND NOT EXISTS (SELECT 1 FROM prior)
	ON CONFLICT (merchant_id, request_id) DO NOTHING
	RETURNING *
), upd AS (
	UPDATE orders o SET state = @to_state, current_attempt = att.id, reconcile_at = now() + @lease::interval,
		reconcile_count = 0, last_error = '', updated_at = now()
	FROM att WHERE o.merchant_id = att.merchant_id AND o.id = att.order_id
	RETURNING o.*
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
	SELECT merchant_id, id, @from_state, state, @event, @actor, current_attempt FROM upd
), cur AS (
	SELECT true AS claimed, * FROM upd
	UNION ALL
	SELECT false, * FROM ord WHERE NOT EXISTS (SELECT 1 FROM upd)
), a AS (
	SELECT * FROM att UNION ALL SELECT * FROM prior
)
SELECT cur.claimed,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at,
	coalesce(a.id::text, '') AS attempt_id, coalesce(a.order_id::text, '') AS attempt_order_id,
	coalesce(a.request_id, '') AS attempt_request_id, coalesce(a.payment_method, '') AS attempt_payment_method,
	coalesce(a.customer, '') AS attempt_customer,
	coalesce(a.amount_minor, 0) AS attempt_amount_minor, coalesce(a.currency, '') AS attempt_currency,
	coalesce(a.outcome, '') AS attempt_outcome, coalesce(a.decline_code, '') AS attempt_decline_code,
	coalesce(a.gateway_charge_id, '') AS attempt_gateway_charge_id,
	coalesce(a.created_at, 'epoch') AS attempt_created_at
FROM cur LEFT JOIN a ON true;
