-- Record the deliveries of leased events, orders', refunds' and audit
-- findings', all in one statement. Element i of each array is one event's result: @outcome is
-- 'delivered'; 'retry' (try again after @backoff, unless that is past
-- @give_up after the event was written: then it has failed); 'failed' (the
-- endpoint will never take it); or 'untried' (put back after @backoff
-- without counting the lease as an attempt: its endpoint had just failed
-- another event). It returns each event's end: failed says whether it has
-- failed, and latency_seconds is the time from the commit of its
-- transition to now, in database time.
-- r and t are MATERIALIZED: on Citus, planning this statement with them
-- inlined fails, and Citus 13.2.2 then stops delegating function calls on
-- the connection (see migration 00016).
WITH r AS MATERIALIZED (
	SELECT * FROM unnest(@merchant_id::text[], @id::bigint[], @outcome::text[], @status::int[], @backoff::interval[])
		AS r(merchant_id, id, outcome, status, backoff)
), t AS MATERIALIZED (
	-- The times are read here rather than in the UPDATE: Citus refuses a
	-- stable function (now(), timestamptz + interval) applied to a column,
	-- or inside a CASE, in an UPDATE's SET list or RETURNING. An event whose
	-- retry would come after @give_up from its writing has failed: written
	-- before cutoff.
	SELECT r.*, now() AS now, now() + r.backoff AS retry_at, now() + r.backoff - @give_up::interval AS cutoff FROM r
), upd_o AS (
	UPDATE order_events e SET
		deliver_at = CASE WHEN t.outcome IN ('retry', 'untried') AND e.created_at > t.cutoff THEN t.retry_at END,
		delivered_at = CASE WHEN t.outcome = 'delivered' THEN t.now ELSE e.delivered_at END,
		failed_at = CASE
			WHEN t.outcome = 'delivered' THEN NULL
			WHEN t.outcome = 'failed' OR e.created_at <= t.cutoff THEN t.now
		END,
		delivery_attempts = e.delivery_attempts - (t.outcome = 'untried')::int,
		last_status = CASE WHEN t.outcome = 'untried' THEN e.last_status ELSE t.status END
	FROM t
	WHERE e.merchant_id = t.merchant_id AND e.id = t.id AND e.deliver_at IS NOT NULL
	RETURNING e.id, e.merchant_id, t.outcome, e.failed_at IS NOT NULL AS failed,
		extract(epoch FROM t.now - e.created_at)::float8 AS latency_seconds
), upd_r AS (
	-- upd_o for refunds' events, numbered by event_id: the two tables share
	-- one numbering, so an event is a row of one of them.
	UPDATE refund_events e SET
		deliver_at = CASE WHEN t.outcome IN ('retry', 'untried') AND e.created_at > t.cutoff THEN t.retry_at END,
		delivered_at = CASE WHEN t.outcome = 'delivered' THEN t.now ELSE e.delivered_at END,
		failed_at = CASE
			WHEN t.outcome = 'delivered' THEN NULL
			WHEN t.outcome = 'failed' OR e.created_at <= t.cutoff THEN t.now
		END,
		delivery_attempts = e.delivery_attempts - (t.outcome = 'untried')::int,
		last_status = CASE WHEN t.outcome = 'untried' THEN e.last_status ELSE t.status END
	FROM t
	WHERE e.merchant_id = t.merchant_id AND e.event_id = t.id AND e.deliver_at IS NOT NULL
	RETURNING e.event_id AS id, e.merchant_id, t.outcome, e.failed_at IS NOT NULL AS failed,
		extract(epoch FROM t.now - e.created_at)::float8 AS latency_seconds
), upd_f AS (
	-- upd_o for audit findings' events, numbered by event_id (00030).
	UPDATE audit_findings e SET
		deliver_at = CASE WHEN t.outcome IN ('retry', 'untried') AND e.created_at > t.cutoff THEN t.retry_at END,
		delivered_at = CASE WHEN t.outcome = 'delivered' THEN t.now ELSE e.delivered_at END,
		failed_at = CASE
			WHEN t.outcome = 'delivered' THEN NULL
			WHEN t.outcome = 'failed' OR e.created_at <= t.cutoff THEN t.now
		END,
		delivery_attempts = e.delivery_attempts - (t.outcome = 'untried')::int,
		last_status = CASE WHEN t.outcome = 'untried' THEN e.last_status ELSE t.status END
	FROM t
	WHERE e.merchant_id = t.merchant_id AND e.event_id = t.id AND e.deliver_at IS NOT NULL
	RETURNING e.event_id AS id, e.merchant_id, t.outcome, e.failed_at IS NOT NULL AS failed,
		extract(epoch FROM t.now - e.created_at)::float8 AS latency_seconds
)
SELECT id AS event_num, merchant_id, outcome, failed, latency_seconds FROM upd_o
UNION ALL
SELECT id, merchant_id, outcome, failed, latency_seconds FROM upd_r
UNION ALL
SELECT id, merchant_id, outcome, failed, latency_seconds FROM upd_f;
