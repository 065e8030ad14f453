-- +goose Up
-- Merchants' route rules (issue #30, order/rules.go): each change is a
-- new version, kept with who made it and why, never overwritten, so that
-- an order's routes (which name the version that placed them) can be
-- read against the rules of their day. The latest version is a
-- merchant's rules; version 0 (no row) is none.
CREATE TABLE route_rules (
    merchant_id text        NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    rules       jsonb       NOT NULL,
    actor       text        NOT NULL,
    note        text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, version)
);

-- On Citus, distributed by merchant, co-located with orders: every
-- statement names its merchant and runs on its shard.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_table('route_rules', 'merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE route_rules;
