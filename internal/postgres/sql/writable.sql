-- Whether this session may write: false on a standby (in recovery) and on
-- a server fenced with default_transaction_read_only.
SELECT current_setting('transaction_read_only') = 'off' AS writable;
