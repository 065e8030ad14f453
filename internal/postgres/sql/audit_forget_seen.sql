-- Deletes what a finished audit run saw of the gateway's charges.
DELETE FROM audit_seen WHERE merchant_id = @merchant_id AND run_id = @run_id::uuid;
