-- Register a watcher of a merchant's order until @ttl from now, and delete
-- that order's expired watchers. The row is copied from the order itself,
-- so that no row is ever created for an order of another merchant or for
-- no order at all: the statement then returns nothing. Only watched orders
-- are notified (see migrations 00003 and 00004).
WITH swept AS (
	DELETE FROM order_watchers WHERE merchant_id = @merchant_id AND order_id = @order_id AND expires_at <= now()
), ins AS (
	-- A CTE rather than the statement itself: Citus cannot plan an
	-- INSERT ... SELECT that carries a modifying CTE.
	INSERT INTO order_watchers (merchant_id, order_id, watcher_id, expires_at)
	SELECT merchant_id, id, @watcher_id, now() + @ttl::interval FROM orders
	WHERE id = @order_id AND merchant_id = @merchant_id
	RETURNING true AS watched
)
SELECT watched FROM ins;
