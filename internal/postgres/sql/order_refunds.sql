-- An order's refunds, oldest first.
SELECT id::text AS refund_id, merchant_id AS refund_merchant_id, order_id::text AS refund_order_id,
	request_id AS refund_request_id, requested_minor AS refund_requested_minor, amount_minor AS refund_amount_minor,
	currency AS refund_currency, reason AS refund_reason, actor AS refund_actor, state AS refund_state,
	coalesce(outcome, '') AS refund_outcome, decline_code AS refund_decline_code,
	gateway_refund_id AS refund_gateway_refund_id, reconcile_at AS refund_reconcile_at,
	reconcile_count AS refund_reconcile_count, last_error AS refund_last_error,
	created_at AS refund_created_at, updated_at AS refund_updated_at
FROM refunds
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY created_at, id;
