-- AUTHORIZED orders whose capture_before is within @within of now, or has
-- passed (the reconciler is yet to hear whether the hold lapsed), within a
-- scope (as in order_by_id.sql). The clock only counts here: it never
-- moves an order.
SELECT count(*) AS count
FROM orders
WHERE state = 'AUTHORIZED'
	AND capture_before < now() + @within::interval
	AND (@any_merchant::bool OR merchant_id = nullif(@merchant_id, ''));
