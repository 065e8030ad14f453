-- Keep the failed tries of a round of deliveries (record_deliveries.sql
-- recorded their events' ends), element i of each array one try.
INSERT INTO delivery_tries (merchant_id, event_num, attempt, status, error)
SELECT * FROM unnest(@merchant_id::text[], @event_num::bigint[], @attempt::int[], @status::int[], @error::text[])
ON CONFLICT DO NOTHING;
