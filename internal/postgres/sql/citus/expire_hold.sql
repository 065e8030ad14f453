-- expire_hold.sql on Citus: settle_expire_hold does what it does.
-- Citus runs this call whole on the worker that holds @merchant_id's shard
-- (function call delegation; migration 00016 says why).
SELECT r.expired FROM settle_expire_hold(@merchant_id, @order_id, @attempt_id, @to_state, @event, @actor, @reason) r;
