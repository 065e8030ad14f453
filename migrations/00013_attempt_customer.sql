-- +goose Up
-- An attempt keeps the gateway's customer its payment method is saved to (a
-- Stripe Customer id, cus_...; '' for none). Stripe's lookup may replay the
-- attempt's unconfirmed create under its idempotency key, and Stripe answers
-- a replay with other parameters with idempotency_error: the replay must
-- send the customer the first create sent. On Citus the column is added to
-- the distributed table's shards by the same statement.
ALTER TABLE charge_attempts ADD COLUMN customer text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE charge_attempts DROP COLUMN customer;
