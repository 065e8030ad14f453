-- An order's captures, oldest first.
SELECT id::text AS capture_id, merchant_id AS capture_merchant_id, order_id::text AS capture_order_id,
	request_id AS capture_request_id, requested_minor AS capture_requested_minor, amount_minor AS capture_amount_minor,
	currency AS capture_currency, final AS capture_final, reason AS capture_reason, actor AS capture_actor,
	state AS capture_state, coalesce(outcome, '') AS capture_outcome, decline_code AS capture_decline_code,
	gateway_capture_id AS capture_gateway_capture_id, reconcile_at AS capture_reconcile_at,
	reconcile_count AS capture_reconcile_count, last_error AS capture_last_error,
	created_at AS capture_created_at, updated_at AS capture_updated_at
FROM captures
WHERE merchant_id = @merchant_id AND order_id = @order_id
ORDER BY created_at, id;
