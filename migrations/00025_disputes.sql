-- +goose Up
-- Disputes (issue #32): a chargeback takes a paid order's money back
-- through the card network, often weeks later. Settle records what the
-- gateway says of each dispute beside the order (which stays PAID), and
-- refunds wait while one is open.
--
-- The order carries what its disputes come to, kept by the statements that
-- change a dispute under the order's row lock (internal/postgres,
-- disputes.go): open_disputes (disputes NEEDS_RESPONSE or UNDER_REVIEW),
-- disputed_minor (what those dispute) and charged_back_minor (withdrawn -
-- reinstated of the disputes LOST or still open). The refund claim reads
-- them from the row it holds locked, so a refund racing a dispute's
-- opening is serialized with it: it is refused when a dispute is open, and
-- never admitted past what was paid less what was charged back.
--
-- The functions are replaced first: Citus creates a function on its
-- workers only before any change to a distributed table in a transaction
-- (00014).
--
-- A dispute's row in the order's history is announced as dispute.opened,
-- dispute.updated or dispute.closed (the order's state does not move: the
-- row goes from the state to itself).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_event_type(to_state text, event text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event IN ('fail', 'resolve_pending') THEN 'order.payment_failed'
        WHEN event IN ('capture', 'captured') THEN 'capture.succeeded'
        WHEN event = 'capture_failed' THEN 'capture.failed'
        WHEN event = 'dispute_opened' THEN 'dispute.opened'
        WHEN event = 'dispute_updated' THEN 'dispute.updated'
        WHEN event = 'dispute_closed' THEN 'dispute.closed'
        WHEN to_state = 'EXPIRED' THEN 'order.authorization_expired'
        WHEN to_state IN ('PENDING', 'CHARGING') THEN NULL
        ELSE 'order.' || lower(to_state)
    END
$$;
-- +goose StatementEnd

-- refund_claim.sql on Citus: as 00019's, and refused while a dispute of the
-- order is open; what is left to refund is also less what was charged
-- back. The amount guard is the line that compares with v_left.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_claim_refund(p_merchant_id text, p_order_id uuid, p_request_id text,
    p_refund_id uuid, p_amount_minor bigint, p_reason text, p_actor text, p_lease interval, p_refundable text[],
    p_from_state text, p_to_state text, p_event text, p_create_event text)
RETURNS TABLE (claimed boolean, ord orders, refund refunds, charge_id text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_r refunds;
    v_claimed boolean := false;
    v_left bigint;
    v_amount bigint;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = p_order_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_r FROM refunds WHERE merchant_id = p_merchant_id AND request_id = p_request_id;
    IF NOT FOUND THEN
        v_left := CASE WHEN v_o.capture_mode = 'manual' THEN v_o.captured_minor ELSE v_o.amount_minor END
            - v_o.refunded_minor - v_o.refunding_minor - v_o.charged_back_minor;
        v_amount := coalesce(nullif(p_amount_minor, 0), v_left);
        IF v_o.state = ANY(p_refundable) AND v_o.open_disputes = 0 AND v_amount > 0 AND v_amount <= v_left THEN
            INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, reason,
                actor, state, reconcile_at)
            VALUES (p_merchant_id, p_refund_id, p_order_id, p_request_id, p_amount_minor, v_amount, v_o.currency,
                p_reason, p_actor, p_to_state, v_reconcile_at)
            ON CONFLICT (merchant_id, request_id) DO NOTHING
            RETURNING * INTO v_r;
            IF FOUND THEN
                UPDATE orders SET refunding_minor = v_o.refunding_minor + v_amount
                WHERE merchant_id = p_merchant_id AND id = p_order_id
                RETURNING * INTO v_o;
                INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
                VALUES (p_merchant_id, p_order_id, p_refund_id, NULL, p_from_state, p_create_event, p_actor, p_reason),
                    (p_merchant_id, p_order_id, p_refund_id, p_from_state, p_to_state, p_event, p_actor, '');
                v_claimed := true;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_r, coalesce((SELECT a.gateway_charge_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = v_o.current_attempt), '');
END
$$;
-- +goose StatementEnd

-- dispute_order_event.sql on Citus: a dispute's row in its order's history
-- (the event out), written inside the transaction of the dispute's change,
-- which holds the order's row lock. The call is delegated inside that
-- transaction (force_delegation, as settle_transition), so that the row
-- takes its number and transaction id from the merchant's worker, as every
-- other event of the merchant does (ListEvents' cursor compares them).
-- +goose StatementBegin
CREATE FUNCTION settle_dispute_order_event(p_merchant_id text, p_order_id uuid, p_state text, p_event text,
    p_actor text, p_reason text, p_attempt_id uuid, p_dispute_id uuid)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id, dispute_id)
    VALUES (p_merchant_id, p_order_id, p_state, p_state, p_event, p_actor, p_reason, p_attempt_id, p_dispute_id);
END
$$;
-- +goose StatementEnd

-- The checks are added apart from the columns: Citus adds no column with
-- a constraint to a distributed table.
ALTER TABLE orders
    ADD COLUMN open_disputes      integer NOT NULL DEFAULT 0,
    ADD COLUMN disputed_minor     bigint NOT NULL DEFAULT 0,
    ADD COLUMN charged_back_minor bigint NOT NULL DEFAULT 0;
ALTER TABLE orders ADD CONSTRAINT orders_dispute_totals_check
    CHECK (open_disputes >= 0 AND disputed_minor >= 0 AND charged_back_minor >= 0);
-- An order's history row written by a dispute names it.
ALTER TABLE order_events ADD COLUMN dispute_id uuid;

-- A dispute event is recorded once, as any gateway event (00006), with
-- what it came to: the dispute moved (dispute), or it was already at or
-- past what the event says (dispute_stale).
ALTER TABLE gateway_events DROP CONSTRAINT gateway_events_result_check;
ALTER TABLE gateway_events ADD CONSTRAINT gateway_events_result_check
    CHECK (result IN ('woken', 'review', 'capture_failed', 'refund_failed', 'ignored', 'unknown_object', 'dispute',
        'dispute_stale'));

-- One row per dispute at a gateway. rank is order.DisputeRank(stage,
-- status): the upsert's guard moves a dispute only to a higher rank (or,
-- at the same rank, to more withdrawn, reinstated or fee), so events
-- repeated or out of order change nothing. due_by is the deadline of the
-- merchant's evidence, NULL if none.
CREATE TABLE disputes (
    merchant_id         text NOT NULL,
    id                  uuid NOT NULL,
    order_id            uuid NOT NULL,
    attempt_id          uuid,
    gateway             text NOT NULL,
    gateway_dispute_id  text NOT NULL,
    amount_minor        bigint NOT NULL CHECK (amount_minor >= 0),
    currency            text NOT NULL,
    reason              text NOT NULL DEFAULT '',
    network_reason_code text NOT NULL DEFAULT '',
    status              text NOT NULL
        CHECK (status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW', 'WON', 'LOST', 'WARNING_CLOSED')),
    stage               text NOT NULL CHECK (stage IN ('INQUIRY', 'CHARGEBACK', 'PRE_ARBITRATION', 'SECOND_CHARGEBACK')),
    rank                integer NOT NULL CHECK (rank > 0),
    due_by              timestamptz,
    withdrawn_minor     bigint NOT NULL DEFAULT 0 CHECK (withdrawn_minor >= 0),
    reinstated_minor    bigint NOT NULL DEFAULT 0 CHECK (reinstated_minor >= 0),
    fee_minor           bigint NOT NULL DEFAULT 0 CHECK (fee_minor >= 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id),
    CONSTRAINT disputes_gateway_key UNIQUE (merchant_id, gateway, gateway_dispute_id)
);
CREATE INDEX disputes_order_idx ON disputes (merchant_id, order_id, created_at);
-- OpsService.ListDisputes and the metrics: by status, the nearest due first.
CREATE INDEX disputes_status_due_idx ON disputes (merchant_id, status, due_by);

-- Every change of a dispute, appended in the same transaction: shaped like
-- refund_events. event is opened, updated, closed or accept (an operator
-- conceded it); gateway_event_id is the gateway's event that brought the
-- change ('' for an operator's call).
CREATE TABLE dispute_history (
    merchant_id      text NOT NULL,
    id               bigint GENERATED ALWAYS AS IDENTITY,
    order_id         uuid NOT NULL,
    dispute_id       uuid NOT NULL,
    from_status      text CHECK (from_status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW', 'WON', 'LOST', 'WARNING_CLOSED')),
    to_status        text NOT NULL
        CHECK (to_status IN ('NEEDS_RESPONSE', 'UNDER_REVIEW', 'WON', 'LOST', 'WARNING_CLOSED')),
    from_stage       text,
    to_stage         text NOT NULL,
    withdrawn_minor  bigint NOT NULL DEFAULT 0,
    reinstated_minor bigint NOT NULL DEFAULT 0,
    event            text NOT NULL,
    actor            text NOT NULL,
    gateway_event_id text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX dispute_history_dispute_idx ON dispute_history (merchant_id, dispute_id, id);

-- On Citus, the new tables are distributed by merchant, co-located with
-- orders (as 00011 does the others), so that a dispute's statements, which
-- all name their merchant, run on the merchant's shard.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    PERFORM create_distributed_table('disputes', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('dispute_history', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_dispute_order_event(text,uuid,text,text,text,text,uuid,uuid)',
        'p_merchant_id', colocate_with => 'orders', force_delegation => true);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    END IF;
END
$$;
-- +goose StatementEnd
-- The refund claim of 00019 again: its body there, without the dispute
-- terms (which name columns dropped below).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_claim_refund(p_merchant_id text, p_order_id uuid, p_request_id text,
    p_refund_id uuid, p_amount_minor bigint, p_reason text, p_actor text, p_lease interval, p_refundable text[],
    p_from_state text, p_to_state text, p_event text, p_create_event text)
RETURNS TABLE (claimed boolean, ord orders, refund refunds, charge_id text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_r refunds;
    v_claimed boolean := false;
    v_left bigint;
    v_amount bigint;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = p_order_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_r FROM refunds WHERE merchant_id = p_merchant_id AND request_id = p_request_id;
    IF NOT FOUND THEN
        v_left := CASE WHEN v_o.capture_mode = 'manual' THEN v_o.captured_minor ELSE v_o.amount_minor END
            - v_o.refunded_minor - v_o.refunding_minor;
        v_amount := coalesce(nullif(p_amount_minor, 0), v_left);
        IF v_o.state = ANY(p_refundable) AND v_amount > 0 AND v_amount <= v_left THEN
            INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, reason,
                actor, state, reconcile_at)
            VALUES (p_merchant_id, p_refund_id, p_order_id, p_request_id, p_amount_minor, v_amount, v_o.currency,
                p_reason, p_actor, p_to_state, v_reconcile_at)
            ON CONFLICT (merchant_id, request_id) DO NOTHING
            RETURNING * INTO v_r;
            IF FOUND THEN
                UPDATE orders SET refunding_minor = v_o.refunding_minor + v_amount
                WHERE merchant_id = p_merchant_id AND id = p_order_id
                RETURNING * INTO v_o;
                INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
                VALUES (p_merchant_id, p_order_id, p_refund_id, NULL, p_from_state, p_create_event, p_actor, p_reason),
                    (p_merchant_id, p_order_id, p_refund_id, p_from_state, p_to_state, p_event, p_actor, '');
                v_claimed := true;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_r, coalesce((SELECT a.gateway_charge_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = v_o.current_attempt), '');
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_event_type(to_state text, event text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN event IN ('fail', 'resolve_pending') THEN 'order.payment_failed'
        WHEN event IN ('capture', 'captured') THEN 'capture.succeeded'
        WHEN event = 'capture_failed' THEN 'capture.failed'
        WHEN to_state = 'EXPIRED' THEN 'order.authorization_expired'
        WHEN to_state IN ('PENDING', 'CHARGING') THEN NULL
        ELSE 'order.' || lower(to_state)
    END
$$;
-- +goose StatementEnd
DROP FUNCTION settle_dispute_order_event(text, uuid, text, text, text, text, uuid, uuid);
DROP TABLE dispute_history;
DROP TABLE disputes;
DELETE FROM order_events WHERE dispute_id IS NOT NULL;
ALTER TABLE order_events DROP COLUMN dispute_id;
UPDATE gateway_events SET result = 'ignored' WHERE result IN ('dispute', 'dispute_stale');
ALTER TABLE gateway_events DROP CONSTRAINT gateway_events_result_check;
ALTER TABLE gateway_events ADD CONSTRAINT gateway_events_result_check
    CHECK (result IN ('woken', 'review', 'capture_failed', 'refund_failed', 'ignored', 'unknown_object'));
ALTER TABLE orders DROP CONSTRAINT orders_dispute_totals_check;
ALTER TABLE orders DROP COLUMN open_disputes, DROP COLUMN disputed_minor, DROP COLUMN charged_back_minor;
