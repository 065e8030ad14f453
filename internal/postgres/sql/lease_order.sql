-- Lease one CHARGING or REQUIRES_ACTION order now, due or not (an operator asked; or, with
-- due_only, only if it is due: the second half of the reconciler's lease on
-- Citus, see citus/claim_due.sql), waiting for any other holder of its row: push
-- its reconcile_at forward by the lease and return it with its current
-- attempt and the attempt's age in database time, as claim_due.sql does. No
-- row when the order is neither CHARGING nor REQUIRES_ACTION (or not due). Two reconcilers that
-- both read a due order do not both lease it: the second waits for the
-- first's row lock and then finds reconcile_at moved past now().
WITH due AS (
	SELECT merchant_id, id FROM orders
	WHERE merchant_id = @merchant_id AND id = @id AND state IN ('CHARGING', 'REQUIRES_ACTION')
		AND (NOT @due_only::bool OR reconcile_at <= now())
	FOR UPDATE
), upd AS (
	UPDATE orders o SET reconcile_at = now() + @lease::interval
	FROM due WHERE o.merchant_id = due.merchant_id AND o.id = due.id
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
FROM upd JOIN charge_attempts a ON a.merchant_id = upd.merchant_id AND a.id = upd.current_attempt;
