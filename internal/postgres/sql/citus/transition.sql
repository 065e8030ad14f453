-- transition.sql on Citus: settle_transition does what it does. Citus
-- sends the call, in the caller's transaction, to the worker where
-- lock_order.sql locked the order (force_delegation).
SELECT r.id::text, r.merchant_id, r.merchant_reference, r.amount_minor, r.currency, r.payment_method, r.gateway,
	r.state, coalesce(r.current_attempt::text, '') AS current_attempt, r.reconcile_at, r.reconcile_count,
	r.last_error, r.created_at, r.updated_at
FROM settle_transition(@merchant_id, @id, @from_state, @to_state, @outcome, @decline_code, @charge_id, @event,
	@actor, @reason) r;
