-- When the longest-CHARGING order entered CHARGING, and how many CHARGING
-- orders are due for a check, within a scope (as in order_by_id.sql).
SELECT min(updated_at) AS oldest_charging, count(*) FILTER (WHERE reconcile_at <= now()) AS backlog
FROM orders
WHERE state = 'CHARGING' AND (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''));
