-- An order by id, within a scope: @any_merchant (an operator) reaches every
-- merchant's orders; otherwise only @merchant_id's, and an empty
-- @merchant_id (the zero order.Scope) reaches none.
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at, refunded_minor, refunding_minor,
	capture_mode, authorized_minor, captured_minor, capturing_minor, voiding, hold_closed, capture_before,
	open_disputes, disputed_minor, charged_back_minor
FROM orders
WHERE id = @id AND (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''));
