-- dispute_order_event.sql on Citus: settle_dispute_order_event does what it
-- does. Citus sends the call, in the caller's transaction, to the worker
-- where lock_order.sql locked the order (force_delegation), so that the
-- event is numbered there (migration 00025).
SELECT settle_dispute_order_event(@merchant_id, @order_id, @state, @event, @actor, @reason, @attempt_id::uuid,
	@dispute_id::uuid);
