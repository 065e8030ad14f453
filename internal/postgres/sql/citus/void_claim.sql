-- void_claim.sql on Citus: settle_claim_void does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT r.claimed,
	(r.ord).id::text AS id, (r.ord).merchant_id AS merchant_id, (r.ord).merchant_reference AS merchant_reference,
	(r.ord).amount_minor AS amount_minor, (r.ord).currency AS currency, (r.ord).payment_method AS payment_method,
	(r.ord).gateway AS gateway, (r.ord).state AS state, coalesce((r.ord).current_attempt::text, '') AS current_attempt,
	(r.ord).reconcile_at AS reconcile_at, (r.ord).reconcile_count AS reconcile_count, (r.ord).last_error AS last_error,
	(r.ord).created_at AS created_at, (r.ord).updated_at AS updated_at,
	(r.ord).refunded_minor AS refunded_minor, (r.ord).refunding_minor AS refunding_minor,
	(r.ord).capture_mode AS capture_mode, (r.ord).authorized_minor AS authorized_minor,
	(r.ord).captured_minor AS captured_minor, (r.ord).capturing_minor AS capturing_minor, (r.ord).voiding AS voiding,
	(r.ord).hold_closed AS hold_closed, (r.ord).capture_before AS capture_before,
	r.charge_id,
	coalesce((r.vd).id::text, '') AS void_id, coalesce((r.vd).merchant_id, '') AS void_merchant_id,
	coalesce((r.vd).order_id::text, '') AS void_order_id, coalesce((r.vd).request_id, '') AS void_request_id,
	coalesce((r.vd).reason, '') AS void_reason, coalesce((r.vd).actor, '') AS void_actor,
	coalesce((r.vd).state, '') AS void_state, coalesce((r.vd).outcome, '') AS void_outcome,
	coalesce((r.vd).decline_code, '') AS void_decline_code, (r.vd).reconcile_at AS void_reconcile_at,
	coalesce((r.vd).reconcile_count, 0) AS void_reconcile_count, coalesce((r.vd).last_error, '') AS void_last_error,
	coalesce((r.vd).created_at, 'epoch') AS void_created_at, coalesce((r.vd).updated_at, 'epoch') AS void_updated_at
FROM settle_claim_void(@merchant_id, @order_id, @request_id, @void_id, @reason, @actor, @lease, @authorized,
	@from_state, @to_state, @event, @create_event) r;
