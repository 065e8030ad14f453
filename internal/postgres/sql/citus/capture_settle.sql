-- capture_settle.sql on Citus: settle_settle_capture does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT (r.ord).id::text AS id, (r.ord).merchant_id AS merchant_id, (r.ord).merchant_reference AS merchant_reference,
	(r.ord).amount_minor AS amount_minor, (r.ord).currency AS currency, (r.ord).payment_method AS payment_method,
	(r.ord).gateway AS gateway, (r.ord).state AS state, coalesce((r.ord).current_attempt::text, '') AS current_attempt,
	(r.ord).reconcile_at AS reconcile_at, (r.ord).reconcile_count AS reconcile_count, (r.ord).last_error AS last_error,
	(r.ord).created_at AS created_at, (r.ord).updated_at AS updated_at,
	(r.ord).refunded_minor AS refunded_minor, (r.ord).refunding_minor AS refunding_minor,
	(r.ord).capture_mode AS capture_mode, (r.ord).authorized_minor AS authorized_minor,
	(r.ord).captured_minor AS captured_minor, (r.ord).capturing_minor AS capturing_minor, (r.ord).voiding AS voiding,
	(r.ord).hold_closed AS hold_closed, (r.ord).capture_before AS capture_before,
	coalesce((r.capture).id::text, '') AS capture_id, coalesce((r.capture).merchant_id, '') AS capture_merchant_id,
	coalesce((r.capture).order_id::text, '') AS capture_order_id, coalesce((r.capture).request_id, '') AS capture_request_id,
	coalesce((r.capture).requested_minor, 0) AS capture_requested_minor,
	coalesce((r.capture).amount_minor, 0) AS capture_amount_minor, coalesce((r.capture).currency, '') AS capture_currency,
	coalesce((r.capture).final, false) AS capture_final, coalesce((r.capture).reason, '') AS capture_reason,
	coalesce((r.capture).actor, '') AS capture_actor, coalesce((r.capture).state, '') AS capture_state,
	coalesce((r.capture).outcome, '') AS capture_outcome, coalesce((r.capture).decline_code, '') AS capture_decline_code,
	coalesce((r.capture).gateway_capture_id, '') AS capture_gateway_capture_id,
	(r.capture).reconcile_at AS capture_reconcile_at, coalesce((r.capture).reconcile_count, 0) AS capture_reconcile_count,
	coalesce((r.capture).last_error, '') AS capture_last_error,
	coalesce((r.capture).created_at, 'epoch') AS capture_created_at,
	coalesce((r.capture).updated_at, 'epoch') AS capture_updated_at
FROM settle_settle_capture(@merchant_id, @capture_id, @from_state, @to_state, @outcome, @decline_code,
	@gateway_capture_id, @recheck_in, @checked, @last_error, @event, @actor, @reason, @capture_event, @paid_state,
	@captured_event, @failed_event, @lease) r;
