-- Matches a page of a gateway's refunds (one array per field) of the
-- merchant's charges with the merchant's refunds, by the refund's
-- reference: a succeeded refund that is not Settle's, or that Settle has
-- failed or for another amount or currency, or a refund Settle holds
-- succeeded that the gateway declined, is a REFUND_MISMATCH of the
-- refunded charge (record_key is the charge's id, so that it is one
-- finding with what the charge's refunded total shows, and one per charge
-- in a page). Refunds of charges that are not the merchant's are not
-- this run's. Returns each finding's class and whether it is new.
WITH g AS (
	SELECT * FROM unnest(@id::text[], @reference::text[], @charge_id::text[], @charge_reference::text[],
		@amount_minor::bigint[], @currency::text[], @outcome::text[], @created::text[], @settle_ref::text[],
		@charge_settle_ref::text[])
		AS g(id, reference, charge_id, charge_reference, amount_minor, currency, outcome, created, ref_id, charge_ref_id)
), m AS (
	SELECT g.*, a.id AS attempt_id, a.order_id, r.id AS refund_id, r.state AS refund_state,
		r.amount_minor AS refund_amount, r.currency AS refund_currency,
		CASE WHEN r.id IS NOT NULL THEN jsonb_build_object('order_id', r.order_id, 'refund_id', r.id,
			'state', r.state, 'amount_minor', r.amount_minor, 'currency', r.currency,
			'gateway_refund_id', r.gateway_refund_id) END AS settle,
		jsonb_build_object('id', g.id, 'reference', g.reference, 'charge_id', g.charge_id,
			'charge_reference', g.charge_reference, 'amount_minor', g.amount_minor, 'currency', g.currency,
			'outcome', g.outcome, 'created', g.created) AS gateway_record
	FROM g
	JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = g.charge_ref_id::uuid
	LEFT JOIN refunds r ON r.merchant_id = @merchant_id AND r.order_id = a.order_id AND r.id = g.ref_id::uuid
), f AS (
	SELECT DISTINCT ON (m.charge_id) m.*
	FROM m
	WHERE m.outcome = 'succeeded' AND (m.refund_id IS NULL OR m.refund_state = 'FAILED'
			OR m.refund_amount <> m.amount_minor OR m.refund_currency <> m.currency)
		OR m.outcome = 'declined' AND m.refund_state = 'SUCCEEDED'
	ORDER BY m.charge_id, m.created, m.id
)
INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class, order_id, attempt_id, gateway_record_id,
	record_key, settle, gateway_record)
SELECT @merchant_id, @run_id::uuid, @run_id::uuid, @gateway, 'REFUND_MISMATCH', order_id, attempt_id, charge_id, charge_id,
	settle, gateway_record
FROM f
ON CONFLICT (merchant_id, gateway, class, record_key) DO UPDATE SET last_run_id = EXCLUDED.last_run_id
	WHERE audit_findings.last_run_id <> EXCLUDED.last_run_id
RETURNING class, xmax = 0 AS new;
