-- Lease one due VOIDING void of a merchant, as lease_capture.sql leases a
-- capture: on Citus, the second half of the reconciler's void lease (see
-- claim_due_voids.sql here and in sql/, whose row it returns).
WITH upd AS (
	UPDATE voids v SET reconcile_at = now() + @lease::interval
	WHERE v.merchant_id = @merchant_id AND v.id = @id AND v.state = 'VOIDING' AND v.reconcile_at <= now()
	RETURNING v.*
)
SELECT upd.id::text AS void_id, upd.merchant_id AS void_merchant_id, upd.order_id::text AS void_order_id,
	upd.request_id AS void_request_id, upd.reason AS void_reason, upd.actor AS void_actor, upd.state AS void_state,
	coalesce(upd.outcome, '') AS void_outcome, upd.decline_code AS void_decline_code,
	upd.reconcile_at AS void_reconcile_at, upd.reconcile_count AS void_reconcile_count,
	upd.last_error AS void_last_error, upd.created_at AS void_created_at, upd.updated_at AS void_updated_at,
	o.gateway, coalesce(o.current_attempt::text, '') AS charge_attempt_id,
	coalesce(a.gateway_charge_id, '') AS charge_id,
	extract(epoch FROM now() - upd.created_at)::float8 AS age_seconds
FROM upd JOIN orders o ON o.merchant_id = @merchant_id AND o.id = upd.order_id
	LEFT JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = o.current_attempt;
