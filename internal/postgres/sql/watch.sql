-- Register a watcher's interest in an order's changes: the trigger of
-- migration 00003 notifies only orders that someone watches.
INSERT INTO order_watchers (order_id, watcher_id) VALUES (@order_id, @watcher_id);
