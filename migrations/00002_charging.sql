-- +goose Up
-- An attempt is one try to charge an order; its id is the gateway reference
-- and idempotency key. request_id is the client's key for the call that made it.
CREATE TABLE charge_attempts (
    id                uuid PRIMARY KEY,
    order_id          uuid NOT NULL REFERENCES orders (id),
    merchant_id       text NOT NULL,
    request_id        text NOT NULL,
    payment_method    text NOT NULL,
    amount_minor      bigint NOT NULL,
    currency          text NOT NULL,
    -- NULL while the first call is in flight.
    outcome           text CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found')),
    decline_code      text NOT NULL DEFAULT '',
    gateway_charge_id text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    settled_at        timestamptz,
    CONSTRAINT charge_attempts_request_key UNIQUE (merchant_id, request_id)
);
CREATE INDEX charge_attempts_order_idx ON charge_attempts (order_id);

ALTER TABLE orders
    ADD COLUMN current_attempt uuid REFERENCES charge_attempts (id),
    -- When the reconciler next looks at a CHARGING order (database time).
    ADD COLUMN reconcile_at    timestamptz,
    ADD COLUMN reconcile_count integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error      text NOT NULL DEFAULT '',
    ADD CONSTRAINT orders_charging_has_attempt
        CHECK (state <> 'CHARGING' OR (current_attempt IS NOT NULL AND reconcile_at IS NOT NULL));

-- The reconciler's queue: due CHARGING orders, oldest first.
CREATE INDEX orders_reconcile_idx ON orders (reconcile_at) WHERE state = 'CHARGING';
CREATE INDEX orders_state_updated_idx ON orders (state, updated_at);

-- Every transition, appended in the same transaction as the state change.
CREATE TABLE order_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id   uuid NOT NULL REFERENCES orders (id),
    from_state text CHECK (from_state IN ('PENDING', 'CHARGING', 'PAID', 'CANCELED', 'NEEDS_REVIEW')),
    to_state   text NOT NULL CHECK (to_state IN ('PENDING', 'CHARGING', 'PAID', 'CANCELED', 'NEEDS_REVIEW')),
    event      text NOT NULL,
    actor      text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    attempt_id uuid,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX order_events_order_idx ON order_events (order_id, id);

-- +goose Down
DROP TABLE order_events;
ALTER TABLE orders DROP COLUMN current_attempt, DROP COLUMN reconcile_at,
    DROP COLUMN reconcile_count, DROP COLUMN last_error;
DROP TABLE charge_attempts;
