-- +goose Up
-- An operator's search (FindOrders, sql/find_orders.sql) finds an order
-- by the gateway's id of one of its refunds or disputes as well as by a
-- charge's; these read one merchant's few rows instead of the table.
CREATE INDEX refunds_gateway_refund_idx ON refunds (merchant_id, gateway_refund_id) WHERE gateway_refund_id <> '';
CREATE INDEX disputes_gateway_dispute_idx ON disputes (merchant_id, gateway_dispute_id);

-- +goose Down
DROP INDEX disputes_gateway_dispute_idx;
DROP INDEX refunds_gateway_refund_idx;
