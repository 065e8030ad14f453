-- Push the next lookup of an AUTHORIZED order's hold to @recheck_in from
-- now, recording why it is still open (or what else the gateway said).
UPDATE orders SET reconcile_at = now() + @recheck_in::interval, reconcile_count = reconcile_count + 1,
	last_error = @last_error
WHERE merchant_id = @merchant_id AND id = @order_id AND state = 'AUTHORIZED';
