-- record_gateway_event.sql on Citus: settle_record_gateway_event does what
-- it does, except notify (a notification would be sent on the worker).
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT r.result, r.order_id, r.attempt_id, r.woken, r.raised
FROM settle_record_gateway_event(@merchant_id, @attempt_id::uuid, @gateway, @event_id, @event_type, @object_id,
	@succeeded) r;
