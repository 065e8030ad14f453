-- +goose Up
-- An attempt's outcome may be 'requires_action': the gateway asks the
-- customer to act (3-D Secure) before it charges, and the order waits in
-- REQUIRES_ACTION (already allowed by 00007) until the customer returns or
-- the reconciler cancels the attempt at its expiry.
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found', 'refused', 'requires_action'));

-- +goose Down
UPDATE charge_attempts SET outcome = 'unknown' WHERE outcome = 'requires_action';
ALTER TABLE charge_attempts DROP CONSTRAINT charge_attempts_outcome_check;
ALTER TABLE charge_attempts ADD CONSTRAINT charge_attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'declined', 'not_sent', 'unknown', 'not_found', 'refused'));
