-- +goose Up
-- Authorize now, capture later (issue #28). An order created with capture
-- 'manual' is authorized by its charge: the gateway holds the amount
-- (authorized_minor) until captures take some or all of it, a void
-- releases it, or the gateway lets it lapse after capture_before. Each
-- capture and each void is its own record, with the charge's and the
-- refunds' design: claim, call with its id as reference and idempotency
-- key, settle, reconcile.
--
-- The order carries the hold's totals, as it carries the refunds': what
-- was captured (captured_minor, succeeded captures), what may be being
-- captured (capturing_minor, captures in flight or in review), whether a
-- void is in flight or in review (voiding), and whether a final capture
-- has released the rest (hold_closed). The capture and void claims lock
-- the order row and read their rules from it (capture_claim.sql,
-- void_claim.sql say why a count of the captures table would not do).
--
-- The event types of the new rows of an order's history: a capture's row
-- is capture.succeeded or capture.failed (whatever the order's state), an
-- authorization that lapsed is order.authorization_expired; AUTHORIZED and
-- VOIDED are announced as any state is (order.authorized, order.voided).
-- No row older than this migration has these events or states, so the
-- stored type of every existing row stays right. (Replaced first: Citus
-- creates a function on its workers only before any change to a
-- distributed table in a transaction, 00014.)
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_event_type(to_state text, event text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event IN ('fail', 'resolve_pending') THEN 'order.payment_failed'
        WHEN event IN ('capture', 'captured') THEN 'capture.succeeded'
        WHEN event = 'capture_failed' THEN 'capture.failed'
        WHEN to_state = 'EXPIRED' THEN 'order.authorization_expired'
        WHEN to_state IN ('PENDING', 'CHARGING') THEN NULL
        ELSE 'order.' || lower(to_state)
    END
$$;
-- +goose StatementEnd

-- The checks are added apart from the columns: Citus adds no column with
-- a constraint to a distributed table.
ALTER TABLE orders
    ADD COLUMN capture_mode     text NOT NULL DEFAULT 'automatic',
    ADD COLUMN authorized_minor bigint NOT NULL DEFAULT 0,
    ADD COLUMN captured_minor   bigint NOT NULL DEFAULT 0,
    ADD COLUMN capturing_minor  bigint NOT NULL DEFAULT 0,
    ADD COLUMN voiding          boolean NOT NULL DEFAULT false,
    ADD COLUMN hold_closed      boolean NOT NULL DEFAULT false,
    ADD COLUMN capture_before   timestamptz;
ALTER TABLE orders ADD CONSTRAINT orders_capture_mode_check CHECK (capture_mode IN ('automatic', 'manual'));
ALTER TABLE orders ADD CONSTRAINT orders_hold_check CHECK (authorized_minor >= 0 AND captured_minor >= 0 AND capturing_minor >= 0);

ALTER TABLE orders DROP CONSTRAINT orders_state_check;
ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN ('PENDING', 'CHARGING', 'REQUIRES_ACTION',
    'AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW', 'VOIDED', 'EXPIRED'));
ALTER TABLE order_events DROP CONSTRAINT order_events_from_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_from_state_check CHECK (from_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW', 'VOIDED',
    'EXPIRED'));
ALTER TABLE order_events DROP CONSTRAINT order_events_to_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_to_state_check CHECK (to_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW', 'VOIDED',
    'EXPIRED'));
-- An order's history row written by a capture or a void names it. A
-- capture's settle writes one row into the order's history whether or not
-- the order moves (the first capture moves AUTHORIZED to PAID; later ones
-- and failures leave the state as it is): that row is the event a
-- merchant is sent, capture.succeeded or capture.failed.
ALTER TABLE order_events ADD COLUMN capture_id uuid;
ALTER TABLE order_events ADD COLUMN void_id uuid;

-- The reconciler's queue of authorizations to look up once their
-- capture_before has passed (never moved by the clock alone).
CREATE INDEX orders_capture_before_idx ON orders (capture_before) WHERE state = 'AUTHORIZED';

