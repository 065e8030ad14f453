-- record_gateway_event.sql on Citus: settle_record_gateway_event does what
-- it does, except notify (a notification would be sent on the worker).
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT r.result, r.order_id, r.attempt_id, r.woken, r.raised
FROM settle_record_gateway_event(@merchant_id, @matched_id::uuid, @about, @reference, @gateway, @event_id,
	@event_type, @object_id, @charge_id, @succeeded, @outcome, @decline_code, @amount_minor, @currency, @occurred_at,
	@failed_later) r;
