-- How many orders are in each state, within a scope (as in order_by_id.sql).
SELECT state, count(*) FROM orders
WHERE @any_merchant::bool OR merchant_id = nullif(@merchant_id, '')
GROUP BY state;
