-- What the charge path reads of an order to choose the gateway of its next
-- attempt (order.Routing): its routes ('' for an order with one route),
-- what eligibility looks at, and its current attempt's gateway and
-- outcome ('' before the first attempt, or while it is in flight).
SELECT coalesce(o.routes::text, '') AS routes, o.amount_minor, o.currency, o.capture_mode,
	coalesce(a.id::text, '') AS attempt_id, coalesce(a.gateway, '') AS attempt_gateway,
	coalesce(a.outcome, '') AS attempt_outcome, coalesce(a.decline_code, '') AS attempt_decline_code
FROM orders o
	LEFT JOIN charge_attempts a ON a.merchant_id = o.merchant_id AND a.id = o.current_attempt
WHERE o.merchant_id = @merchant_id AND o.id = @order_id::uuid;
