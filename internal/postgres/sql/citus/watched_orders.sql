-- What a change notification is about, for the orders of one merchant that
-- this process watches (@id): their state and attempt. On Citus, where no
-- notification reaches the servers, a server reads this every second
-- instead (see Store.ListenOrders); it names the merchant, so it reads one
-- shard.
SELECT id::text, state, coalesce(current_attempt::text, '') AS current_attempt
FROM orders
WHERE merchant_id = @merchant_id AND id = ANY(@id::uuid[]);
