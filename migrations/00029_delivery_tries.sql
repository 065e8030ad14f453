-- +goose Up
-- The failed tries of each event's delivery to a merchant's webhook, for
-- the event's story (ListOrderEvents, the console's timeline): when, the
-- try's number, the endpoint's status (0 for no answer) and the kind of
-- failure in Settle's words (never the endpoint's body or URL). A
-- delivered try is the event's delivered_at, so only failures are kept
-- and delivering costs nothing more.
CREATE TABLE delivery_tries (
    merchant_id text        NOT NULL,
    event_num   bigint      NOT NULL,
    tried_at    timestamptz NOT NULL DEFAULT now(),
    attempt     integer     NOT NULL,
    status      integer     NOT NULL,
    error       text        NOT NULL DEFAULT '',
    PRIMARY KEY (merchant_id, event_num, tried_at)
);

-- On Citus, distributed by merchant, co-located with orders.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_table('delivery_tries', 'merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE delivery_tries;
