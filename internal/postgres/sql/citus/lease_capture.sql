-- Lease one due CAPTURING capture of a merchant, waiting for any other
-- holder of its row: on Citus, the second half of the reconciler's capture
-- lease (see claim_due_captures.sql here and in sql/, whose row it
-- returns). A capture another reconciler leased meanwhile is no longer
-- due, and no row comes back (the UPDATE waits for the row's lock and
-- checks its condition again on the version it waited for). Every table is
-- named with @merchant_id, not only joined on it, so that Citus runs the
-- statement on that merchant's shard alone.
WITH upd AS (
	UPDATE captures c SET reconcile_at = now() + @lease::interval
	WHERE c.merchant_id = @merchant_id AND c.id = @id AND c.state = 'CAPTURING' AND c.reconcile_at <= now()
	RETURNING c.*
)
SELECT upd.id::text AS capture_id, upd.merchant_id AS capture_merchant_id, upd.order_id::text AS capture_order_id,
	upd.request_id AS capture_request_id, upd.requested_minor AS capture_requested_minor,
	upd.amount_minor AS capture_amount_minor, upd.currency AS capture_currency, upd.final AS capture_final,
	upd.reason AS capture_reason, upd.actor AS capture_actor, upd.state AS capture_state,
	coalesce(upd.outcome, '') AS capture_outcome, upd.decline_code AS capture_decline_code,
	upd.gateway_capture_id AS capture_gateway_capture_id, upd.reconcile_at AS capture_reconcile_at,
	upd.reconcile_count AS capture_reconcile_count, upd.last_error AS capture_last_error,
	upd.created_at AS capture_created_at, upd.updated_at AS capture_updated_at,
	o.gateway, coalesce(o.current_attempt::text, '') AS charge_attempt_id,
	coalesce(a.gateway_charge_id, '') AS charge_id,
	extract(epoch FROM now() - upd.created_at)::float8 AS age_seconds
FROM upd JOIN orders o ON o.merchant_id = @merchant_id AND o.id = upd.order_id
	LEFT JOIN charge_attempts a ON a.merchant_id = @merchant_id AND a.id = o.current_attempt;
