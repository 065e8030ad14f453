-- The order and merchant of the attempt a dispute event names (by our
-- attempt id, else by the gateway's id of the charge), as
-- gateway_event_attempt.sql finds it for a charge's event. An event names
-- no merchant, so on Citus this one read runs on every shard; everything
-- the event then does runs on its merchant's.
(SELECT a.merchant_id, a.order_id::text, a.id::text AS attempt_id FROM charge_attempts a
WHERE a.id = @attempt_id::uuid
UNION ALL
SELECT a.merchant_id, a.order_id::text, a.id::text FROM charge_attempts a
WHERE @charge_id::text <> '' AND a.gateway_charge_id = @charge_id::text AND a.gateway_charge_id <> '')
LIMIT 1;
