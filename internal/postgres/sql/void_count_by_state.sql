-- Voids by state within a scope (as in order_by_id.sql).
SELECT state, count(*) AS count
FROM voids
WHERE @any_merchant::bool OR merchant_id = nullif(@merchant_id, '')
GROUP BY state;
