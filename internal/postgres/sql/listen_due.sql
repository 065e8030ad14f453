-- Receive the id of every order that a gateway's event made due now
-- (record_gateway_event.sql notifies this channel), to wake the reconciler.
LISTEN settle_due;
