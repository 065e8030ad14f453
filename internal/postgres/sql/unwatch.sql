-- Withdraw a watcher's interest in an order's changes.
DELETE FROM order_watchers WHERE merchant_id = @merchant_id AND order_id = @order_id AND watcher_id = @watcher_id;
