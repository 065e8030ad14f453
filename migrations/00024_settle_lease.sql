-- +goose Up
-- A reconciler's settlement is guarded by its lease as well as by the
-- order's state and attempt: it applies only while the order's
-- reconcile_at is still what the lease set (order.Settlement.Lease). A
-- gateway event recorded while the lookup was under way brings the order's
-- reconcile_at to now, and the lookup's verdict may predate what the event
-- says: Adyen's CAPTURE_FAILED, arriving after the lookup had read the
-- attempt's notifications and while it replayed the capture, used to be
-- overtaken by the lookup's settle to PAID, and no capture_failed item was
-- raised (the chaos harness found it). The settle now loses, and the order,
-- due at once, is looked up again with the event on record. A refund's
-- and a capture's settles are guarded by their leases the same way
-- (REFUND_FAILED or CAPTURE_FAILED arriving while the lookup that read the
-- REFUND or the CAPTURE settles it as SUCCEEDED).
--
-- settles.sql, refund_settle.sql and capture_settle.sql do it on
-- PostgreSQL; these are the functions Citus runs, dropped and created again
-- with the lease, and distributed as 00019 did.
DROP FUNCTION settle_settle_orders(text, uuid[], uuid[], text[], interval[], boolean[], text[], text[], text[], text[],
    text[], text[], text[], text[], bigint[], timestamptz[]);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_orders(p_merchant_id text, p_order_id uuid[], p_attempt_id uuid[], p_to_state text[],
    p_recheck_in interval[], p_checked boolean[], p_last_error text[], p_outcome text[], p_decline_code text[],
    p_charge_id text[], p_event text[], p_actor text[], p_reason text[], p_from_state text[],
    p_authorized_minor bigint[], p_capture_before timestamptz[], p_lease timestamptz[])
