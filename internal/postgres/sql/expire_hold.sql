-- Move an AUTHORIZED order whose hold the gateway says has lapsed to
-- @to_state (EXPIRED) with @event, guarded by its hold being untouched:
-- still AUTHORIZED for @attempt_id, nothing captured or being captured,
-- no void in flight. The merchant is sent order.authorization_expired.
WITH upd AS (
	UPDATE orders o SET state = @to_state, reconcile_at = NULL, last_error = '', updated_at = now()
	WHERE o.merchant_id = @merchant_id AND o.id = @order_id AND o.state = 'AUTHORIZED'
		AND o.current_attempt = @attempt_id AND o.captured_minor = 0 AND o.capturing_minor = 0 AND NOT o.voiding
	RETURNING o.*
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, 'AUTHORIZED', state, @event, @actor, @reason, current_attempt FROM upd
)
SELECT count(*) AS expired FROM upd;
