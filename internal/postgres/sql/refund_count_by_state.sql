-- Refunds by state, and when the longest-REFUNDING refund was made.
SELECT state, count(*) AS count, min(created_at) AS oldest
FROM refunds
GROUP BY state;
