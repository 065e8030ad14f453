-- +goose Up
-- Events out: the history in order_events is the outbox. A row that a
-- merchant cares about has a type, derived by settle_event_type from the
-- row itself, so that the statement that records a transition also writes
-- its event, in the same commit, and a new transition (a new state, a new
-- move of the table) becomes an event by a line in that one function.
--
-- merchant_id: every statement that appends history names its merchant,
-- and the key leads with it, for a distribution by merchant. A statement
-- that does not name it still works: the trigger copies it from the order.
ALTER TABLE order_events
    ADD COLUMN merchant_id text,
    -- The transaction that wrote the row: ListEvents returns only rows of
    -- transactions older than every transaction still running, so that a
    -- cursor never passes an event that commits later with a smaller id.
    ADD COLUMN txid xid8,
    -- When the delivery worker may next POST the event (database time);
    -- NULL once delivered or failed, and for rows older than this
    -- migration, which are history and were never announced.
    ADD COLUMN deliver_at timestamptz,
    ADD COLUMN delivery_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN delivered_at timestamptz,
    -- Set when the retries ran out (or the endpoint answered that it will
    -- never take the event); OpsService/ResendEvent starts them again.
    ADD COLUMN failed_at timestamptz,
    -- The HTTP status of the last delivery attempt; 0 for no answer.
    ADD COLUMN last_status integer NOT NULL DEFAULT 0;
UPDATE order_events e SET merchant_id = o.merchant_id, txid = '0'::xid8 FROM orders o WHERE o.id = e.order_id;
ALTER TABLE order_events
    ALTER COLUMN merchant_id SET NOT NULL,
    ALTER COLUMN txid SET NOT NULL,
    ALTER COLUMN txid SET DEFAULT pg_current_xact_id(),
    ALTER COLUMN deliver_at SET DEFAULT now();
ALTER TABLE order_events DROP CONSTRAINT order_events_pkey;
ALTER TABLE order_events ADD PRIMARY KEY (merchant_id, id);

-- +goose StatementBegin
CREATE FUNCTION settle_event_merchant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.merchant_id := (SELECT merchant_id FROM orders WHERE id = NEW.order_id);
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER order_events_merchant BEFORE INSERT ON order_events FOR EACH ROW
    WHEN (NEW.merchant_id IS NULL) EXECUTE FUNCTION settle_event_merchant();

-- The one mapping from a history row to the type of the event a merchant
-- is sent, NULL for a row that is not sent (the order's creation, a claim).
-- A state reached is announced as order.<state>, so a new state is an
-- event with no change here; moves back to PENDING say that the payment
-- did not go through.
-- +goose StatementBegin
CREATE FUNCTION settle_event_type(to_state text, event text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event IN ('fail', 'resolve_pending') THEN 'order.payment_failed'
        WHEN to_state IN ('PENDING', 'CHARGING') THEN NULL
        ELSE 'order.' || lower(to_state)
    END
$$;
-- +goose StatementEnd
ALTER TABLE order_events ADD COLUMN type text GENERATED ALWAYS AS (settle_event_type(to_state, event)) STORED;

-- ListEvents pages through a merchant's events in (txid, id) order.
CREATE INDEX order_events_feed_idx ON order_events (merchant_id, txid, id) WHERE type IS NOT NULL;
-- The delivery worker's queue: each merchant's undelivered events, due first.
CREATE INDEX order_events_deliver_idx ON order_events (merchant_id, deliver_at)
    WHERE deliver_at IS NOT NULL AND type IS NOT NULL;

-- +goose Down
DROP INDEX order_events_deliver_idx;
DROP INDEX order_events_feed_idx;
ALTER TABLE order_events DROP COLUMN type;
DROP FUNCTION settle_event_type(text, text);
DROP TRIGGER order_events_merchant ON order_events;
DROP FUNCTION settle_event_merchant();
ALTER TABLE order_events DROP CONSTRAINT order_events_pkey;
ALTER TABLE order_events ADD PRIMARY KEY (id);
ALTER TABLE order_events DROP COLUMN merchant_id, DROP COLUMN txid, DROP COLUMN deliver_at,
    DROP COLUMN delivery_attempts, DROP COLUMN delivered_at, DROP COLUMN failed_at, DROP COLUMN last_status;
