-- Lease up to @limit due CHARGING or REQUIRES_ACTION orders, oldest first, skipping those
-- another reconciler holds: push their reconcile_at forward by the lease and
-- return them with their current attempts and the attempts' age in database
-- time. The statement commits the lease; a reconciler that dies holding it
-- lets it expire.
WITH due AS (
	SELECT merchant_id, id FROM orders WHERE state IN ('CHARGING', 'REQUIRES_ACTION') AND reconcile_at <= now()
	ORDER BY reconcile_at LIMIT @limit FOR UPDATE SKIP LOCKED
), upd AS (
	UPDATE orders o SET reconcile_at = now() + @lease::interval FROM due WHERE o.merchant_id = due.merchant_id AND o.id = due.id RETURNING o.*
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
FROM upd JOIN charge_attempts a ON a.merchant_id = upd.merchant_id AND a.id = upd.current_attempt;
