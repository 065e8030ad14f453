-- Matches a page of a gateway's charges (one array per field) with the
-- merchant's attempts, by the charge's reference, and their orders:
-- records each charge as seen by the run (audit_seen, which the sweep of
-- audit_missing.sql reads), and a finding for each discrepancy, and
-- returns each finding's class and whether it is new (a finding that an
-- overlapping window found before is only marked seen by this run, and
-- one this run has returned already is not returned again).
--
-- A reference that is no UUID is no Settle reference: FOREIGN. A charge
-- "pays" its order when the order is charged (@charged), by this attempt,
-- which succeeded with this gateway charge, or, with no gateway charge
-- recorded, when it is the attempt's first succeeded charge this run has
-- listed (in this page, by listing order, or in an earlier one, in
-- audit_seen); a succeeded charge that does not pay its charged order is
-- a second charge of it: DUPLICATE. The totals compared allow for refunds
-- and captures in flight.
WITH g AS (
	SELECT * FROM unnest(@id::text[], @reference::text[], @amount_minor::bigint[], @currency::text[], @outcome::text[],
		@hold::text[], @captured_minor::bigint[], @refunded_minor::bigint[], @created::text[], @settle_ref::text[])
		WITH ORDINALITY
		AS g(id, reference, amount_minor, currency, outcome, hold, captured_minor, refunded_minor, created, ref_id, n)
), m AS (
	SELECT g.*, g.ref_id IS NOT NULL AS settle_ref,
		a.id AS attempt_id, o.id AS order_id, a.amount_minor AS attempt_amount, a.currency AS attempt_currency,
		coalesce(o.state = ANY(@charged::text[]), false) AS charged,
		coalesce(o.state = ANY(@charged::text[]) AND o.current_attempt = a.id AND a.outcome = 'succeeded'
			AND (a.gateway_charge_id = g.id OR a.gateway_charge_id = '' AND g.outcome = 'succeeded'
				AND row_number() OVER (PARTITION BY a.id, g.outcome ORDER BY g.n) = 1
				AND (SELECT s.attempt_id FROM audit_seen s
					WHERE s.merchant_id = @merchant_id AND s.run_id = @run_id::uuid AND s.attempt_id = a.id
						AND s.outcome = 'succeeded'
					LIMIT 1) IS NULL
			OR a.gateway_charge_id = '' AND g.outcome <> 'succeeded'), false) AS pays,
		o.capture_mode, o.captured_minor AS order_captured, o.capturing_minor, o.refunded_minor AS order_refunded,
		o.refunding_minor, o.state AS order_state, o.amount_minor AS order_amount, o.currency AS order_currency,
		o.current_attempt, a.outcome AS attempt_outcome, a.gateway_charge_id
	FROM g
	LEFT JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = g.ref_id::uuid
	LEFT JOIN orders o ON o.merchant_id = @merchant_id AND o.id = a.order_id
), seen AS (
	INSERT INTO audit_seen (merchant_id, run_id, gateway_charge_id, attempt_id, outcome)
	SELECT @merchant_id, @run_id::uuid, id, attempt_id, outcome FROM m
	ON CONFLICT DO NOTHING
), f AS (
	SELECT m.*, c.class
	FROM m, unnest(ARRAY[
		CASE WHEN m.outcome = 'succeeded' AND NOT m.settle_ref THEN 'FOREIGN' END,
		CASE WHEN m.outcome = 'succeeded' AND m.settle_ref AND NOT m.charged THEN 'MISSING_IN_SETTLE' END,
		CASE WHEN m.outcome = 'succeeded' AND m.charged AND NOT m.pays THEN 'DUPLICATE' END,
		CASE WHEN m.pays AND m.outcome <> 'succeeded' THEN 'STATUS_MISMATCH' END,
		CASE WHEN m.pays AND m.amount_minor <> m.attempt_amount THEN 'AMOUNT_MISMATCH' END,
		CASE WHEN m.pays AND m.currency <> m.attempt_currency THEN 'CURRENCY_MISMATCH' END,
		CASE WHEN m.pays AND m.outcome = 'succeeded' AND (
			m.refunded_minor NOT BETWEEN m.order_refunded AND m.order_refunded + m.refunding_minor
			OR m.capture_mode = 'manual'
				AND m.captured_minor NOT BETWEEN m.order_captured AND m.order_captured + m.capturing_minor)
			THEN 'REFUND_MISMATCH' END
	]) AS c(class)
	WHERE c.class IS NOT NULL
)
-- Each side's record is built only for a finding: a clean page builds none.
INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class, order_id, attempt_id, gateway_record_id,
	record_key, settle, gateway_record)
SELECT @merchant_id, @run_id::uuid, @run_id::uuid, @gateway, class, order_id, attempt_id, id, id,
	CASE WHEN attempt_id IS NOT NULL THEN jsonb_build_object('order_id', order_id, 'state', order_state,
		'amount_minor', order_amount, 'currency', order_currency, 'capture_mode', capture_mode,
		'current_attempt', current_attempt, 'captured_minor', order_captured, 'refunded_minor', order_refunded,
		'refunding_minor', refunding_minor, 'attempt_id', attempt_id, 'attempt_amount_minor', attempt_amount,
		'attempt_currency', attempt_currency, 'attempt_outcome', attempt_outcome, 'gateway_charge_id', gateway_charge_id)
	END,
	jsonb_build_object('id', id, 'reference', reference, 'amount_minor', amount_minor, 'currency', currency,
		'outcome', outcome, 'hold', hold, 'captured_minor', captured_minor, 'refunded_minor', refunded_minor,
		'created', created)
FROM f
ON CONFLICT (merchant_id, gateway, class, record_key) DO UPDATE SET last_run_id = EXCLUDED.last_run_id
	WHERE audit_findings.last_run_id <> EXCLUDED.last_run_id
RETURNING class, xmax = 0 AS new;
