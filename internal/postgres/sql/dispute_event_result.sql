-- What a recorded dispute event came to (dispute_record_event.sql).
UPDATE gateway_events SET result = @result
WHERE merchant_id = @merchant_id AND gateway = @gateway AND event_id = @event_id;
