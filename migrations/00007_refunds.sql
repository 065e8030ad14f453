-- +goose Up
-- Refunds: money going back, with the charge's design (claim, call with
-- the refund's id as reference and idempotency key, settle, reconcile).
--
-- The order carries what has gone back (refunded_minor, succeeded refunds)
-- and what may be going back (refunding_minor, refunds in flight or in
-- review). The refund claim locks the order row and admits a refund only
-- if it fits in amount - refunded - refunding, read from that locked row:
-- the statement's snapshot of the refunds table could miss a refund that a
-- concurrent claim committed while this one waited for the lock. That
-- guard is the one place that keeps refunds within the payment (no CHECK
-- repeats it), so that the chaos harness's mutant of the guard shows what
-- the guard alone prevents.
ALTER TABLE orders
    ADD COLUMN refunded_minor  bigint NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0),
    ADD COLUMN refunding_minor bigint NOT NULL DEFAULT 0 CHECK (refunding_minor >= 0);

-- PAID orders move to PARTIALLY_REFUNDED and REFUNDED. REQUIRES_ACTION is
-- listed too, so that this migration keeps the state of 3-D Secure's.
ALTER TABLE orders DROP CONSTRAINT orders_state_check;
ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN ('PENDING', 'CHARGING', 'REQUIRES_ACTION',
    'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_from_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_from_state_check CHECK (from_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_to_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_to_state_check CHECK (to_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
-- An order's move made by a refund names the refund.
ALTER TABLE order_events ADD COLUMN refund_id uuid;

-- A refund's id is the gateway reference and idempotency key; request_id
-- is the client's key for the call that made it. requested_minor is the
-- amount the client asked for (0: the rest), which a replay must repeat.
CREATE TABLE refunds (
    merchant_id       text NOT NULL,
    id                uuid NOT NULL,
    order_id          uuid NOT NULL REFERENCES orders (id),
    request_id        text NOT NULL,
    requested_minor   bigint NOT NULL,
    amount_minor      bigint NOT NULL CHECK (amount_minor > 0),
    currency          text NOT NULL,
    reason            text NOT NULL DEFAULT '',
    actor             text NOT NULL,
    state             text NOT NULL
        CHECK (state IN ('PENDING', 'REFUNDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    -- NULL while the first call is in flight.
    outcome           text CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found')),
    decline_code      text NOT NULL DEFAULT '',
    gateway_refund_id text NOT NULL DEFAULT '',
    -- When the reconciler next looks at a REFUNDING refund (database time).
    reconcile_at      timestamptz,
    reconcile_count   integer NOT NULL DEFAULT 0,
    last_error        text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    settled_at        timestamptz,
    PRIMARY KEY (merchant_id, id),
    CONSTRAINT refunds_request_key UNIQUE (merchant_id, request_id),
    CONSTRAINT refunds_refunding_has_lease CHECK (state <> 'REFUNDING' OR reconcile_at IS NOT NULL)
);
CREATE INDEX refunds_order_idx ON refunds (merchant_id, order_id, created_at);
-- The reconciler's queue: due REFUNDING refunds, oldest first.
CREATE INDEX refunds_reconcile_idx ON refunds (reconcile_at) WHERE state = 'REFUNDING';
CREATE INDEX refunds_state_updated_idx ON refunds (state, updated_at);

-- Every transition of a refund, appended in the same transaction as the
-- change: shaped like order_events (and read with it by the outbox).
CREATE TABLE refund_events (
    merchant_id text NOT NULL,
    id          bigint GENERATED ALWAYS AS IDENTITY,
    order_id    uuid NOT NULL,
    refund_id   uuid NOT NULL,
    from_state  text CHECK (from_state IN ('PENDING', 'REFUNDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    to_state    text NOT NULL CHECK (to_state IN ('PENDING', 'REFUNDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    event       text NOT NULL,
    actor       text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX refund_events_order_idx ON refund_events (merchant_id, order_id, id);

-- +goose Down
DROP TABLE refund_events;
DROP TABLE refunds;
ALTER TABLE order_events DROP COLUMN refund_id;
UPDATE orders SET state = 'PAID' WHERE state IN ('PARTIALLY_REFUNDED', 'REFUNDED');
UPDATE order_events SET from_state = 'PAID' WHERE from_state IN ('PARTIALLY_REFUNDED', 'REFUNDED');
UPDATE order_events SET to_state = 'PAID' WHERE to_state IN ('PARTIALLY_REFUNDED', 'REFUNDED');
ALTER TABLE orders DROP CONSTRAINT orders_state_check;
ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN ('PENDING', 'CHARGING', 'REQUIRES_ACTION',
    'PAID', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_from_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_from_state_check CHECK (from_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_to_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_to_state_check CHECK (to_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE orders DROP COLUMN refunded_minor, DROP COLUMN refunding_minor;
