-- Create one or many orders already claimed for their first attempts: the
-- orders, the attempts (with the gateway's customer, '' for none) and both
-- events of each (create, charge) in one
-- statement and one commit, however many it creates. Element i of each
-- array is the i-th order, and the row returned for it carries i. It
-- inserts nothing, and returns no row, for an order whose merchant
-- reference is taken; a request id that is taken fails the statement as a
-- whole (charge_attempts_request_key), and the store runs each order of the
-- group again alone, so that only that order fails. No reference may appear
-- twice: the store's batcher puts two creates of one reference in two
-- statements.
--
-- create_claimed_order.sql is this statement for one order, which is every call
-- without load: go generate derives it from this file (see settles.sql for
-- why the one-row form is kept).
WITH new AS (
	SELECT * FROM unnest((SELECT @id::uuid[]), (SELECT @merchant_id::text[]), (SELECT @merchant_reference::text[]),
		(SELECT @amount_minor::bigint[]), (SELECT @currency::text[]), (SELECT @payment_method::text[]),
		(SELECT @gateway::text[]), (SELECT @to_state::text[]), (SELECT @attempt_id::uuid[]),
		(SELECT @lease::interval[]), (SELECT @request_id::text[]), (SELECT @from_state::text[]),
		(SELECT @claim_event::text[]), (SELECT @actor::text[]), (SELECT @customer::text[]),
		(SELECT @capture_mode::text[]), (SELECT @routes::text[]), (SELECT @skipped::text[])) WITH ORDINALITY
		AS new(id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, to_state, attempt_id,
			lease, request_id, from_state, claim_event, actor, customer, capture_mode, routes, skipped, i)
), timed AS (
	SELECT new.*, now() + new.lease AS lease_until FROM new
), o AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		state, current_attempt, reconcile_at, capture_mode, routes)
	SELECT id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
		to_state, attempt_id, lease_until, capture_mode, nullif(routes, '')::jsonb
	FROM timed ORDER BY i
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), a AS (
	INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor, currency,
		gateway, skipped)
	SELECT o.current_attempt, o.id, o.merchant_id, new.request_id, o.payment_method, new.customer, o.amount_minor, o.currency,
		o.gateway, new.skipped
	FROM o JOIN new ON new.merchant_id = o.merchant_id AND new.id = o.id
	RETURNING *
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
	SELECT o.merchant_id, o.id, NULL, new.from_state, @create_event, new.actor, NULL
	FROM o JOIN new ON new.merchant_id = o.merchant_id AND new.id = o.id
	UNION ALL
	SELECT o.merchant_id, o.id, new.from_state, o.state, new.claim_event, new.actor, o.current_attempt
	FROM o JOIN new ON new.merchant_id = o.merchant_id AND new.id = o.id
)
SELECT new.i, o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at, o.capture_mode,
	a.id::text AS attempt_id, a.order_id::text AS attempt_order_id, a.request_id AS attempt_request_id,
	a.payment_method AS attempt_payment_method, a.customer AS attempt_customer, a.amount_minor AS attempt_amount_minor,
	a.currency AS attempt_currency, coalesce(a.outcome, '') AS attempt_outcome,
	a.decline_code AS attempt_decline_code, a.gateway_charge_id AS attempt_gateway_charge_id, a.gateway AS attempt_gateway,
	a.created_at AS attempt_created_at
FROM new JOIN o ON o.merchant_id = new.merchant_id AND o.id = new.id
	JOIN a ON a.merchant_id = o.merchant_id AND a.order_id = o.id;
