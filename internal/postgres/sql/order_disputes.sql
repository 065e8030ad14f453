-- A merchant's order's disputes, oldest first.
SELECT id::text AS dispute_id, merchant_id AS dispute_merchant_id, order_id::text AS dispute_order_id,
	coalesce(attempt_id::text, '') AS dispute_attempt_id, gateway AS dispute_gateway,
	gateway_dispute_id AS dispute_gateway_dispute_id, amount_minor AS dispute_amount_minor,
	currency AS dispute_currency, reason AS dispute_reason, network_reason_code AS dispute_network_reason_code,
	status AS dispute_status, stage AS dispute_stage, due_by AS dispute_due_by,
	withdrawn_minor AS dispute_withdrawn_minor, reinstated_minor AS dispute_reinstated_minor,
	fee_minor AS dispute_fee_minor, created_at AS dispute_created_at, updated_at AS dispute_updated_at
FROM disputes
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY created_at, id;
