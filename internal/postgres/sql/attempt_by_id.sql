-- A charge attempt by id, with the cascade it followed and the routes it
-- skipped.
SELECT id::text AS attempt_id, order_id::text AS attempt_order_id, request_id AS attempt_request_id,
	payment_method AS attempt_payment_method, customer AS attempt_customer, amount_minor AS attempt_amount_minor, currency AS attempt_currency,
	coalesce(outcome, '') AS attempt_outcome, decline_code AS attempt_decline_code,
	gateway_charge_id AS attempt_gateway_charge_id, gateway AS attempt_gateway, created_at AS attempt_created_at,
	cascade_after AS attempt_cascade_after, skipped AS attempt_skipped
FROM charge_attempts
WHERE merchant_id = @merchant_id AND id = @id;
