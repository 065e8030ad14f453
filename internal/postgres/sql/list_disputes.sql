-- Disputes for an operator, oldest first (ids are time-ordered), within a
-- scope as in order_by_id.sql: those in @status (any when ''), due before
-- @due_before when it is not NULL, after the page that ended with
-- @after_id when it is not NULL.
SELECT id::text AS dispute_id, merchant_id AS dispute_merchant_id, order_id::text AS dispute_order_id,
	coalesce(attempt_id::text, '') AS dispute_attempt_id, gateway AS dispute_gateway,
	gateway_dispute_id AS dispute_gateway_dispute_id, amount_minor AS dispute_amount_minor,
	currency AS dispute_currency, reason AS dispute_reason, network_reason_code AS dispute_network_reason_code,
	status AS dispute_status, stage AS dispute_stage, due_by AS dispute_due_by,
	withdrawn_minor AS dispute_withdrawn_minor, reinstated_minor AS dispute_reinstated_minor,
	fee_minor AS dispute_fee_minor, created_at AS dispute_created_at, updated_at AS dispute_updated_at
FROM disputes
WHERE (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''))
	AND (@status = '' OR status = @status)
	AND (@due_before::timestamptz IS NULL OR due_by < @due_before::timestamptz)
	AND (@after_id::uuid IS NULL OR id > @after_id::uuid)
ORDER BY id
LIMIT @limit;
