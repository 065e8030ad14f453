-- +goose Up
-- On Citus, distribute every table by merchant_id, co-located with orders:
-- a merchant's orders, attempts, events, watchers and refunds live on one
-- shard, so a statement that names its merchant (all of the checkout path)
-- runs on one worker as one local transaction. On plain PostgreSQL (no
-- citus extension) this migration does nothing: one migration path serves
-- both engines.
--
-- Citus distributes no table with triggers (they would fire on the
-- workers): order_events_merchant is not needed, since every statement
-- that appends history names its merchant (order_events.merchant_id is NOT
-- NULL); orders_notify, WatchOrder's push, is dropped, and on Citus
-- WatchOrder sees a change at its next recheck (docs/operations.md, "Settle
-- on Citus"). The foreign key from orders to their current attempt is
-- dropped: it closes a cycle that Citus cannot distribute in any order, and
-- Citus runs a statement's modifying CTEs one by one, so create_claimed.sql
-- (order and attempt inserted by one statement) would break it. The key
-- from attempts to their order stays.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- Creating shards in parallel and then adding a foreign key in the same
    -- transaction needs Citus's sequential mode.
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    DROP TRIGGER orders_notify ON orders;
    DROP TRIGGER order_events_merchant ON order_events;
    ALTER TABLE orders DROP CONSTRAINT orders_current_attempt_fkey;
    PERFORM create_distributed_table('orders', 'merchant_id');
    PERFORM create_distributed_table('charge_attempts', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('order_events', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('order_watchers', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('refunds', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('refund_events', 'merchant_id', colocate_with => 'orders');
    -- A gateway's event that matched no attempt is kept under merchant ''.
    PERFORM create_distributed_table('gateway_events', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('review_items', 'merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    PERFORM undistribute_table('review_items');
    PERFORM undistribute_table('gateway_events');
    PERFORM undistribute_table('refund_events');
    PERFORM undistribute_table('order_watchers');
    PERFORM undistribute_table('orders', cascade_via_foreign_keys => true);
    ALTER TABLE orders ADD CONSTRAINT orders_current_attempt_fkey
        FOREIGN KEY (merchant_id, current_attempt) REFERENCES charge_attempts (merchant_id, id);
    CREATE TRIGGER order_events_merchant BEFORE INSERT ON order_events FOR EACH ROW
        WHEN (NEW.merchant_id IS NULL) EXECUTE FUNCTION settle_event_merchant();
    CREATE TRIGGER orders_notify AFTER UPDATE ON orders FOR EACH ROW
        WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.current_attempt IS DISTINCT FROM NEW.current_attempt)
        EXECUTE FUNCTION settle_notify_order();
END
$$;
-- +goose StatementEnd
