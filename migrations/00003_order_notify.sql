-- +goose Up
-- WatchOrder streams an order's changes. A server watching an order adds a
-- row here; a change of that order's state or attempt then notifies the
-- servers, which look the order up again. Orders nobody watches send no
-- notification: a transaction that notifies takes a database-wide lock
-- until its commit is durable, which would end group commit for every order.
CREATE TABLE order_watchers (
    order_id   uuid NOT NULL,
    watcher_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, watcher_id)
);

-- +goose StatementBegin
CREATE FUNCTION settle_notify_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM order_watchers WHERE order_id = NEW.id) THEN
        PERFORM pg_notify('settle_orders', NEW.id::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER orders_notify AFTER UPDATE ON orders FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.current_attempt IS DISTINCT FROM NEW.current_attempt)
    EXECUTE FUNCTION settle_notify_order();

-- +goose Down
DROP TRIGGER orders_notify ON orders;
DROP FUNCTION settle_notify_order();
DROP TABLE order_watchers;
