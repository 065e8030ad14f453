-- Make a transition that the caller decided on the order it holds locked
-- (lock_order.sql), guarded by the state it decided from, with its event;
-- with an @outcome, record it as the current attempt's result.
WITH upd AS (
	UPDATE orders SET state = @to_state, reconcile_at = NULL, updated_at = now()
	WHERE merchant_id = @merchant_id AND id = @id AND state = @from_state
	RETURNING *
), att AS (
	UPDATE charge_attempts SET outcome = @outcome, decline_code = @decline_code, gateway_charge_id = @charge_id,
		settled_at = now()
	WHERE @outcome <> '' AND merchant_id = @merchant_id AND id = (SELECT current_attempt FROM upd)
), ev AS (
	INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT merchant_id, id, @from_state, state, @event, @actor, @reason, current_attempt FROM upd
)
SELECT id::text, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
	coalesce(current_attempt::text, '') AS current_attempt, reconcile_at, reconcile_count, last_error,
	created_at, updated_at
FROM upd;
