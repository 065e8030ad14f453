-- Create an order in PENDING with its creation event, idempotently on the
-- merchant's reference: when the reference is taken, insert nothing and
-- return the order that holds it, with created false.
WITH ins AS (
	INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
	VALUES (@id, @merchant_id, @merchant_reference, @amount_minor, @currency, @payment_method, @gateway, @state)
	ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
	RETURNING *
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
	SELECT merchant_id, id, NULL, state, @event, 'api' FROM ins
), cur AS (
	SELECT true AS created, * FROM ins
	UNION ALL
	SELECT false, * FROM orders
	WHERE merchant_id = @merchant_id AND merchant_reference = @merchant_reference AND NOT EXISTS (SELECT 1 FROM ins)
)
SELECT created,
	id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at
FROM cur;
