-- +goose Up
-- A row of order_watchers stands for one open WatchOrder stream. Two
-- defects of 00003 are fixed here. A server that crashed left its rows
-- behind, and with them the notifications (and their database-wide commit
-- lock) for orders nobody watched any more: now a row expires unless its
-- server refreshes it, the trigger ignores expired rows, and servers delete
-- them. And a row was inserted for any id, before the caller's ownership of
-- the order was checked: now it names the order's merchant, copied from the
-- order in the statement that inserts it, which finds no order of another
-- merchant. merchant_id leads the key, for a distribution by merchant.
ALTER TABLE order_watchers ADD COLUMN merchant_id text;
UPDATE order_watchers w SET merchant_id = o.merchant_id FROM orders o WHERE o.id = w.order_id;
DELETE FROM order_watchers WHERE merchant_id IS NULL;
ALTER TABLE order_watchers ALTER COLUMN merchant_id SET NOT NULL;
ALTER TABLE order_watchers ADD COLUMN expires_at timestamptz NOT NULL DEFAULT now() + interval '2 minutes';
ALTER TABLE order_watchers DROP CONSTRAINT order_watchers_pkey;
ALTER TABLE order_watchers ADD PRIMARY KEY (merchant_id, order_id, watcher_id);
CREATE INDEX order_watchers_expires_idx ON order_watchers (expires_at);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_notify_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM order_watchers
               WHERE merchant_id = NEW.merchant_id AND order_id = NEW.id AND expires_at > now()) THEN
        PERFORM pg_notify('settle_orders', NEW.id::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_notify_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM order_watchers WHERE order_id = NEW.id) THEN
        PERFORM pg_notify('settle_orders', NEW.id::text);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP INDEX order_watchers_expires_idx;
ALTER TABLE order_watchers DROP CONSTRAINT order_watchers_pkey;
ALTER TABLE order_watchers ADD PRIMARY KEY (order_id, watcher_id);
ALTER TABLE order_watchers DROP COLUMN expires_at;
ALTER TABLE order_watchers DROP COLUMN merchant_id;
