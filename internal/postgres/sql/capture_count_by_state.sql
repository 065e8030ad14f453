-- Captures by state within a scope (as in order_by_id.sql).
SELECT state, count(*) AS count
FROM captures
WHERE @any_merchant::bool OR merchant_id = nullif(@merchant_id, '')
GROUP BY state;
