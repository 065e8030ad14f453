-- Create one or many orders in PENDING with their creation events, in one
-- statement, so one round trip and one commit however many it creates,
-- idempotently on each merchant's reference: when a reference is taken,
-- insert nothing for it and return the order that holds it, with created
-- false. Element i of each array is the i-th order, and the row returned
-- for it carries i. No reference may appear twice: the store's batcher puts
-- two creates of one reference in two statements.
--
-- The orders that were there before are read from the statement's
-- snapshot, which never shows what ins inserts, so each order comes once,
-- from one branch of cur. An order that a concurrent statement inserted
-- and committed after this one's snapshot was taken makes ins do nothing
-- for its reference and is invisible to the snapshot: no row returns for
-- it, and the store runs that create again.
--
-- create_order.sql is this statement for one order, which is every create
-- without load: go generate derives it from this file (see settles.sql for
-- why the one-row form is kept).
WITH new AS (
	SELECT * FROM unnest((SELECT @id::uuid[]), (SELECT @merchant_id::text[]), (SELECT @merchant_reference::text[]),
		(SELECT @amount_minor::bigint[]), (SELECT @currency::text[]), (SELECT @payment_method::text[]),
		(SELECT @gateway::text[]), (SELECT @state::text[]), (SELECT @capture_mode::text[]),
		(SELECT @routes::text[])) WITH ORDINALITY
		AS new(id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state, capture_mode,
			routes, i)
), ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
		capture_mode, routes)
	SELECT id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state, capture_mode,
		nullif(routes, '')::jsonb
	FROM new ORDER BY i
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
	SELECT merchant_id, id, NULL, state, @event, 'api' FROM ins
), cur AS (
	SELECT true AS created, merchant_id, id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
		current_attempt, reconcile_at, reconcile_count, last_error, created_at, updated_at, capture_mode
	FROM ins
	UNION ALL
	SELECT false, o.merchant_id, o.id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
		o.state, o.current_attempt, o.reconcile_at, o.reconcile_count, o.last_error, o.created_at, o.updated_at,
		o.capture_mode
	-- Each reference read by its key (see sql/README.md, "Plans that do
	-- not depend on the statistics").
	FROM new CROSS JOIN LATERAL (
		SELECT * FROM orders WHERE merchant_id = new.merchant_id AND merchant_reference = new.merchant_reference OFFSET 0
	) o
)
SELECT new.i, cur.created,
	cur.id::text, cur.merchant_id, cur.merchant_reference, cur.amount_minor, cur.currency, cur.payment_method,
	cur.gateway, cur.state, coalesce(cur.current_attempt::text, '') AS current_attempt, cur.reconcile_at,
	cur.reconcile_count, cur.last_error, cur.created_at, cur.updated_at, cur.capture_mode
FROM new JOIN cur ON cur.merchant_id = new.merchant_id AND cur.merchant_reference = new.merchant_reference;
