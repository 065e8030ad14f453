-- Record a gateway's event once and do what it triggers, in one statement
-- and one commit: take the attempt it is about (gateway_event_attempt.sql
-- found it and its merchant; with no attempt, @merchant_id is '' and
-- @attempt_id NULL), lock its order, and judge it:
--
--   woken           the order is CHARGING (or NEEDS_REVIEW) for this very
--                   attempt: it becomes due now, and the reconcilers are
--                   told; their guarded lookup decides, never the event.
--   review          the event reports a success for an attempt that its
--                   order does not hold as in flight or paid: a possible
--                   second charge, raised as a review item; nothing moves.
--   ignored         anything else about a known attempt.
--   unknown_object  no attempt of ours.
--
-- A repeat of an event already recorded inserts nothing and so triggers
-- nothing: the result is then 'duplicate'. Only a woken order notifies
-- (settle_due): a notifying transaction holds a database-wide lock until
-- its commit is durable (see migration 00003), which events that change
-- nothing need not pay.
WITH att AS (
	SELECT a.id, a.order_id, a.merchant_id FROM charge_attempts a
	WHERE a.merchant_id = @merchant_id AND a.id = @attempt_id::uuid
), ord AS (
	SELECT o.id, o.merchant_id, o.state, o.current_attempt, att.id AS attempt_id
	FROM att JOIN orders o ON o.id = att.order_id AND o.merchant_id = att.merchant_id
	FOR UPDATE OF o
), verdict AS (
	SELECT ord.id, ord.merchant_id, ord.attempt_id, CASE
		WHEN ord.id IS NULL THEN 'unknown_object'
		WHEN ord.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW') AND ord.current_attempt = ord.attempt_id THEN 'woken'
		WHEN @succeeded::bool AND NOT (ord.state IN ('PAID', 'PARTIALLY_REFUNDED', 'REFUNDED')
			AND ord.current_attempt = ord.attempt_id) THEN 'review'
		ELSE 'ignored' END AS result
	FROM (SELECT 1) one LEFT JOIN ord ON true
), ins AS (
	INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result)
	SELECT @merchant_id, @gateway, @event_id, @event_type, @object_id, v.attempt_id, v.id, v.result
	FROM verdict v
	ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING
	RETURNING merchant_id, order_id, attempt_id, result
), due AS (
	UPDATE orders o SET reconcile_at = least(o.reconcile_at, now())
	FROM ins
	WHERE ins.result = 'woken' AND o.id = ins.order_id AND o.merchant_id = ins.merchant_id
		AND o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW') AND o.current_attempt = ins.attempt_id
	RETURNING o.id
), review AS (
	INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
	SELECT merchant_id, 'possible_double_charge', order_id, attempt_id, @gateway, @event_id
	FROM ins WHERE result = 'review'
	ON CONFLICT (merchant_id, attempt_id, kind) DO NOTHING
	RETURNING id
)
SELECT coalesce((SELECT result FROM ins), 'duplicate') AS result,
	coalesce((SELECT order_id::text FROM ins), '') AS order_id,
	coalesce((SELECT attempt_id::text FROM ins), '') AS attempt_id,
	(SELECT count(pg_notify('settle_due', id::text)) FROM due) AS woken,
	(SELECT count(*) FROM review) AS raised;
