-- Create a dispute, or move it forward: the guard. A dispute moves only to
-- a higher rank (order.DisputeRank of its stage and status), or at its
-- rank to more withdrawn, reinstated or fee (each only grows at the
-- gateway); status, stage, amount and due_by follow the higher rank
-- alone. An event repeated, or one older than what was applied, matches
-- the conflict and fails the WHERE: no row is returned, and nothing
-- changes. The caller holds the order's row lock.
INSERT INTO disputes (merchant_id, id, order_id, attempt_id, gateway, gateway_dispute_id, amount_minor, currency,
	reason, network_reason_code, status, stage, rank, due_by, withdrawn_minor, reinstated_minor, fee_minor)
VALUES (@merchant_id, @id, @order_id, @attempt_id::uuid, @gateway, @gateway_dispute_id, @amount_minor, @currency,
	@reason, @network_reason_code, @status, @stage, @rank, @due_by::timestamptz, @withdrawn_minor, @reinstated_minor,
	@fee_minor)
ON CONFLICT (merchant_id, gateway, gateway_dispute_id) DO UPDATE SET
	status = CASE WHEN EXCLUDED.rank > disputes.rank THEN EXCLUDED.status ELSE disputes.status END,
	stage = CASE WHEN EXCLUDED.rank > disputes.rank THEN EXCLUDED.stage ELSE disputes.stage END,
	amount_minor = CASE WHEN EXCLUDED.rank > disputes.rank AND EXCLUDED.amount_minor > 0
		THEN EXCLUDED.amount_minor ELSE disputes.amount_minor END,
	due_by = CASE WHEN EXCLUDED.rank > disputes.rank THEN coalesce(EXCLUDED.due_by, disputes.due_by)
		ELSE disputes.due_by END,
	reason = coalesce(nullif(EXCLUDED.reason, ''), disputes.reason),
	network_reason_code = coalesce(nullif(EXCLUDED.network_reason_code, ''), disputes.network_reason_code),
	attempt_id = coalesce(disputes.attempt_id, EXCLUDED.attempt_id),
	rank = greatest(disputes.rank, EXCLUDED.rank),
	withdrawn_minor = greatest(disputes.withdrawn_minor, EXCLUDED.withdrawn_minor),
	reinstated_minor = greatest(disputes.reinstated_minor, EXCLUDED.reinstated_minor),
	fee_minor = greatest(disputes.fee_minor, EXCLUDED.fee_minor),
	-- The insert's now(): Citus takes no function that is not immutable
	-- in DO UPDATE SET.
	updated_at = EXCLUDED.updated_at
WHERE EXCLUDED.rank > disputes.rank
	OR EXCLUDED.withdrawn_minor > disputes.withdrawn_minor
	OR EXCLUDED.reinstated_minor > disputes.reinstated_minor
	OR EXCLUDED.fee_minor > disputes.fee_minor
RETURNING id::text AS dispute_id, merchant_id AS dispute_merchant_id, order_id::text AS dispute_order_id,
	coalesce(attempt_id::text, '') AS dispute_attempt_id, gateway AS dispute_gateway,
	gateway_dispute_id AS dispute_gateway_dispute_id, amount_minor AS dispute_amount_minor,
	currency AS dispute_currency, reason AS dispute_reason, network_reason_code AS dispute_network_reason_code,
	status AS dispute_status, stage AS dispute_stage, due_by AS dispute_due_by,
	withdrawn_minor AS dispute_withdrawn_minor, reinstated_minor AS dispute_reinstated_minor,
	fee_minor AS dispute_fee_minor, created_at AS dispute_created_at, updated_at AS dispute_updated_at;
