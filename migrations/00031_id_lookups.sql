-- +goose Up
-- A gateway's event names an attempt by its id alone, with no merchant
-- (sql/gateway_event_attempt.sql, sql/dispute_attempt.sql), and an
-- operator names a dispute so (sql/dispute_by_id.sql). The primary keys
-- start with merchant_id, so each of these read the whole key index: a
-- webhook cost a walk of every attempt. Captures, voids and refunds have
-- had their id indexes since migration 00020.
CREATE INDEX charge_attempts_id_idx ON charge_attempts (id);
CREATE INDEX disputes_id_idx ON disputes (id);

-- +goose Down
DROP INDEX disputes_id_idx;
DROP INDEX charge_attempts_id_idx;
