-- Find the attempt a gateway's event is about, and its merchant, before the
-- event is recorded (record_gateway_event.sql): by our attempt id (the
-- reference, or the PaymentIntent's metadata), else by the gateway's id of
-- the charge. An event names no merchant, so on Citus this one read runs on
-- every shard; everything the event then does runs on its merchant's.
(SELECT a.merchant_id, a.id::text AS attempt_id FROM charge_attempts a WHERE a.id = @attempt_id::uuid
UNION ALL
SELECT a.merchant_id, a.id::text FROM charge_attempts a
WHERE @charge_id::text <> '' AND a.gateway_charge_id = @charge_id::text)
LIMIT 1;
