-- Record a gateway's event once and do what it triggers, in one statement
-- and one commit: take the attempt, capture, void or refund it is about
-- (@about: '', capture, void, refund; gateway_event_attempt.sql found it
-- and its merchant; with none, @merchant_id is '' and @matched_id NULL),
-- lock its order, and judge it:
--
--   woken           the order is CHARGING (or REQUIRES_ACTION, NEEDS_REVIEW)
--                   for this very attempt, or the capture, void or refund
--                   is in flight: it becomes due now, and the reconcilers
--                   are told; their guarded lookup decides, never the event.
--                   So too an AUTHORIZED order whose hold the event reports
--                   ended without money moving (Adyen's EXPIRE: the hold
--                   lapsed before the capture_before Settle assumed): its
--                   capture_before is brought to now, which makes its hold
--                   due for the reconcilers' lookup (claim_due_holds.sql).
--   review          the event reports a success for an attempt that its
--                   order does not hold as in flight, held or paid: a
--                   possible second charge, raised as a review item.
--   capture_failed  the event reports a decline of the operation that took
--                   the order's money (the attempt that paid it, or a
--                   succeeded capture): raised as a review item. So too a
--                   failure the gateway reports after it accepted the
--                   capture of the attempt of an order still in flight
--                   (@failed_later: Adyen's CAPTURE_FAILED, which can be
--                   recorded before the call's own settle makes the order
--                   PAID on the capture Adyen received); the order is
--                   woken as well.
--   refund_failed   the event reports a decline of a succeeded refund
--                   (Adyen's REFUND_FAILED after its REFUND): the money did
--                   not go back after all; raised as a review item.
--   ignored         anything else about a known operation.
--   unknown_object  nothing of ours.
--
-- Nothing moves money or state but a wake. The event is stored with what it
-- says (reference verbatim, outcome, amount, occurred_at) for the lookups
-- of a gateway that has no status read (gateway_events_about.sql).
--
-- A repeat of an event already recorded inserts nothing and so triggers
-- nothing: the result is then 'duplicate'. Only a woken order notifies
-- (settle_due): a notifying transaction holds a database-wide lock until
-- its commit is durable (see migration 00003), which events that change
-- nothing need not pay.
WITH target AS (
	SELECT a.order_id FROM charge_attempts a
	WHERE @about::text = '' AND a.merchant_id = @merchant_id AND a.id = @matched_id::uuid
	UNION ALL
	SELECT c.order_id FROM captures c
	WHERE @about::text = 'capture' AND c.merchant_id = @merchant_id AND c.id = @matched_id::uuid
	UNION ALL
	SELECT v.order_id FROM voids v
	WHERE @about::text = 'void' AND v.merchant_id = @merchant_id AND v.id = @matched_id::uuid
	UNION ALL
	SELECT r.order_id FROM refunds r
	WHERE @about::text = 'refund' AND r.merchant_id = @merchant_id AND r.id = @matched_id::uuid
), ord AS (
	SELECT o.id, o.merchant_id, o.state, o.current_attempt
	FROM target JOIN orders o ON o.merchant_id = @merchant_id AND o.id = target.order_id
	FOR UPDATE OF o
-- The operation's row is locked after its order's, as its claim and settle
-- do, and so read as it is once the order is ours.
), cap AS (
	SELECT c.state FROM captures c
	WHERE @about::text = 'capture' AND c.merchant_id = @merchant_id AND c.id = @matched_id::uuid
		AND EXISTS (SELECT 1 FROM ord)
	FOR UPDATE
), vd AS (
	SELECT v.state FROM voids v
	WHERE @about::text = 'void' AND v.merchant_id = @merchant_id AND v.id = @matched_id::uuid
		AND EXISTS (SELECT 1 FROM ord)
	FOR UPDATE
), ref AS (
	SELECT r.state FROM refunds r
	WHERE @about::text = 'refund' AND r.merchant_id = @merchant_id AND r.id = @matched_id::uuid
		AND EXISTS (SELECT 1 FROM ord)
	FOR UPDATE
), verdict AS (
	SELECT ord.id, ord.current_attempt, CASE
		WHEN ord.id IS NULL THEN 'unknown_object'
		WHEN @about = '' AND @failed_later::bool AND ord.current_attempt = @matched_id::uuid
			AND ord.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW') THEN 'capture_failed'
		WHEN @about = '' AND ord.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW')
			AND ord.current_attempt = @matched_id::uuid THEN 'woken'
		WHEN @about = '' AND ord.state = 'AUTHORIZED' AND ord.current_attempt = @matched_id::uuid
			AND @outcome::text = 'succeeded' AND NOT @succeeded::bool THEN 'woken'
		WHEN @about <> '' AND op.state IN ('CAPTURING', 'VOIDING', 'REFUNDING') THEN 'woken'
		WHEN @about = '' AND @succeeded::bool AND NOT (ord.current_attempt = @matched_id::uuid
			AND ord.state IN ('AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED')) THEN 'review'
		WHEN @outcome::text = 'declined' AND ((@about = '' AND ord.current_attempt = @matched_id::uuid
			AND ord.state IN ('PAID', 'PARTIALLY_REFUNDED', 'REFUNDED')) OR (@about = 'capture' AND op.state = 'SUCCEEDED'))
			THEN 'capture_failed'
		WHEN @outcome::text = 'declined' AND @about = 'refund' AND op.state = 'SUCCEEDED' THEN 'refund_failed'
		ELSE 'ignored' END AS result
	FROM (SELECT 1) one LEFT JOIN ord ON true
		LEFT JOIN (SELECT state FROM cap UNION ALL SELECT state FROM vd UNION ALL SELECT state FROM ref) op ON true
), ins AS (
	INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result,
		reference, about, charge_id, succeeded, outcome, decline_code, amount_minor, currency, occurred_at)
	SELECT @merchant_id, @gateway, @event_id, @event_type, @object_id,
		CASE WHEN v.id IS NULL THEN NULL ELSE @matched_id::uuid END, v.id, v.result,
		@reference, @about, @charge_id, @succeeded, @outcome, @decline_code, @amount_minor, @currency, @occurred_at
	FROM verdict v
	ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING
	RETURNING merchant_id, order_id, attempt_id, result
), due AS (
	UPDATE orders o SET reconcile_at = least(o.reconcile_at, now()),
		capture_before = CASE WHEN o.state = 'AUTHORIZED' THEN least(o.capture_before, now()) ELSE o.capture_before END
	FROM ins
	WHERE ins.result IN ('woken', 'capture_failed') AND @about = '' AND o.id = ins.order_id AND o.merchant_id = ins.merchant_id
		AND o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW', 'AUTHORIZED') AND o.current_attempt = ins.attempt_id
	RETURNING o.id
), due_capture AS (
	UPDATE captures c SET reconcile_at = least(c.reconcile_at, now())
	FROM ins
	WHERE ins.result = 'woken' AND @about = 'capture' AND c.merchant_id = ins.merchant_id AND c.id = ins.attempt_id
		AND c.merchant_id = @merchant_id AND c.id = @matched_id::uuid
		AND c.state = 'CAPTURING'
	RETURNING c.order_id
), due_void AS (
	UPDATE voids v SET reconcile_at = least(v.reconcile_at, now())
	FROM ins
	WHERE ins.result = 'woken' AND @about = 'void' AND v.merchant_id = ins.merchant_id AND v.id = ins.attempt_id
		AND v.merchant_id = @merchant_id AND v.id = @matched_id::uuid
		AND v.state = 'VOIDING'
	RETURNING v.order_id
), due_refund AS (
	UPDATE refunds r SET reconcile_at = least(r.reconcile_at, now())
	FROM ins
	WHERE ins.result = 'woken' AND @about = 'refund' AND r.merchant_id = ins.merchant_id AND r.id = ins.attempt_id
		AND r.state = 'REFUNDING'
	RETURNING r.order_id
), review AS (
	INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
	SELECT ins.merchant_id, CASE WHEN ins.result = 'review' THEN 'possible_double_charge' ELSE ins.result END,
		ins.order_id, CASE WHEN @about = '' THEN ins.attempt_id ELSE v.current_attempt END, @gateway, @event_id
	FROM ins, verdict v WHERE ins.result IN ('review', 'capture_failed', 'refund_failed')
	ON CONFLICT (merchant_id, attempt_id, kind) DO NOTHING
	RETURNING id
)
SELECT coalesce((SELECT result FROM ins), 'duplicate') AS result,
	coalesce((SELECT order_id::text FROM ins), '') AS order_id,
	coalesce((SELECT attempt_id::text FROM ins), '') AS attempt_id,
	(SELECT count(pg_notify('settle_due', id::text)) FROM (SELECT id FROM due UNION ALL SELECT order_id FROM due_capture
		UNION ALL SELECT order_id FROM due_void UNION ALL SELECT order_id FROM due_refund) d) AS woken,
	(SELECT count(*) FROM review) AS raised;
