-- A merchant's void and its order, read together in one snapshot.
SELECT o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at, o.refunded_minor, o.refunding_minor,
	o.capture_mode, o.authorized_minor, o.captured_minor, o.capturing_minor, o.voiding, o.hold_closed,
	o.capture_before,
	v.id::text AS void_id, v.merchant_id AS void_merchant_id, v.order_id::text AS void_order_id,
	v.request_id AS void_request_id, v.reason AS void_reason, v.actor AS void_actor, v.state AS void_state,
	coalesce(v.outcome, '') AS void_outcome, v.decline_code AS void_decline_code,
	v.reconcile_at AS void_reconcile_at, v.reconcile_count AS void_reconcile_count,
	v.last_error AS void_last_error, v.created_at AS void_created_at, v.updated_at AS void_updated_at
FROM voids v JOIN orders o ON o.merchant_id = v.merchant_id AND o.id = v.order_id
WHERE v.merchant_id = @merchant_id AND v.id = @void_id;
