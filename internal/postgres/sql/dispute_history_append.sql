-- One row of a dispute's history, in the transaction of its change.
INSERT INTO dispute_history (merchant_id, order_id, dispute_id, from_status, to_status, from_stage, to_stage,
	withdrawn_minor, reinstated_minor, event, actor, gateway_event_id)
VALUES (@merchant_id, @order_id, @dispute_id, nullif(@from_status, ''), @to_status, nullif(@from_stage, ''),
	@to_stage, @withdrawn_minor, @reinstated_minor, @event, @actor, @gateway_event_id);
