-- +goose Up
-- Events out for the audit's findings (issue #31): each finding is
-- announced to its merchant as an audit.finding event, signed and retried
-- by the delivery worker, and listed by ListEvents. The finding's row is
-- the event, as a refund's history row is (00014): the statements that
-- record findings (audit_match_charges.sql, audit_match_refunds.sql,
-- audit_missing.sql) insert the row, and so its event, in the transaction
-- that checkpoints the run; a finding seen again by an overlapping window
-- only moves last_run_id (the upsert on audit_findings_key), so its event
-- is written once, when the finding is first found. A finding need not
-- belong to an order (a foreign charge, a charge Settle never made), which
-- is why it is not a row of order_events, whose rows are an order's.
--
-- event_id is taken from order_events' sequence (by the trigger below),
-- so that one number names one event of any kind (evt_<number>), a feed
-- cursor (transaction, number) orders all kinds without a tie, and the delivery statements and
-- delivery_tries find an event by (merchant_id, number). The delivery
-- columns are order_events' (00008 says what each means). Findings older
-- than this migration have no event_id: they were never announced, and
-- are not now. audit_findings is distributed by merchant, co-located with
-- orders (00027), so a merchant's events of every kind are on one shard.
--
-- The event's number and transaction are stamped by a trigger, where the
-- row is written, rather than by column defaults: on Citus the statements
-- that record findings are planned on the coordinator, and a volatile
-- default (nextval, pg_current_xact_id) in an INSERT ... SELECT makes
-- Citus plan the SELECT apart, which its joins do not allow; and the
-- coordinator's transaction id is not the worker's, which the feed
-- compares with the worker's oldest running transaction (a merchant's
-- events are numbered by its worker, 00016): the event would be held
-- back, or listed out of order. In the trigger, both come from the shard
-- on the merchant's worker; on PostgreSQL they are what defaults would
-- give. The sequence is named, not looked up: order_events_id_seq is
-- the sequence of order_events' identity column (00002), which Citus
-- keeps on every worker. (Created first: Citus creates a function on its
-- workers only before any change to a distributed table in a transaction.)
-- +goose StatementBegin
CREATE FUNCTION settle_finding_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.event_id := nextval('order_events_id_seq'::regclass);
    NEW.txid := pg_current_xact_id();
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE audit_findings
    ADD COLUMN event_id bigint,
    ADD COLUMN txid xid8,
    ADD COLUMN deliver_at timestamptz,
    ADD COLUMN delivery_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN failed_at timestamptz,
    ADD COLUMN last_status integer NOT NULL DEFAULT 0;
ALTER TABLE audit_findings ALTER COLUMN deliver_at SET DEFAULT now();
-- Every finding with an event number is announced, whatever its class.
ALTER TABLE audit_findings ADD COLUMN type text
    GENERATED ALWAYS AS (CASE WHEN event_id IS NOT NULL THEN 'audit.finding' END) STORED;

-- Citus refuses a trigger on a distributed table unless told that it is
-- safe: this one reads and writes nothing but its own row.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.enable_unsafe_triggers TO on;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_findings_event BEFORE INSERT ON audit_findings FOR EACH ROW
    EXECUTE FUNCTION settle_finding_event();

CREATE UNIQUE INDEX audit_findings_event_key ON audit_findings (merchant_id, event_id);
-- The feed and the delivery queue, as order_events and refund_events have them.
CREATE INDEX audit_findings_feed_idx ON audit_findings (merchant_id, txid, event_id) WHERE type IS NOT NULL;
CREATE INDEX audit_findings_deliver_idx ON audit_findings (merchant_id, deliver_at)
    WHERE deliver_at IS NOT NULL AND type IS NOT NULL;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.enable_unsafe_triggers TO on;
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd
DROP INDEX audit_findings_deliver_idx;
DROP INDEX audit_findings_feed_idx;
DROP INDEX audit_findings_event_key;
DROP TRIGGER audit_findings_event ON audit_findings;
ALTER TABLE audit_findings DROP COLUMN type;
ALTER TABLE audit_findings DROP COLUMN event_id, DROP COLUMN txid, DROP COLUMN deliver_at,
    DROP COLUMN delivery_attempts, DROP COLUMN delivered_at, DROP COLUMN failed_at, DROP COLUMN last_status;
DROP FUNCTION settle_finding_event();