RETURNS TABLE (i bigint, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_st record;
    v_o orders;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_authorized bigint;
    v_capture_before timestamptz;
BEGIN
    PERFORM settle_require_worker();
    FOR v_st IN
        SELECT * FROM unnest(p_order_id, p_attempt_id, p_to_state, p_recheck_in, p_checked, p_last_error, p_outcome,
            p_decline_code, p_charge_id, p_event, p_actor, p_reason, p_from_state, p_authorized_minor,
            p_capture_before, p_lease) WITH ORDINALITY
            AS st(order_id, attempt_id, to_state, recheck_in, checked, last_error, outcome, decline_code, charge_id,
                event, actor, reason, from_state, authorized_minor, capture_before, lease, i)
        ORDER BY st.order_id
    LOOP
        SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_st.order_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND OR v_o.state <> v_st.from_state
            OR v_o.current_attempt IS DISTINCT FROM v_st.attempt_id
            OR v_st.lease IS NOT NULL AND v_o.reconcile_at IS DISTINCT FROM v_st.lease;
        v_reconcile_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN v_now + v_st.recheck_in END;
        v_updated_at := CASE WHEN v_st.to_state = v_st.from_state THEN v_o.updated_at ELSE v_now END;
        v_settled_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN NULL ELSE v_now END;
        v_authorized := CASE WHEN v_st.to_state = 'AUTHORIZED'
            THEN coalesce(nullif(v_st.authorized_minor, 0), v_o.amount_minor) ELSE v_o.authorized_minor END;
        v_capture_before := CASE WHEN v_st.to_state = 'AUTHORIZED' THEN v_st.capture_before ELSE v_o.capture_before END;
        UPDATE orders SET state = v_st.to_state, reconcile_at = v_reconcile_at,
            reconcile_count = v_o.reconcile_count + v_st.checked::int, last_error = v_st.last_error,
            updated_at = v_updated_at, authorized_minor = v_authorized, capture_before = v_capture_before
        WHERE merchant_id = p_merchant_id AND id = v_st.order_id
        RETURNING * INTO v_o;
        UPDATE charge_attempts SET outcome = v_st.outcome, decline_code = v_st.decline_code,
            gateway_charge_id = v_st.charge_id, settled_at = v_settled_at
        WHERE merchant_id = p_merchant_id AND id = v_st.attempt_id;
        IF v_st.event <> '' THEN
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
            VALUES (p_merchant_id, v_st.order_id, v_st.from_state, v_st.to_state, v_st.event, v_st.actor,
                v_st.reason, v_st.attempt_id);
        END IF;
        i := v_st.i;
        ord := v_o;
        RETURN NEXT;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION settle_settle_refund(text, uuid, text, text, text, text, text, interval, boolean, text, text, text, text,
    text, text, text, text);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_refund(p_merchant_id text, p_refund_id uuid, p_from_state text,
    p_to_state text, p_outcome text, p_decline_code text, p_gateway_refund_id text, p_recheck_in interval,
    p_checked boolean, p_last_error text, p_event text, p_actor text, p_reason text, p_partial_event text,
    p_partial_to text, p_full_event text, p_full_to text, p_lease timestamptz)
RETURNS TABLE (ord orders, refund refunds) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_r refunds;
    v_order_id uuid;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_from text;
    v_to text;
    v_event text;
    v_full boolean;
BEGIN
    PERFORM settle_require_worker();
    SELECT order_id INTO v_order_id FROM refunds WHERE merchant_id = p_merchant_id AND id = p_refund_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_order_id FOR UPDATE;
    SELECT * INTO v_r FROM refunds WHERE merchant_id = p_merchant_id AND id = p_refund_id FOR UPDATE;
    IF v_r.state <> p_from_state OR p_lease IS NOT NULL AND v_r.reconcile_at IS DISTINCT FROM p_lease THEN
        RETURN;
    END IF;
    v_reconcile_at := CASE WHEN p_to_state = 'REFUNDING' THEN v_now + p_recheck_in END;
    v_updated_at := CASE WHEN p_to_state = 'REFUNDING' THEN v_r.updated_at ELSE v_now END;
    v_settled_at := CASE WHEN p_to_state = 'REFUNDING' THEN NULL ELSE v_now END;
    UPDATE refunds SET state = p_to_state, outcome = p_outcome, decline_code = p_decline_code,
        gateway_refund_id = p_gateway_refund_id, reconcile_at = v_reconcile_at,
        reconcile_count = v_r.reconcile_count + p_checked::int, last_error = p_last_error,
        updated_at = v_updated_at, settled_at = v_settled_at
    WHERE merchant_id = p_merchant_id AND id = p_refund_id
    RETURNING * INTO v_r;
    IF v_r.state IN ('SUCCEEDED', 'FAILED') THEN
        v_full := v_r.state = 'SUCCEEDED' AND v_o.refunded_minor + v_r.amount_minor
            >= CASE WHEN v_o.capture_mode = 'manual' THEN v_o.captured_minor ELSE v_o.amount_minor END;
        v_from := v_o.state;
        v_event := CASE WHEN v_r.state <> 'SUCCEEDED' THEN '' WHEN v_full THEN p_full_event ELSE p_partial_event END;
        v_to := CASE WHEN v_r.state <> 'SUCCEEDED' THEN v_o.state WHEN v_full THEN p_full_to ELSE p_partial_to END;
        v_updated_at := CASE WHEN v_event = '' THEN v_o.updated_at ELSE v_now END;
        UPDATE orders SET
            refunded_minor = v_o.refunded_minor + CASE WHEN v_r.state = 'SUCCEEDED' THEN v_r.amount_minor ELSE 0 END,
            refunding_minor = v_o.refunding_minor - v_r.amount_minor,
            state = v_to, updated_at = v_updated_at
        WHERE merchant_id = p_merchant_id AND id = v_order_id
        RETURNING * INTO v_o;
        IF v_event <> '' THEN
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, refund_id)
            VALUES (p_merchant_id, v_order_id, v_from, v_to, v_event, p_actor, '', p_refund_id);
        END IF;
    END IF;
    IF p_event <> '' THEN
        INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
        VALUES (p_merchant_id, v_order_id, p_refund_id, p_from_state, v_r.state, p_event, p_actor, p_reason);
    END IF;
    RETURN QUERY SELECT v_o, v_r;
END
$$;
-- +goose StatementEnd
DROP FUNCTION settle_settle_capture(text, uuid, text, text, text, text, text, interval, boolean, text, text, text,
    text, text, text, text, text);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_capture(p_merchant_id text, p_capture_id uuid, p_from_state text, p_to_state text,
    p_outcome text, p_decline_code text, p_gateway_capture_id text, p_recheck_in interval, p_checked boolean,
    p_last_error text, p_event text, p_actor text, p_reason text, p_capture_event text, p_paid_state text,
    p_captured_event text, p_failed_event text, p_lease timestamptz)
RETURNS TABLE (ord orders, capture captures) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_c captures;
    v_order_id uuid;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_from text;
    v_to text;
    v_event text;
