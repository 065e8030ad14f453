-- Lease one due REFUNDING refund of a merchant, waiting for any other
-- holder of its row: on Citus, the second half of the reconciler's refund
-- lease (see claim_due_refunds.sql here and in sql/, whose row it
-- returns). A refund another reconciler leased meanwhile is no longer due,
-- and no row comes back.
WITH due AS (
	SELECT merchant_id, id FROM refunds
	WHERE merchant_id = @merchant_id AND id = @id AND state = 'REFUNDING' AND reconcile_at <= now()
	FOR UPDATE
), leased AS (
	UPDATE refunds r SET reconcile_at = now() + @lease::interval
	FROM due WHERE r.merchant_id = due.merchant_id AND r.id = due.id
	RETURNING r.*
)
SELECT leased.id::text AS refund_id, leased.merchant_id AS refund_merchant_id,
	leased.order_id::text AS refund_order_id, leased.request_id AS refund_request_id,
	leased.requested_minor AS refund_requested_minor, leased.amount_minor AS refund_amount_minor,
	leased.currency AS refund_currency, leased.reason AS refund_reason, leased.actor AS refund_actor,
	leased.state AS refund_state, coalesce(leased.outcome, '') AS refund_outcome,
	leased.decline_code AS refund_decline_code, leased.gateway_refund_id AS refund_gateway_refund_id,
	leased.reconcile_at AS refund_reconcile_at, leased.reconcile_count AS refund_reconcile_count,
	leased.last_error AS refund_last_error, leased.created_at AS refund_created_at,
	leased.updated_at AS refund_updated_at,
	o.gateway, coalesce(o.current_attempt::text, '') AS charge_attempt_id,
	coalesce(a.gateway_charge_id, '') AS charge_id,
	extract(epoch FROM now() - leased.created_at)::float8 AS refund_age_seconds
FROM leased
JOIN orders o ON o.merchant_id = leased.merchant_id AND o.id = leased.order_id
LEFT JOIN charge_attempts a ON a.merchant_id = o.merchant_id AND a.id = o.current_attempt;
