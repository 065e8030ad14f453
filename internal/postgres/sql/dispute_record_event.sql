-- Record a gateway's event about a dispute once, as record_gateway_event.sql
-- records any other (the same key): no row returned is a repeat, and the
-- caller changes nothing. The result is settled by dispute_event_result.sql
-- in the same transaction once the dispute is applied.
INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result,
	reference, charge_id, amount_minor, currency, occurred_at)
VALUES (@merchant_id, @gateway, @event_id, @event_type, @object_id, @attempt_id::uuid, @order_id::uuid, @result,
	@reference, @charge_id, @amount_minor, @currency, @occurred_at::timestamptz)
ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING
RETURNING event_id;