BEGIN
    PERFORM settle_require_worker();
    SELECT order_id INTO v_order_id FROM captures WHERE merchant_id = p_merchant_id AND id = p_capture_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_order_id FOR UPDATE;
    SELECT * INTO v_c FROM captures WHERE merchant_id = p_merchant_id AND id = p_capture_id FOR UPDATE;
    IF v_c.state <> p_from_state OR p_lease IS NOT NULL AND v_c.reconcile_at IS DISTINCT FROM p_lease THEN
        RETURN;
    END IF;
    v_reconcile_at := CASE WHEN p_to_state = 'CAPTURING' THEN v_now + p_recheck_in END;
    v_updated_at := CASE WHEN p_to_state = 'CAPTURING' THEN v_c.updated_at ELSE v_now END;
    v_settled_at := CASE WHEN p_to_state = 'CAPTURING' THEN NULL ELSE v_now END;
    UPDATE captures SET state = p_to_state, outcome = p_outcome, decline_code = p_decline_code,
        gateway_capture_id = p_gateway_capture_id, reconcile_at = v_reconcile_at,
        reconcile_count = v_c.reconcile_count + p_checked::int, last_error = p_last_error,
        updated_at = v_updated_at, settled_at = v_settled_at
    WHERE merchant_id = p_merchant_id AND id = p_capture_id
    RETURNING * INTO v_c;
    IF v_c.state IN ('SUCCEEDED', 'FAILED') THEN
        v_from := v_o.state;
        v_event := CASE
            WHEN v_c.state = 'SUCCEEDED' AND v_o.state = 'AUTHORIZED' THEN p_capture_event
            WHEN v_c.state = 'SUCCEEDED' THEN p_captured_event
            ELSE p_failed_event END;
        v_to := CASE WHEN v_c.state = 'SUCCEEDED' AND v_o.state = 'AUTHORIZED' THEN p_paid_state ELSE v_o.state END;
        v_updated_at := CASE WHEN v_to = v_from THEN v_o.updated_at ELSE v_now END;
        UPDATE orders SET
            captured_minor = v_o.captured_minor + CASE WHEN v_c.state = 'SUCCEEDED' THEN v_c.amount_minor ELSE 0 END,
            capturing_minor = v_o.capturing_minor - v_c.amount_minor,
            hold_closed = v_o.hold_closed OR (v_c.state = 'SUCCEEDED' AND v_c.final),
            state = v_to, updated_at = v_updated_at
        WHERE merchant_id = p_merchant_id AND id = v_order_id
        RETURNING * INTO v_o;
        INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, capture_id)
        VALUES (p_merchant_id, v_order_id, v_from, v_to, v_event, p_actor, p_reason, p_capture_id);
    END IF;
    IF p_event <> '' THEN
        INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
        VALUES (p_merchant_id, v_order_id, 'capture', p_capture_id, p_from_state, v_c.state, p_event, p_actor, p_reason);
    END IF;
    RETURN QUERY SELECT v_o, v_c;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_settle_orders(text,uuid[],uuid[],text[],interval[],boolean[],text[],'
        'text[],text[],text[],text[],text[],text[],text[],bigint[],timestamptz[],timestamptz[])', 'p_merchant_id',
        colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_refund(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text,timestamptz)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_capture(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text,timestamptz)', 'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- 00019's functions again.
DROP FUNCTION settle_settle_orders(text, uuid[], uuid[], text[], interval[], boolean[], text[], text[], text[], text[],
    text[], text[], text[], text[], bigint[], timestamptz[], timestamptz[]);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_orders(p_merchant_id text, p_order_id uuid[], p_attempt_id uuid[], p_to_state text[],
    p_recheck_in interval[], p_checked boolean[], p_last_error text[], p_outcome text[], p_decline_code text[],
    p_charge_id text[], p_event text[], p_actor text[], p_reason text[], p_from_state text[],
    p_authorized_minor bigint[], p_capture_before timestamptz[])
RETURNS TABLE (i bigint, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_st record;
    v_o orders;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_authorized bigint;
    v_capture_before timestamptz;
BEGIN
    PERFORM settle_require_worker();
    FOR v_st IN
        SELECT * FROM unnest(p_order_id, p_attempt_id, p_to_state, p_recheck_in, p_checked, p_last_error, p_outcome,
            p_decline_code, p_charge_id, p_event, p_actor, p_reason, p_from_state, p_authorized_minor,
            p_capture_before) WITH ORDINALITY
            AS st(order_id, attempt_id, to_state, recheck_in, checked, last_error, outcome, decline_code, charge_id,
                event, actor, reason, from_state, authorized_minor, capture_before, i)
        ORDER BY st.order_id
    LOOP
        SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_st.order_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND OR v_o.state <> v_st.from_state
            OR v_o.current_attempt IS DISTINCT FROM v_st.attempt_id;
        v_reconcile_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN v_now + v_st.recheck_in END;
        v_updated_at := CASE WHEN v_st.to_state = v_st.from_state THEN v_o.updated_at ELSE v_now END;
        v_settled_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN NULL ELSE v_now END;
        v_authorized := CASE WHEN v_st.to_state = 'AUTHORIZED'
            THEN coalesce(nullif(v_st.authorized_minor, 0), v_o.amount_minor) ELSE v_o.authorized_minor END;
        v_capture_before := CASE WHEN v_st.to_state = 'AUTHORIZED' THEN v_st.capture_before ELSE v_o.capture_before END;
        UPDATE orders SET state = v_st.to_state, reconcile_at = v_reconcile_at,
            reconcile_count = v_o.reconcile_count + v_st.checked::int, last_error = v_st.last_error,
            updated_at = v_updated_at, authorized_minor = v_authorized, capture_before = v_capture_before
        WHERE merchant_id = p_merchant_id AND id = v_st.order_id
        RETURNING * INTO v_o;
        UPDATE charge_attempts SET outcome = v_st.outcome, decline_code = v_st.decline_code,
            gateway_charge_id = v_st.charge_id, settled_at = v_settled_at
        WHERE merchant_id = p_merchant_id AND id = v_st.attempt_id;
        IF v_st.event <> '' THEN
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
            VALUES (p_merchant_id, v_st.order_id, v_st.from_state, v_st.to_state, v_st.event, v_st.actor,
                v_st.reason, v_st.attempt_id);
        END IF;
        i := v_st.i;
        ord := v_o;
        RETURN NEXT;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP FUNCTION settle_settle_refund(text, uuid, text, text, text, text, text, interval, boolean, text, text, text, text,
    text, text, text, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_refund(p_merchant_id text, p_refund_id uuid, p_from_state text,
    p_to_state text, p_outcome text, p_decline_code text, p_gateway_refund_id text, p_recheck_in interval,
    p_checked boolean, p_last_error text, p_event text, p_actor text, p_reason text, p_partial_event text,
    p_partial_to text, p_full_event text, p_full_to text)
RETURNS TABLE (ord orders, refund refunds) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_r refunds;
    v_order_id uuid;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_from text;
    v_to text;
    v_event text;
    v_full boolean;
BEGIN
    PERFORM settle_require_worker();
    SELECT order_id INTO v_order_id FROM refunds WHERE merchant_id = p_merchant_id AND id = p_refund_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_order_id FOR UPDATE;
    SELECT * INTO v_r FROM refunds WHERE merchant_id = p_merchant_id AND id = p_refund_id FOR UPDATE;
    IF v_r.state <> p_from_state THEN
        RETURN;
    END IF;
    v_reconcile_at := CASE WHEN p_to_state = 'REFUNDING' THEN v_now + p_recheck_in END;
    v_updated_at := CASE WHEN p_to_state = 'REFUNDING' THEN v_r.updated_at ELSE v_now END;
    v_settled_at := CASE WHEN p_to_state = 'REFUNDING' THEN NULL ELSE v_now END;
    UPDATE refunds SET state = p_to_state, outcome = p_outcome, decline_code = p_decline_code,
        gateway_refund_id = p_gateway_refund_id, reconcile_at = v_reconcile_at,
        reconcile_count = v_r.reconcile_count + p_checked::int, last_error = p_last_error,
        updated_at = v_updated_at, settled_at = v_settled_at
    WHERE merchant_id = p_merchant_id AND id = p_refund_id
    RETURNING * INTO v_r;
    IF v_r.state IN ('SUCCEEDED', 'FAILED') THEN
        v_full := v_r.state = 'SUCCEEDED' AND v_o.refunded_minor + v_r.amount_minor
            >= CASE WHEN v_o.capture_mode = 'manual' THEN v_o.captured_minor ELSE v_o.amount_minor END;
        v_from := v_o.state;
        v_event := CASE WHEN v_r.state <> 'SUCCEEDED' THEN '' WHEN v_full THEN p_full_event ELSE p_partial_event END;
        v_to := CASE WHEN v_r.state <> 'SUCCEEDED' THEN v_o.state WHEN v_full THEN p_full_to ELSE p_partial_to END;
        v_updated_at := CASE WHEN v_event = '' THEN v_o.updated_at ELSE v_now END;
        UPDATE orders SET
            refunded_minor = v_o.refunded_minor + CASE WHEN v_r.state = 'SUCCEEDED' THEN v_r.amount_minor ELSE 0 END,
            refunding_minor = v_o.refunding_minor - v_r.amount_minor,
            state = v_to, updated_at = v_updated_at
        WHERE merchant_id = p_merchant_id AND id = v_order_id
        RETURNING * INTO v_o;
        IF v_event <> '' THEN
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, refund_id)
            VALUES (p_merchant_id, v_order_id, v_from, v_to, v_event, p_actor, '', p_refund_id);
        END IF;
    END IF;
    IF p_event <> '' THEN
        INSERT INTO refund_events (merchant_id, order_id, refund_id, from_state, to_state, event, actor, reason)
        VALUES (p_merchant_id, v_order_id, p_refund_id, p_from_state, v_r.state, p_event, p_actor, p_reason);
    END IF;
    RETURN QUERY SELECT v_o, v_r;
END
$$;
-- +goose StatementEnd
DROP FUNCTION settle_settle_capture(text, uuid, text, text, text, text, text, interval, boolean, text, text, text,
    text, text, text, text, text, timestamptz);
-- +goose StatementBegin
CREATE FUNCTION settle_settle_capture(p_merchant_id text, p_capture_id uuid, p_from_state text, p_to_state text,
    p_outcome text, p_decline_code text, p_gateway_capture_id text, p_recheck_in interval, p_checked boolean,
    p_last_error text, p_event text, p_actor text, p_reason text, p_capture_event text, p_paid_state text,
    p_captured_event text, p_failed_event text)
RETURNS TABLE (ord orders, capture captures) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_c captures;
    v_order_id uuid;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_from text;
    v_to text;
    v_event text;
BEGIN
    PERFORM settle_require_worker();
    SELECT order_id INTO v_order_id FROM captures WHERE merchant_id = p_merchant_id AND id = p_capture_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_order_id FOR UPDATE;
    SELECT * INTO v_c FROM captures WHERE merchant_id = p_merchant_id AND id = p_capture_id FOR UPDATE;
    IF v_c.state <> p_from_state THEN
        RETURN;
    END IF;
    v_reconcile_at := CASE WHEN p_to_state = 'CAPTURING' THEN v_now + p_recheck_in END;
    v_updated_at := CASE WHEN p_to_state = 'CAPTURING' THEN v_c.updated_at ELSE v_now END;
    v_settled_at := CASE WHEN p_to_state = 'CAPTURING' THEN NULL ELSE v_now END;
    UPDATE captures SET state = p_to_state, outcome = p_outcome, decline_code = p_decline_code,
        gateway_capture_id = p_gateway_capture_id, reconcile_at = v_reconcile_at,
        reconcile_count = v_c.reconcile_count + p_checked::int, last_error = p_last_error,
        updated_at = v_updated_at, settled_at = v_settled_at
    WHERE merchant_id = p_merchant_id AND id = p_capture_id
    RETURNING * INTO v_c;
    IF v_c.state IN ('SUCCEEDED', 'FAILED') THEN
        v_from := v_o.state;
        v_event := CASE
            WHEN v_c.state = 'SUCCEEDED' AND v_o.state = 'AUTHORIZED' THEN p_capture_event
            WHEN v_c.state = 'SUCCEEDED' THEN p_captured_event
            ELSE p_failed_event END;
        v_to := CASE WHEN v_c.state = 'SUCCEEDED' AND v_o.state = 'AUTHORIZED' THEN p_paid_state ELSE v_o.state END;
        v_updated_at := CASE WHEN v_to = v_from THEN v_o.updated_at ELSE v_now END;
        UPDATE orders SET
            captured_minor = v_o.captured_minor + CASE WHEN v_c.state = 'SUCCEEDED' THEN v_c.amount_minor ELSE 0 END,
            capturing_minor = v_o.capturing_minor - v_c.amount_minor,
            hold_closed = v_o.hold_closed OR (v_c.state = 'SUCCEEDED' AND v_c.final),
            state = v_to, updated_at = v_updated_at
        WHERE merchant_id = p_merchant_id AND id = v_order_id
        RETURNING * INTO v_o;
        INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, capture_id)
        VALUES (p_merchant_id, v_order_id, v_from, v_to, v_event, p_actor, p_reason, p_capture_id);
    END IF;
    IF p_event <> '' THEN
        INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
        VALUES (p_merchant_id, v_order_id, 'capture', p_capture_id, p_from_state, v_c.state, p_event, p_actor, p_reason);
    END IF;
    RETURN QUERY SELECT v_o, v_c;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_settle_orders(text,uuid[],uuid[],text[],interval[],boolean[],text[],'
        'text[],text[],text[],text[],text[],text[],text[],bigint[],timestamptz[])', 'p_merchant_id',
        colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_refund(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_capture(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd
