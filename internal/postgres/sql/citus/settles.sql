-- settles.sql on Citus, for one merchant's settlements: settle_settle_orders
-- does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT r.i,
	(r.ord).id::text AS id, (r.ord).merchant_id AS merchant_id, (r.ord).merchant_reference AS merchant_reference,
	(r.ord).amount_minor AS amount_minor, (r.ord).currency AS currency, (r.ord).payment_method AS payment_method,
	(r.ord).gateway AS gateway, (r.ord).state AS state, coalesce((r.ord).current_attempt::text, '') AS current_attempt,
	(r.ord).reconcile_at AS reconcile_at, (r.ord).reconcile_count AS reconcile_count, (r.ord).last_error AS last_error,
	(r.ord).created_at AS created_at, (r.ord).updated_at AS updated_at,
	(r.ord).refunded_minor AS refunded_minor, (r.ord).refunding_minor AS refunding_minor, (r.ord).capture_mode AS capture_mode, (r.ord).authorized_minor AS authorized_minor, (r.ord).captured_minor AS captured_minor, (r.ord).capturing_minor AS capturing_minor, (r.ord).voiding AS voiding, (r.ord).hold_closed AS hold_closed, (r.ord).capture_before AS capture_before
FROM settle_settle_orders(@merchant_id, @order_id, @attempt_id, @to_state, @recheck_in, @checked, @last_error,
	@outcome, @decline_code, @charge_id, @event, @actor, @reason, @from_state, @authorized_minor,
	@capture_before, @lease) r;
