-- Lock an order of a merchant for a transition decided in Go.
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at
FROM orders
WHERE merchant_id = @merchant_id AND id = @id
FOR UPDATE;
