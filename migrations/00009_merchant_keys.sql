-- +goose Up
-- Every key names its merchant. An order, its attempts, events and refunds
-- belong to one merchant, and every checkout call knows its merchant, so
-- the merchant is the first column of every primary key, unique constraint
-- and foreign key. On plain PostgreSQL this changes nothing a statement
-- sees (an id is still unique: it is a random UUID); on Citus, where the
-- tables are distributed by merchant_id (migration 00011), it is what a
-- distributed table requires of its keys, and what lets a statement that
-- names its merchant run on one shard. TestKeysNameTheMerchant holds every
-- table, including later ones, to it.
ALTER TABLE orders DROP CONSTRAINT orders_current_attempt_fkey;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_order_id_fkey;
ALTER TABLE order_events DROP CONSTRAINT order_events_order_id_fkey;
ALTER TABLE refunds DROP CONSTRAINT refunds_order_id_fkey;

ALTER TABLE orders DROP CONSTRAINT orders_pkey;
ALTER TABLE orders ADD PRIMARY KEY (merchant_id, id);
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_pkey;
ALTER TABLE charge_attempts ADD PRIMARY KEY (merchant_id, id);

ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_order_fkey
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id);
ALTER TABLE order_events ADD CONSTRAINT order_events_order_fkey
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id);
ALTER TABLE refunds ADD CONSTRAINT refunds_order_fkey
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id);
-- MATCH SIMPLE: an order with no attempt yet (current_attempt NULL) is not checked.
ALTER TABLE orders ADD CONSTRAINT orders_current_attempt_fkey
    FOREIGN KEY (merchant_id, current_attempt) REFERENCES charge_attempts (merchant_id, id);

-- An order's attempts are read by merchant and order.
DROP INDEX charge_attempts_order_idx;
CREATE INDEX charge_attempts_order_idx ON charge_attempts (merchant_id, order_id);
-- An order's history is read by merchant and order.
DROP INDEX order_events_order_idx;
CREATE INDEX order_events_order_idx ON order_events (merchant_id, order_id, id);

-- +goose Down
DROP INDEX order_events_order_idx;
CREATE INDEX order_events_order_idx ON order_events (order_id, id);
DROP INDEX charge_attempts_order_idx;
CREATE INDEX charge_attempts_order_idx ON charge_attempts (order_id);

ALTER TABLE orders DROP CONSTRAINT orders_current_attempt_fkey;
ALTER TABLE refunds DROP CONSTRAINT refunds_order_fkey;
ALTER TABLE order_events DROP CONSTRAINT order_events_order_fkey;
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_order_fkey;

ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_pkey;
ALTER TABLE charge_attempts ADD PRIMARY KEY (id);
ALTER TABLE orders DROP CONSTRAINT orders_pkey;
ALTER TABLE orders ADD PRIMARY KEY (id);

ALTER TABLE orders ADD CONSTRAINT orders_current_attempt_fkey
    FOREIGN KEY (current_attempt) REFERENCES charge_attempts (id);
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_order_id_fkey
    FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE order_events ADD CONSTRAINT order_events_order_id_fkey
    FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE refunds ADD CONSTRAINT refunds_order_id_fkey
    FOREIGN KEY (order_id) REFERENCES orders (id);
