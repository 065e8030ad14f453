-- A merchant's refund and its order, read together: one statement, so
-- both as they stood at one moment (two reads would pair a refund with an
-- order that its settle moved after the refund was read).
SELECT o.id::text, o.merchant_id, o.merchant_reference, o.amount_minor, o.currency, o.payment_method, o.gateway,
	o.state, coalesce(o.current_attempt::text, '') AS current_attempt, o.reconcile_at, o.reconcile_count,
	o.last_error, o.created_at, o.updated_at, o.refunded_minor, o.refunding_minor,
	o.capture_mode, o.authorized_minor, o.captured_minor, o.capturing_minor, o.voiding, o.hold_closed, o.capture_before,
	o.open_disputes, o.disputed_minor, o.charged_back_minor,
	r.id::text AS refund_id, r.merchant_id AS refund_merchant_id, r.order_id::text AS refund_order_id,
	r.request_id AS refund_request_id, r.requested_minor AS refund_requested_minor,
	r.amount_minor AS refund_amount_minor, r.currency AS refund_currency, r.reason AS refund_reason,
	r.actor AS refund_actor, r.state AS refund_state, coalesce(r.outcome, '') AS refund_outcome,
	r.decline_code AS refund_decline_code, r.gateway_refund_id AS refund_gateway_refund_id,
	r.reconcile_at AS refund_reconcile_at, r.reconcile_count AS refund_reconcile_count,
	r.last_error AS refund_last_error, r.created_at AS refund_created_at, r.updated_at AS refund_updated_at
FROM refunds r
JOIN orders o ON o.merchant_id = r.merchant_id AND o.id = r.order_id
WHERE r.merchant_id = @merchant_id AND r.id = @refund_id;
