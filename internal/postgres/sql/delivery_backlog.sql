-- Each merchant's undelivered events and the age of the oldest, for the
-- delivery metrics.
SELECT m.merchant_id, count(e.id) AS pending,
	coalesce(extract(epoch FROM now() - min(e.created_at)), 0)::float8 AS oldest_seconds
FROM unnest(@merchant_id::text[]) AS m(merchant_id)
LEFT JOIN order_events e ON e.merchant_id = m.merchant_id AND e.type IS NOT NULL AND e.deliver_at IS NOT NULL
GROUP BY m.merchant_id
ORDER BY m.merchant_id;
