-- +goose Up
-- Events out for refunds: refund_events joins order_events as the outbox.
-- A refund's row that a merchant cares about (it succeeded, failed, or
-- waits for a person) has a type, derived by settle_refund_event_type from
-- the row itself, so the statements that move a refund (refund_claim.sql,
-- refund_settle.sql) write its event in the same statement and commit, as
-- the order's transitions do; the delivery columns are order_events' (00008
-- says what each means).
--
-- One numbering for both tables: a refund's event is numbered by event_id,
-- taken from order_events' sequence, so that an event id (evt_<number>)
-- names one event of either kind, a feed cursor (transaction, number)
-- orders both without a tie, and the delivery statements find an event by
-- (merchant_id, number). refund_events.id stays the row's place in the
-- refunds' history. Rows older than this migration have no event_id: they
-- are history, never announced nor listed. On Citus both tables are
-- distributed by merchant (00011), co-located, so a merchant's events of
-- both kinds are on one shard, and every key leads with merchant_id.
-- The one mapping from a refund's history row to the type of the event a
-- merchant is sent, NULL for a row that is not sent: the refund's creation
-- and its claim (PENDING, REFUNDING) answer the merchant's own call, and a
-- row without an event number is older than events. A state reached is
-- announced as refund.<state>: refund.succeeded, refund.failed,
-- refund.needs_review. (Created first: Citus creates a function on its
-- workers only before any change to a distributed table in a transaction.)
-- +goose StatementBegin
CREATE FUNCTION settle_refund_event_type(to_state text, event_id bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event_id IS NULL OR to_state IN ('PENDING', 'REFUNDING') THEN NULL
        ELSE 'refund.' || lower(to_state)
    END
$$;
-- +goose StatementEnd
ALTER TABLE refund_events
    ADD COLUMN event_id bigint,
    ADD COLUMN txid xid8,
    ADD COLUMN deliver_at timestamptz,
    ADD COLUMN delivery_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN failed_at timestamptz,
    ADD COLUMN last_status integer NOT NULL DEFAULT 0;
-- The sequence is named, not looked up (pg_get_serial_sequence): Citus
-- gives its workers a default only when it names its sequence, and takes
-- one only in a command of its own. order_events_id_seq is the sequence of
-- order_events' identity column (00002).
ALTER TABLE refund_events ALTER COLUMN event_id SET DEFAULT nextval('order_events_id_seq'::regclass);
ALTER TABLE refund_events
    ALTER COLUMN txid SET DEFAULT pg_current_xact_id(),
    ALTER COLUMN deliver_at SET DEFAULT now();

ALTER TABLE refund_events ADD COLUMN type text GENERATED ALWAYS AS (settle_refund_event_type(to_state, event_id)) STORED;

CREATE UNIQUE INDEX refund_events_event_key ON refund_events (merchant_id, event_id);
-- The feed and the delivery queue, as order_events has them.
CREATE INDEX refund_events_feed_idx ON refund_events (merchant_id, txid, event_id) WHERE type IS NOT NULL;
CREATE INDEX refund_events_deliver_idx ON refund_events (merchant_id, deliver_at)
    WHERE deliver_at IS NOT NULL AND type IS NOT NULL;

-- +goose Down
-- On Citus, a function is dropped after changes to a distributed table in
-- one transaction only in sequential mode.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd
DROP INDEX refund_events_deliver_idx;
DROP INDEX refund_events_feed_idx;
DROP INDEX refund_events_event_key;
ALTER TABLE refund_events DROP COLUMN type;
DROP FUNCTION settle_refund_event_type(text, bigint);
ALTER TABLE refund_events DROP COLUMN event_id, DROP COLUMN txid, DROP COLUMN deliver_at,
    DROP COLUMN delivery_attempts, DROP COLUMN delivered_at, DROP COLUMN failed_at, DROP COLUMN last_status;
