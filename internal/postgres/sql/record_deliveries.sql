-- Record the deliveries of leased events, all in one statement. Element i
-- of each array is one event's result: @outcome is 'delivered'; 'retry'
-- (try again after @backoff, unless that is past @give_up after the event
-- was written: then it has failed); 'failed' (the endpoint will never take
-- it); or 'untried' (put back after @backoff without counting the lease as
-- an attempt: its endpoint had just failed another event). It returns each
-- event's end: failed says whether it has failed, and latency_seconds is
-- the time from the commit of its transition to now, in database time.
WITH r AS (
	SELECT * FROM unnest(@merchant_id::text[], @id::bigint[], @outcome::text[], @status::int[], @backoff::interval[])
		AS r(merchant_id, id, outcome, status, backoff)
), upd AS (
	UPDATE order_events e SET
		deliver_at = CASE WHEN r.outcome IN ('retry', 'untried') AND e.created_at + @give_up::interval > now() + r.backoff
			THEN now() + r.backoff END,
		delivered_at = CASE WHEN r.outcome = 'delivered' THEN now() ELSE e.delivered_at END,
		failed_at = CASE
			WHEN r.outcome = 'delivered' THEN NULL
			WHEN r.outcome = 'failed' OR e.created_at + @give_up::interval <= now() + r.backoff THEN now()
		END,
		delivery_attempts = e.delivery_attempts - (r.outcome = 'untried')::int,
		last_status = CASE WHEN r.outcome = 'untried' THEN e.last_status ELSE r.status END
	FROM r
	WHERE e.merchant_id = r.merchant_id AND e.id = r.id AND e.deliver_at IS NOT NULL
	RETURNING e.id, e.merchant_id, r.outcome, e.failed_at IS NOT NULL AS failed,
		extract(epoch FROM now() - e.created_at)::float8 AS latency_seconds
)
SELECT id AS event_num, merchant_id, outcome, failed, latency_seconds FROM upd;
