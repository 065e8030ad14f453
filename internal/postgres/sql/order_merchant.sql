-- The merchant of an order, for the calls that name an order but no
-- merchant (operators' calls). It is the one read that cannot name its
-- merchant: on Citus it asks every shard (a read, no lock); the statement
-- that then locks or changes the order names the merchant found, so it
-- runs on one shard.
SELECT merchant_id FROM orders WHERE id = @id;
