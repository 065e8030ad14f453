-- When the longest-CHARGING order entered CHARGING, and how many CHARGING
-- orders are due for a check.
SELECT min(updated_at) AS oldest_charging, count(*) FILTER (WHERE reconcile_at <= now()) AS backlog
FROM orders
WHERE state = 'CHARGING';
