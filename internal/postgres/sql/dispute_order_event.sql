-- A dispute's row in its order's history, and so its event out
-- (dispute.opened, dispute.updated, dispute.closed: settle_event_type),
-- in the transaction of the change. The order's state does not move.
INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id, dispute_id)
VALUES (@merchant_id, @order_id, @state, @state, @event, @actor, @reason, @attempt_id::uuid, @dispute_id);
