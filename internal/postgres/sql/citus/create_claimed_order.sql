-- create_claimed_order.sql on Citus: settle_create_claimed does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT (r.ord).id::text AS id, (r.ord).merchant_id AS merchant_id, (r.ord).merchant_reference AS merchant_reference,
	(r.ord).amount_minor AS amount_minor, (r.ord).currency AS currency, (r.ord).payment_method AS payment_method,
	(r.ord).gateway AS gateway, (r.ord).state AS state, coalesce((r.ord).current_attempt::text, '') AS current_attempt,
	(r.ord).reconcile_at AS reconcile_at, (r.ord).reconcile_count AS reconcile_count, (r.ord).last_error AS last_error,
	(r.ord).created_at AS created_at, (r.ord).updated_at AS updated_at, (r.ord).capture_mode AS capture_mode,
	coalesce((r.att).id::text, '') AS attempt_id, coalesce((r.att).order_id::text, '') AS attempt_order_id,
	coalesce((r.att).request_id, '') AS attempt_request_id, coalesce((r.att).payment_method, '') AS attempt_payment_method,
	coalesce((r.att).customer, '') AS attempt_customer,
	coalesce((r.att).amount_minor, 0) AS attempt_amount_minor, coalesce((r.att).currency, '') AS attempt_currency,
	coalesce((r.att).outcome, '') AS attempt_outcome, coalesce((r.att).decline_code, '') AS attempt_decline_code,
	coalesce((r.att).gateway_charge_id, '') AS attempt_gateway_charge_id, coalesce((r.att).gateway, '') AS attempt_gateway,
	coalesce((r.att).created_at, 'epoch') AS attempt_created_at
FROM settle_create_claimed(@merchant_id, @id, @merchant_reference, @amount_minor, @currency, @payment_method,
	@gateway, @to_state, @attempt_id, @lease, @request_id, @from_state, @create_event, @claim_event, @actor,
	@customer, @capture_mode, @routes, @skipped) r;
