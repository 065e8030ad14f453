-- +goose Up
-- Gateways push events (Stripe's webhooks, refpsp's equivalents) about the
-- attempts Settle made. An event is never applied on its word: it makes its
-- attempt's order due for the reconciler now, whose guarded lookup decides.
--
-- gateway_events records each event once, in the same transaction as what it
-- triggers, so that a repeat (gateways deliver at least once) does nothing.
-- Its key leads with merchant_id, for a distribution by merchant: the
-- merchant is resolved from the attempt before the event is recorded (an
-- attempt row exists before its charge request is sent, so every event about
-- one of our attempts finds it, even one that arrives before the charge call
-- has returned). An event about an object Settle does not know is recorded
-- under merchant_id '' (one shard), and stays unknown: no later attempt can
-- take the reference of an event that came before it, so (merchant_id,
-- gateway, event_id) identifies an event as (gateway, event_id) would.
CREATE TABLE gateway_events (
    merchant_id text NOT NULL,
    gateway     text NOT NULL,
    event_id    text NOT NULL,
    event_type  text NOT NULL,
    -- The gateway's id of the object the event is about (a charge, a
    -- PaymentIntent), and the attempt and order it was matched to, if any.
    object_id   text NOT NULL,
    attempt_id  uuid,
    order_id    uuid,
    -- What the event came to: woken (the order was made due), review (a
    -- possible double charge was raised), ignored, unknown_object.
    result      text NOT NULL CHECK (result IN ('woken', 'review', 'ignored', 'unknown_object')),
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, gateway, event_id)
);

-- Review items are what a person must look at beside NEEDS_REVIEW orders:
-- a success reported for an attempt that is not its order's current one (or
-- for a PAID order's other attempt) is a possible second charge. One item
-- per attempt and kind, however many events report it; keyed by merchant.
CREATE TABLE review_items (
    merchant_id text NOT NULL,
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    kind        text NOT NULL CHECK (kind IN ('possible_double_charge')),
    order_id    uuid NOT NULL,
    attempt_id  uuid NOT NULL,
    gateway     text NOT NULL,
    event_id    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz,
    PRIMARY KEY (merchant_id, id),
    CONSTRAINT review_items_attempt_key UNIQUE (merchant_id, attempt_id, kind)
);
CREATE INDEX review_items_open_idx ON review_items (created_at) WHERE resolved_at IS NULL;

-- A Stripe event names its PaymentIntent, which the attempt records as its
-- gateway_charge_id once the call returns; events carrying our attempt id in
-- the PaymentIntent's metadata need no such lookup. Without a merchant in
-- the event, this lookup reaches every shard of a distributed table: it is
-- the fallback, not the rule.
CREATE INDEX charge_attempts_gateway_charge_idx ON charge_attempts (gateway_charge_id) WHERE gateway_charge_id <> '';

-- NEEDS_REVIEW orders keep being looked up at a slow cadence, so that a
-- charge found later moves the order to PAID; reconcile_at says when.
CREATE INDEX orders_review_idx ON orders (reconcile_at) WHERE state = 'NEEDS_REVIEW';
UPDATE orders SET reconcile_at = now() WHERE state = 'NEEDS_REVIEW';

-- +goose Down
DROP INDEX orders_review_idx;
DROP INDEX charge_attempts_gateway_charge_idx;
DROP TABLE review_items;
DROP TABLE gateway_events;
