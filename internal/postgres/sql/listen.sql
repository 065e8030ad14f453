-- Receive the id of every watched order that changes (see migration 00003,
-- whose trigger notifies this channel).
LISTEN settle_orders;
