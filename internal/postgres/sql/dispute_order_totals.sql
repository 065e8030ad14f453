-- The order's dispute totals (migration 00025), recomputed from its
-- disputes under its row lock, which every change of a dispute holds: the
-- refund claim reads them from that row. A dispute's chargeback counts
-- while it is open or once it is lost (withdrawn less reinstated).
UPDATE orders SET
	open_disputes = t.open,
	disputed_minor = t.disputed,
	charged_back_minor = t.charged_back
FROM (
	SELECT count(*) FILTER (WHERE status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW'))::int AS open,
		coalesce(sum(amount_minor) FILTER (WHERE status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW')), 0)::bigint AS disputed,
		coalesce(sum(greatest(withdrawn_minor - reinstated_minor, 0))
			FILTER (WHERE status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW', 'LOST')), 0)::bigint AS charged_back
	FROM disputes
	WHERE merchant_id = @merchant_id AND order_id = @order_id
) t
WHERE orders.merchant_id = @merchant_id AND orders.id = @order_id
RETURNING orders.state;
