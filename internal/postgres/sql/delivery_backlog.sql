-- Each merchant's undelivered events, orders', refunds' and audit
-- findings', and the age of
-- the oldest, for the delivery metrics. The caller names the merchants
-- that have an endpoint: a merchant without one pulls its events
-- (ListEvents), and nothing of its is waiting.
SELECT m.merchant_id, count(e.id) AS pending,
	coalesce(extract(epoch FROM now() - min(e.created_at)), 0)::float8 AS oldest_seconds
FROM unnest(@merchant_id::text[]) AS m(merchant_id)
LEFT JOIN (
	SELECT merchant_id, id, created_at FROM order_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL
	UNION ALL
	SELECT merchant_id, event_id, created_at FROM refund_events WHERE type IS NOT NULL AND deliver_at IS NOT NULL
	UNION ALL
	SELECT merchant_id, event_id, created_at FROM audit_findings WHERE type IS NOT NULL AND deliver_at IS NOT NULL
) e ON e.merchant_id = m.merchant_id
GROUP BY m.merchant_id
ORDER BY m.merchant_id;
