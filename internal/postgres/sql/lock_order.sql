-- Lock an order for a transition decided in Go, within a scope as in
-- order_by_id.sql.
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at
FROM orders
WHERE id = @id AND (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''))
FOR UPDATE;
