-- The sweep that ends an audit run: each attempt of the merchant at the
-- gateway account made in the run's window whose order is charged
-- (@charged) by it, and of which the run saw no succeeded charge, is a
-- MISSING_ON_GATEWAY finding (record_key: the attempt's id). Returns each
-- finding's class and whether it is new.
--
-- What the run saw is read by a subquery per attempt, by all three
-- columns of audit_seen_attempt_idx: written as NOT EXISTS, PostgreSQL
-- made it an anti join, and with audit_seen not yet analyzed (its rows
-- come and go with each run) it planned one unparameterized scan of the
-- run's rows for every attempt, quadratic in the window.
INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class, order_id, attempt_id, record_key, settle)
SELECT a.merchant_id, @run_id::uuid, @run_id::uuid, @gateway, 'MISSING_ON_GATEWAY', o.id, a.id, a.id::text,
	jsonb_build_object('order_id', o.id, 'state', o.state, 'amount_minor', o.amount_minor, 'currency', o.currency,
		'capture_mode', o.capture_mode, 'attempt_id', a.id, 'attempt_outcome', a.outcome,
		'gateway_charge_id', a.gateway_charge_id, 'attempt_created_at', a.created_at)
FROM charge_attempts a
JOIN orders o ON o.merchant_id = a.merchant_id AND o.id = a.order_id AND o.current_attempt = a.id
WHERE a.merchant_id = @merchant_id AND a.gateway = @gateway
	AND a.created_at >= @window_from AND a.created_at < @window_to
	AND o.state = ANY(@charged::text[])
	AND (
		SELECT s.attempt_id FROM audit_seen s
		WHERE s.merchant_id = @merchant_id AND s.run_id = @run_id::uuid AND s.attempt_id = a.id
			AND s.outcome = 'succeeded'
		LIMIT 1) IS NULL
ON CONFLICT (merchant_id, gateway, class, record_key) DO UPDATE SET last_run_id = EXCLUDED.last_run_id
	WHERE audit_findings.last_run_id <> EXCLUDED.last_run_id
RETURNING class, xmax = 0 AS new;
