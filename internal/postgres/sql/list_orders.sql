-- Orders for an operator, newest state change first: those in @state (any
-- when ''), last changed at least @min_age ago, after the page that ended
-- with (@after_updated, @after_id) when that is not NULL; within a scope,
-- as in order_by_id.sql: every merchant's with @any_merchant, otherwise
-- only @merchant_id's (none for an empty one).
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at, refunded_minor, refunding_minor,
	capture_mode, authorized_minor, captured_minor, capturing_minor, voiding, hold_closed, capture_before
FROM orders
WHERE (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''))
	AND (@state = '' OR state = @state) AND updated_at <= now() - @min_age::interval
	AND (@after_updated::timestamptz IS NULL OR (updated_at, id) < (@after_updated, @after_id::uuid))
ORDER BY updated_at DESC, id DESC
LIMIT @limit;
