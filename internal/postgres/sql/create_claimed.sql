-- Create an order already claimed for its first attempt: the order, the
-- attempt and both events (create, charge) in one statement and one commit.
-- It inserts nothing, and returns no row, when the merchant reference is
-- taken; a request id that is taken fails the statement as a whole
-- (charge_attempts_request_key).
WITH o AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		state, current_attempt, reconcile_at)
	VALUES (@id, @merchant_id, @merchant_reference, @amount_minor, @currency, @payment_method, @gateway,
		@to_state, @attempt_id, now() + @lease::interval)
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), a AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
	SELECT current_attempt, id, merchant_id, @request_id, payment_method, amount_minor, currency FROM o
	RETURNING *
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
	SELECT merchant_id, id, NULL, @from_state, @create_event, @actor, NULL FROM o
	UNION ALL
	SELECT merchant_id, id, @from_state, state, @claim_event, @actor, current_attempt FROM o
)
SELECT o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at,
	a.id::text AS attempt_id, a.order_id::text AS attempt_order_id, a.request_id AS attempt_request_id,
	a.payment_method AS attempt_payment_method, a.customer AS attempt_customer, a.amount_minor AS attempt_amount_minor,
	a.currency AS attempt_currency, coalesce(a.outcome, '') AS attempt_outcome,
	a.decline_code AS attempt_decline_code, a.gateway_charge_id AS attempt_gateway_charge_id,
	a.created_at AS attempt_created_at
FROM o JOIN a ON a.merchant_id = o.merchant_id AND a.order_id = o.id;