-- A capture's id is the gateway reference and idempotency key; request_id
-- is the client's key for the call that made it. requested_minor and
-- final are what the client asked (0: all that is left), which a replay
-- must repeat.
CREATE TABLE captures (
    merchant_id        text NOT NULL,
    id                 uuid NOT NULL,
    order_id           uuid NOT NULL,
    request_id         text NOT NULL,
    requested_minor    bigint NOT NULL,
    amount_minor       bigint NOT NULL CHECK (amount_minor > 0),
    currency           text NOT NULL,
    final              boolean NOT NULL,
    reason             text NOT NULL DEFAULT '',
    actor              text NOT NULL,
    state              text NOT NULL
        CHECK (state IN ('PENDING', 'CAPTURING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    outcome            text CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found')),
    decline_code       text NOT NULL DEFAULT '',
    gateway_capture_id text NOT NULL DEFAULT '',
    reconcile_at       timestamptz,
    reconcile_count    integer NOT NULL DEFAULT 0,
    last_error         text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    settled_at         timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT captures_request_key UNIQUE (merchant_id, request_id),
    CONSTRAINT captures_capturing_has_lease CHECK (state <> 'CAPTURING' OR reconcile_at IS NOT NULL)
);
CREATE INDEX captures_order_idx ON captures (merchant_id, order_id, created_at);
CREATE INDEX captures_reconcile_idx ON captures (reconcile_at) WHERE state = 'CAPTURING';

CREATE TABLE voids (
    merchant_id     text NOT NULL,
    id              uuid NOT NULL,
    order_id        uuid NOT NULL,
    request_id      text NOT NULL,
    reason          text NOT NULL DEFAULT '',
    actor           text NOT NULL,
    state           text NOT NULL
        CHECK (state IN ('PENDING', 'VOIDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    outcome         text CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found')),
    decline_code    text NOT NULL DEFAULT '',
    reconcile_at    timestamptz,
    reconcile_count integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    settled_at      timestamptz,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CONSTRAINT voids_request_key UNIQUE (merchant_id, request_id),
    CONSTRAINT voids_voiding_has_lease CHECK (state <> 'VOIDING' OR reconcile_at IS NOT NULL)
);
CREATE INDEX voids_order_idx ON voids (merchant_id, order_id, created_at);
CREATE INDEX voids_reconcile_idx ON voids (reconcile_at) WHERE state = 'VOIDING';

-- Every transition of a capture or a void, appended in the same statement
-- as the change: one history for both kinds (kind says which), shaped
-- like refund_events.
CREATE TABLE hold_events (
    merchant_id  text NOT NULL,
    id           bigint GENERATED ALWAYS AS IDENTITY,
    order_id     uuid NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('capture', 'void')),
    operation_id uuid NOT NULL,
    from_state   text CHECK (from_state IN ('PENDING', 'CAPTURING', 'VOIDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    to_state     text NOT NULL
        CHECK (to_state IN ('PENDING', 'CAPTURING', 'VOIDING', 'SUCCEEDED', 'FAILED', 'NEEDS_REVIEW')),
    event        text NOT NULL,
    actor        text NOT NULL,
    reason       text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX hold_events_order_idx ON hold_events (merchant_id, order_id, id);

-- On Citus, the new tables are distributed by merchant, co-located with
-- orders (as 00011 does the others), so that a capture's or a void's
-- statements, which all name their merchant, run on one shard.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    PERFORM create_distributed_table('captures', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('voids', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('hold_events', 'merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_event_type(to_state text, event text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event IN ('fail', 'resolve_pending') THEN 'order.payment_failed'
        WHEN to_state IN ('PENDING', 'CHARGING') THEN NULL
        ELSE 'order.' || lower(to_state)
    END
$$;
-- +goose StatementEnd
DROP TABLE hold_events;
DROP TABLE voids;
DROP TABLE captures;
DROP INDEX orders_capture_before_idx;
ALTER TABLE order_events DROP COLUMN capture_id, DROP COLUMN void_id;
DELETE FROM order_events WHERE from_state IN ('AUTHORIZED', 'VOIDED', 'EXPIRED')
    OR to_state IN ('AUTHORIZED', 'VOIDED', 'EXPIRED');
UPDATE orders SET state = 'NEEDS_REVIEW' WHERE state IN ('AUTHORIZED', 'VOIDED', 'EXPIRED');
ALTER TABLE orders DROP CONSTRAINT orders_state_check;
ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN ('PENDING', 'CHARGING', 'REQUIRES_ACTION',
    'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_from_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_from_state_check CHECK (from_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE order_events DROP CONSTRAINT order_events_to_state_check;
ALTER TABLE order_events ADD CONSTRAINT order_events_to_state_check CHECK (to_state IN ('PENDING', 'CHARGING',
    'REQUIRES_ACTION', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELED', 'NEEDS_REVIEW'));
ALTER TABLE orders DROP COLUMN capture_mode, DROP COLUMN authorized_minor, DROP COLUMN captured_minor,
    DROP COLUMN capturing_minor, DROP COLUMN voiding, DROP COLUMN hold_closed, DROP COLUMN capture_before;
