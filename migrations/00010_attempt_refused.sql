-- +goose Up
-- An attempt's outcome may be 'refused': the gateway refused Settle's
-- credentials or request before charging anything (a configuration error at
-- Settle, which the order settles like a decline and the operators are
-- alerted to).
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found', 'refused'));

-- +goose Down
UPDATE charge_attempts SET outcome = 'declined' WHERE outcome = 'refused';
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found'));
