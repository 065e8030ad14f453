-- Find what a gateway's event is about, and its merchant, before the event
-- is recorded (record_gateway_event.sql): an attempt (@about '') by our
-- attempt id (the reference, or the PaymentIntent's metadata), else by the
-- gateway's id of the charge; a capture, a void or a refund by its id (its
-- reference). An event names no merchant, so on Citus this one read runs
-- on every shard; everything the event then does runs on its merchant's.
(SELECT a.merchant_id, a.id::text AS attempt_id FROM charge_attempts a
WHERE @about::text = '' AND a.id = @attempt_id::uuid
UNION ALL
SELECT a.merchant_id, a.id::text FROM charge_attempts a
WHERE @about::text = '' AND @charge_id::text <> '' AND a.gateway_charge_id = @charge_id::text AND a.gateway_charge_id <> ''
UNION ALL
SELECT c.merchant_id, c.id::text FROM captures c WHERE @about::text = 'capture' AND c.id = @attempt_id::uuid
UNION ALL
SELECT v.merchant_id, v.id::text FROM voids v WHERE @about::text = 'void' AND v.id = @attempt_id::uuid
UNION ALL
SELECT r.merchant_id, r.id::text FROM refunds r WHERE @about::text = 'refund' AND r.id = @attempt_id::uuid)
LIMIT 1;
