-- +goose Up
-- A failure that the gateway reports after it accepted the operation
-- (Adyen's CAPTURE_FAILED; order.GatewayEvent.FailedLater) about the
-- attempt of an order still in flight now raises its capture_failed
-- review item at once, and wakes the order as before.
--
-- An automatic order's charge asks Adyen to capture the authorisation, and
-- is settled PAID once Adyen has received the capture. Adyen can fail the
-- capture milliseconds later, and its CAPTURE_FAILED could be recorded
-- before that settle: the order was still CHARGING, so the event only woke
-- it, and the settle then made it PAID with nothing taken and no item for
-- a person (the chaos harness found it). Now the item is raised whichever
-- commits first: before the settle by this branch, after it by the PAID
-- one. Should the reconciler settle the order instead, its lookup reads
-- the same failure and leaves the order to a person.
--
-- record_gateway_event.sql does it on PostgreSQL; this is the function
-- Citus runs, dropped and created again with the new argument and
-- distributed as 00023 did.
DROP FUNCTION settle_record_gateway_event(text, uuid, text, text, text, text, text, text, text, boolean, text, text,
    bigint, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION settle_record_gateway_event(p_merchant_id text, p_matched_id uuid, p_about text, p_reference text,
    p_gateway text, p_event_id text, p_event_type text, p_object_id text, p_charge_id text, p_succeeded boolean,
    p_outcome text,
    p_decline_code text, p_amount_minor bigint, p_currency text, p_occurred_at timestamptz, p_failed_later boolean)
RETURNS TABLE (result text, order_id text, attempt_id text, woken bigint, raised bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_order_id uuid;
    v_op_state text;
    v_o orders;
    v_paid_by_it boolean;
    v_result text;
    v_woken bigint := 0;
    v_raised bigint := 0;
    v_now timestamptz := now();
BEGIN
    PERFORM settle_require_worker();
    IF p_about = '' THEN
        SELECT a.order_id INTO v_order_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = p_matched_id;
    ELSIF p_about = 'capture' THEN
        SELECT c.order_id, c.state INTO v_order_id, v_op_state FROM captures c
        WHERE c.merchant_id = p_merchant_id AND c.id = p_matched_id;
    ELSIF p_about = 'void' THEN
        SELECT v.order_id, v.state INTO v_order_id, v_op_state FROM voids v
        WHERE v.merchant_id = p_merchant_id AND v.id = p_matched_id;
    ELSIF p_about = 'refund' THEN
        SELECT r.order_id, r.state INTO v_order_id, v_op_state FROM refunds r
        WHERE r.merchant_id = p_merchant_id AND r.id = p_matched_id;
    END IF;
    IF v_order_id IS NOT NULL THEN
        SELECT * INTO v_o FROM orders o WHERE o.merchant_id = p_merchant_id AND o.id = v_order_id FOR UPDATE;
        -- The operation's state as of the order's lock, as the statement's
        -- join reads it.
        IF p_about = 'capture' THEN
            SELECT c.state INTO v_op_state FROM captures c WHERE c.merchant_id = p_merchant_id AND c.id = p_matched_id;
        ELSIF p_about = 'void' THEN
            SELECT v.state INTO v_op_state FROM voids v WHERE v.merchant_id = p_merchant_id AND v.id = p_matched_id;
        ELSIF p_about = 'refund' THEN
            SELECT r.state INTO v_op_state FROM refunds r WHERE r.merchant_id = p_merchant_id AND r.id = p_matched_id;
        END IF;
    END IF;
    v_paid_by_it := p_about = '' AND v_o.current_attempt = p_matched_id
        AND v_o.state IN ('PAID', 'PARTIALLY_REFUNDED', 'REFUNDED');
    v_result := CASE
        WHEN v_o.id IS NULL THEN 'unknown_object'
        WHEN p_about = '' AND p_failed_later AND v_o.current_attempt = p_matched_id
            AND v_o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW') THEN 'capture_failed'
        WHEN p_about = '' AND v_o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW')
            AND v_o.current_attempt = p_matched_id THEN 'woken'
        WHEN p_about = '' AND v_o.state = 'AUTHORIZED' AND v_o.current_attempt = p_matched_id
            AND p_outcome = 'succeeded' AND NOT p_succeeded THEN 'woken'
        WHEN p_about <> '' AND v_op_state IN ('CAPTURING', 'VOIDING', 'REFUNDING') THEN 'woken'
        WHEN p_about = '' AND p_succeeded AND NOT (v_o.current_attempt = p_matched_id
            AND v_o.state IN ('AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED'))
            THEN 'review'
        WHEN p_outcome = 'declined' AND (v_paid_by_it OR (p_about = 'capture' AND v_op_state = 'SUCCEEDED'))
            THEN 'capture_failed'
        WHEN p_outcome = 'declined' AND p_about = 'refund' AND v_op_state = 'SUCCEEDED' THEN 'refund_failed'
        ELSE 'ignored' END;
    INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result,
        reference, about, charge_id, succeeded, outcome, decline_code, amount_minor, currency, occurred_at)
    VALUES (p_merchant_id, p_gateway, p_event_id, p_event_type, p_object_id,
        CASE WHEN v_o.id IS NULL THEN NULL ELSE p_matched_id END, v_o.id, v_result,
        p_reference, p_about, p_charge_id, p_succeeded, p_outcome, p_decline_code, p_amount_minor, p_currency,
        p_occurred_at)
    ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'duplicate'::text, ''::text, ''::text, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    IF v_result IN ('woken', 'capture_failed') AND p_about = ''
        AND v_o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW', 'AUTHORIZED') THEN
        UPDATE orders SET reconcile_at = least(v_o.reconcile_at, v_now),
            capture_before = CASE WHEN v_o.state = 'AUTHORIZED' THEN least(v_o.capture_before, v_now)
                ELSE v_o.capture_before END
        WHERE merchant_id = p_merchant_id AND id = v_o.id;
        v_woken := 1;
    END IF;
    IF v_result = 'woken' AND p_about = 'capture' THEN
        UPDATE captures SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'CAPTURING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result = 'woken' AND p_about = 'void' THEN
        UPDATE voids SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'VOIDING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result = 'woken' AND p_about = 'refund' THEN
        UPDATE refunds SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'REFUNDING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result IN ('review', 'capture_failed', 'refund_failed') THEN
        -- A searched CASE: Citus 13.2 fails on a simple CASE over a
        -- variable here (text = boolean), as the store's tests showed.
        INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
        VALUES (p_merchant_id, CASE WHEN v_result = 'review' THEN 'possible_double_charge' ELSE v_result END,
            v_o.id, CASE WHEN p_about = '' THEN p_matched_id ELSE v_o.current_attempt END, p_gateway, p_event_id)
        ON CONFLICT (merchant_id, attempt_id, kind) DO NOTHING;
        GET DIAGNOSTICS v_raised = ROW_COUNT;
    END IF;
    RETURN QUERY SELECT v_result, coalesce(v_o.id::text, ''),
        CASE WHEN v_o.id IS NULL THEN '' ELSE p_matched_id::text END, v_woken, v_raised;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_record_gateway_event(text,uuid,text,text,text,text,text,text,'
        'text,boolean,text,text,bigint,text,timestamptz,boolean)', 'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- 00023's function again.
DROP FUNCTION settle_record_gateway_event(text, uuid, text, text, text, text, text, text, text, boolean, text, text,
    bigint, text, timestamptz, boolean);
-- +goose StatementBegin
CREATE FUNCTION settle_record_gateway_event(p_merchant_id text, p_matched_id uuid, p_about text, p_reference text,
    p_gateway text, p_event_id text, p_event_type text, p_object_id text, p_charge_id text, p_succeeded boolean,
    p_outcome text,
    p_decline_code text, p_amount_minor bigint, p_currency text, p_occurred_at timestamptz)
RETURNS TABLE (result text, order_id text, attempt_id text, woken bigint, raised bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_order_id uuid;
    v_op_state text;
    v_o orders;
    v_paid_by_it boolean;
    v_result text;
    v_woken bigint := 0;
    v_raised bigint := 0;
    v_now timestamptz := now();
BEGIN
    PERFORM settle_require_worker();
    IF p_about = '' THEN
        SELECT a.order_id INTO v_order_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = p_matched_id;
    ELSIF p_about = 'capture' THEN
        SELECT c.order_id, c.state INTO v_order_id, v_op_state FROM captures c
        WHERE c.merchant_id = p_merchant_id AND c.id = p_matched_id;
    ELSIF p_about = 'void' THEN
        SELECT v.order_id, v.state INTO v_order_id, v_op_state FROM voids v
        WHERE v.merchant_id = p_merchant_id AND v.id = p_matched_id;
    ELSIF p_about = 'refund' THEN
        SELECT r.order_id, r.state INTO v_order_id, v_op_state FROM refunds r
        WHERE r.merchant_id = p_merchant_id AND r.id = p_matched_id;
    END IF;
    IF v_order_id IS NOT NULL THEN
        SELECT * INTO v_o FROM orders o WHERE o.merchant_id = p_merchant_id AND o.id = v_order_id FOR UPDATE;
        -- The operation's state as of the order's lock, as the statement's
        -- join reads it.
        IF p_about = 'capture' THEN
            SELECT c.state INTO v_op_state FROM captures c WHERE c.merchant_id = p_merchant_id AND c.id = p_matched_id;
        ELSIF p_about = 'void' THEN
            SELECT v.state INTO v_op_state FROM voids v WHERE v.merchant_id = p_merchant_id AND v.id = p_matched_id;
        ELSIF p_about = 'refund' THEN
            SELECT r.state INTO v_op_state FROM refunds r WHERE r.merchant_id = p_merchant_id AND r.id = p_matched_id;
        END IF;
    END IF;
    v_paid_by_it := p_about = '' AND v_o.current_attempt = p_matched_id
        AND v_o.state IN ('PAID', 'PARTIALLY_REFUNDED', 'REFUNDED');
    v_result := CASE
        WHEN v_o.id IS NULL THEN 'unknown_object'
        WHEN p_about = '' AND v_o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW')
            AND v_o.current_attempt = p_matched_id THEN 'woken'
        WHEN p_about = '' AND v_o.state = 'AUTHORIZED' AND v_o.current_attempt = p_matched_id
            AND p_outcome = 'succeeded' AND NOT p_succeeded THEN 'woken'
        WHEN p_about <> '' AND v_op_state IN ('CAPTURING', 'VOIDING', 'REFUNDING') THEN 'woken'
        WHEN p_about = '' AND p_succeeded AND NOT (v_o.current_attempt = p_matched_id
            AND v_o.state IN ('AUTHORIZED', 'PAID', 'PARTIALLY_REFUNDED', 'REFUNDED'))
            THEN 'review'
        WHEN p_outcome = 'declined' AND (v_paid_by_it OR (p_about = 'capture' AND v_op_state = 'SUCCEEDED'))
            THEN 'capture_failed'
        WHEN p_outcome = 'declined' AND p_about = 'refund' AND v_op_state = 'SUCCEEDED' THEN 'refund_failed'
        ELSE 'ignored' END;
    INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result,
        reference, about, charge_id, succeeded, outcome, decline_code, amount_minor, currency, occurred_at)
    VALUES (p_merchant_id, p_gateway, p_event_id, p_event_type, p_object_id,
        CASE WHEN v_o.id IS NULL THEN NULL ELSE p_matched_id END, v_o.id, v_result,
        p_reference, p_about, p_charge_id, p_succeeded, p_outcome, p_decline_code, p_amount_minor, p_currency,
        p_occurred_at)
    ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'duplicate'::text, ''::text, ''::text, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    IF v_result = 'woken' AND p_about = '' THEN
        UPDATE orders SET reconcile_at = least(v_o.reconcile_at, v_now),
            capture_before = CASE WHEN v_o.state = 'AUTHORIZED' THEN least(v_o.capture_before, v_now)
                ELSE v_o.capture_before END
        WHERE merchant_id = p_merchant_id AND id = v_o.id;
        v_woken := 1;
    ELSIF v_result = 'woken' AND p_about = 'capture' THEN
        UPDATE captures SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'CAPTURING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result = 'woken' AND p_about = 'void' THEN
        UPDATE voids SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'VOIDING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result = 'woken' AND p_about = 'refund' THEN
        UPDATE refunds SET reconcile_at = least(reconcile_at, v_now)
        WHERE merchant_id = p_merchant_id AND id = p_matched_id AND state = 'REFUNDING';
        GET DIAGNOSTICS v_woken = ROW_COUNT;
    ELSIF v_result IN ('review', 'capture_failed', 'refund_failed') THEN
        -- A searched CASE: Citus 13.2 fails on a simple CASE over a
        -- variable here (text = boolean), as the store's tests showed.
        INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
        VALUES (p_merchant_id, CASE WHEN v_result = 'review' THEN 'possible_double_charge' ELSE v_result END,
            v_o.id, CASE WHEN p_about = '' THEN p_matched_id ELSE v_o.current_attempt END, p_gateway, p_event_id)
        ON CONFLICT (merchant_id, attempt_id, kind) DO NOTHING;
        GET DIAGNOSTICS v_raised = ROW_COUNT;
    END IF;
    RETURN QUERY SELECT v_result, coalesce(v_o.id::text, ''),
        CASE WHEN v_o.id IS NULL THEN '' ELSE p_matched_id::text END, v_woken, v_raised;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_record_gateway_event(text,uuid,text,text,text,text,text,text,'
        'text,boolean,text,text,bigint,text,timestamptz)', 'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd
