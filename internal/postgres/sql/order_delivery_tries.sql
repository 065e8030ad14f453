-- The failed delivery tries of a merchant's events, oldest first
-- (OpsService.ListOrderEvents, beside order_events_out.sql).
SELECT event_num, tried_at, attempt, status, error
FROM delivery_tries
WHERE merchant_id = @merchant_id AND event_num = ANY(@event_nums::bigint[])
ORDER BY event_num, tried_at
LIMIT 5000;
