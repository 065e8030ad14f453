-- Keep a watcher's row alive for @ttl more: a server refreshes the rows of
-- its open streams, and a crashed server's rows expire.
UPDATE order_watchers SET expires_at = now() + @ttl::interval
WHERE merchant_id = @merchant_id AND order_id = @order_id AND watcher_id = @watcher_id;
