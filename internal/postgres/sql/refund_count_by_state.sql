-- Refunds by state, and when the longest-REFUNDING refund was made, within
-- a scope (as in order_by_id.sql).
SELECT state, count(*) AS count, min(created_at) AS oldest
FROM refunds
WHERE @any_merchant::bool OR merchant_id = nullif(@merchant_id, '')
GROUP BY state;
