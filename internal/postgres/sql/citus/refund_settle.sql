-- refund_settle.sql on Citus: settle_settle_refund does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT (r.ord).id::text AS id, (r.ord).merchant_id AS merchant_id, (r.ord).merchant_reference AS merchant_reference,
	(r.ord).amount_minor AS amount_minor, (r.ord).currency AS currency, (r.ord).payment_method AS payment_method,
	(r.ord).gateway AS gateway, (r.ord).state AS state, coalesce((r.ord).current_attempt::text, '') AS current_attempt,
	(r.ord).reconcile_at AS reconcile_at, (r.ord).reconcile_count AS reconcile_count, (r.ord).last_error AS last_error,
	(r.ord).created_at AS created_at, (r.ord).updated_at AS updated_at,
	(r.ord).refunded_minor AS refunded_minor, (r.ord).refunding_minor AS refunding_minor,
	(r.ord).capture_mode AS capture_mode, (r.ord).authorized_minor AS authorized_minor, (r.ord).captured_minor AS captured_minor, (r.ord).capturing_minor AS capturing_minor, (r.ord).voiding AS voiding, (r.ord).hold_closed AS hold_closed, (r.ord).capture_before AS capture_before,
	(r.ord).open_disputes AS open_disputes, (r.ord).disputed_minor AS disputed_minor,
	(r.ord).charged_back_minor AS charged_back_minor,
	coalesce((r.refund).id::text, '') AS refund_id, coalesce((r.refund).merchant_id, '') AS refund_merchant_id,
	coalesce((r.refund).order_id::text, '') AS refund_order_id, coalesce((r.refund).request_id, '') AS refund_request_id,
	coalesce((r.refund).requested_minor, 0) AS refund_requested_minor, coalesce((r.refund).amount_minor, 0) AS refund_amount_minor,
	coalesce((r.refund).currency, '') AS refund_currency, coalesce((r.refund).reason, '') AS refund_reason,
	coalesce((r.refund).actor, '') AS refund_actor, coalesce((r.refund).state, '') AS refund_state,
	coalesce((r.refund).outcome, '') AS refund_outcome, coalesce((r.refund).decline_code, '') AS refund_decline_code,
	coalesce((r.refund).gateway_refund_id, '') AS refund_gateway_refund_id, (r.refund).reconcile_at AS refund_reconcile_at,
	coalesce((r.refund).reconcile_count, 0) AS refund_reconcile_count, coalesce((r.refund).last_error, '') AS refund_last_error,
	coalesce((r.refund).created_at, 'epoch') AS refund_created_at, coalesce((r.refund).updated_at, 'epoch') AS refund_updated_at
FROM settle_settle_refund(@merchant_id, @refund_id, @from_state, @to_state, @outcome, @decline_code,
	@gateway_refund_id, @recheck_in, @checked, @last_error, @event, @actor, @reason, @partial_event, @partial_to,
	@full_event, @full_to, @lease) r;
