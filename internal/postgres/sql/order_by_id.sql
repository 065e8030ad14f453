-- A merchant's order by id: read by its key, so that the plan a
-- connection caches never reads other orders. An operator's read of any
-- merchant's order finds the merchant first (order_merchant.sql).
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at, refunded_minor, refunding_minor,
	capture_mode, authorized_minor, captured_minor, capturing_minor, voiding, hold_closed, capture_before,
	open_disputes, disputed_minor, charged_back_minor
FROM orders
WHERE merchant_id = @merchant_id AND id = @id;
