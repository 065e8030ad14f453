-- A merchant's capture and its order, read together in one snapshot.
SELECT o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at, o.refunded_minor, o.refunding_minor,
	o.capture_mode, o.authorized_minor, o.captured_minor, o.capturing_minor, o.voiding, o.hold_closed,
	o.capture_before,
	c.id::text AS capture_id, c.merchant_id AS capture_merchant_id, c.order_id::text AS capture_order_id,
	c.request_id AS capture_request_id, c.requested_minor AS capture_requested_minor,
	c.amount_minor AS capture_amount_minor, c.currency AS capture_currency, c.final AS capture_final,
	c.reason AS capture_reason, c.actor AS capture_actor, c.state AS capture_state,
	coalesce(c.outcome, '') AS capture_outcome, c.decline_code AS capture_decline_code,
	c.gateway_capture_id AS capture_gateway_capture_id, c.reconcile_at AS capture_reconcile_at,
	c.reconcile_count AS capture_reconcile_count, c.last_error AS capture_last_error,
	c.created_at AS capture_created_at, c.updated_at AS capture_updated_at
FROM captures c JOIN orders o ON o.merchant_id = c.merchant_id AND o.id = c.order_id
WHERE c.merchant_id = @merchant_id AND c.id = @capture_id;
