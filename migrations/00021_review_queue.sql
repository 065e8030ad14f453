-- +goose Up
-- The review queue (issue #33): OpsService lists what a person must look
-- at (orders, refunds, captures and voids in NEEDS_REVIEW, and the open
-- review items) oldest first, a merchant's at a time or everyone's, and
-- resolves review items with the operator's decision.
--
-- A resolved review item keeps who decided (actor, the ops key's name, as
-- an order's history records it), what (decision: charged, the attempt
-- did charge the customer; not_charged, it did not), why (note, checked
-- like every free text: no card number), and what the gateway answered
-- when it was asked first (gateway_outcome: an order.Outcome, or '' when
-- it could not say). Rows resolved by hand before this migration keep a
-- NULL decision. Citus adds no column with a constraint to a distributed
-- table, so the check is added apart.
ALTER TABLE review_items
    ADD COLUMN decision        text,
    ADD COLUMN actor           text NOT NULL DEFAULT '',
    ADD COLUMN note            text NOT NULL DEFAULT '',
    ADD COLUMN gateway_outcome text NOT NULL DEFAULT '';
ALTER TABLE review_items ADD CONSTRAINT review_items_decision_check
    CHECK (decision IN ('charged', 'not_charged') AND resolved_at IS NOT NULL OR decision IS NULL);

-- The queue's reads (list_review_items.sql), one per kind, each keyed by
-- merchant and in the queue's order: when the item entered review, then
-- its id. Partial, so that each holds only what is in review.
CREATE INDEX review_items_queue_idx ON review_items (merchant_id, created_at, id) WHERE resolved_at IS NULL;
CREATE INDEX orders_review_queue_idx ON orders (merchant_id, updated_at, id) WHERE state = 'NEEDS_REVIEW';
CREATE INDEX refunds_review_queue_idx ON refunds (merchant_id, updated_at, id) WHERE state = 'NEEDS_REVIEW';
CREATE INDEX captures_review_queue_idx ON captures (merchant_id, updated_at, id) WHERE state = 'NEEDS_REVIEW';
CREATE INDEX voids_review_queue_idx ON voids (merchant_id, updated_at, id) WHERE state = 'NEEDS_REVIEW';

-- +goose Down
DROP INDEX voids_review_queue_idx;
DROP INDEX captures_review_queue_idx;
DROP INDEX refunds_review_queue_idx;
DROP INDEX orders_review_queue_idx;
DROP INDEX review_items_queue_idx;
ALTER TABLE review_items DROP CONSTRAINT review_items_decision_check;
ALTER TABLE review_items DROP COLUMN gateway_outcome, DROP COLUMN note, DROP COLUMN actor, DROP COLUMN decision;
