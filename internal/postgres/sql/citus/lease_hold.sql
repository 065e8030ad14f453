-- Lease one AUTHORIZED order of a merchant past its capture_before whose
-- recheck has come, waiting for any other holder of its row: on Citus, the
-- second half of the reconciler's hold lease (see claim_due_holds.sql here
-- and in sql/, whose row it returns). An order another reconciler leased
-- meanwhile is no longer due, and no row comes back.
WITH upd AS (
	UPDATE orders o SET reconcile_at = now() + @lease::interval
	WHERE o.merchant_id = @merchant_id AND o.id = @id AND o.state = 'AUTHORIZED' AND o.capture_before <= now()
		AND coalesce(o.reconcile_at, o.capture_before) <= now()
	RETURNING o.*
)
SELECT extract(epoch FROM now() - a.created_at)::float8 AS attempt_age_seconds,
	upd.id::text, upd.merchant_id, upd.merchant_reference, upd.amount_minor, upd.currency, upd.payment_method,
	upd.gateway, upd.state, coalesce(upd.current_attempt::text, '') AS current_attempt, upd.reconcile_at,
	upd.reconcile_count, upd.last_error, upd.created_at, upd.updated_at, upd.capture_mode,
	a.id::text AS attempt_id, a.order_id::text AS attempt_order_id, a.request_id AS attempt_request_id,
	a.payment_method AS attempt_payment_method, a.customer AS attempt_customer, a.amount_minor AS attempt_amount_minor,
	a.currency AS attempt_currency, coalesce(a.outcome, '') AS attempt_outcome,
	a.decline_code AS attempt_decline_code, a.gateway_charge_id AS attempt_gateway_charge_id, a.gateway AS attempt_gateway,
	a.created_at AS attempt_created_at
FROM upd JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = upd.current_attempt;
