-- Delete every expired watcher: those of servers that stopped without
-- removing theirs.
DELETE FROM order_watchers WHERE expires_at <= now();
