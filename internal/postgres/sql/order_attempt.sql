-- A merchant's order and one of its attempts, read together: one
-- statement, so both as they stood at one moment (two reads would pair an
-- order with an attempt settled after it was read).
SELECT o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at, o.refunded_minor, o.refunding_minor,
	o.capture_mode, o.authorized_minor, o.captured_minor, o.capturing_minor, o.voiding, o.hold_closed, o.capture_before,
	a.id::text AS attempt_id, a.order_id::text AS attempt_order_id, a.request_id AS attempt_request_id,
	a.payment_method AS attempt_payment_method, a.customer AS attempt_customer, a.amount_minor AS attempt_amount_minor,
	a.currency AS attempt_currency, coalesce(a.outcome, '') AS attempt_outcome, a.decline_code AS attempt_decline_code,
	a.gateway_charge_id AS attempt_gateway_charge_id, a.gateway AS attempt_gateway, a.created_at AS attempt_created_at
FROM orders o
JOIN charge_attempts a ON a.merchant_id = o.merchant_id AND a.order_id = o.id
WHERE o.merchant_id = @merchant_id AND o.id = @order_id AND a.id = @attempt_id;
