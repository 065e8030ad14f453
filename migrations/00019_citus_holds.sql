-- +goose Up
-- Authorize now, capture later on Citus (issue #28): the functions of
-- migration 00016 that the charge and refund paths run there learn the
-- hold of migration 00018, and the capture and void paths get functions of
-- their own, so that each of their writes is one call that Citus runs
-- whole on the merchant's worker (00016 says why, and how these are
-- written). Each is the Citus form of the statement in
-- internal/postgres/sql/ named beside it, and must do what it does; the
-- store's conformance suite runs on both engines.
--
-- settle_create_order, settle_create_claimed and settle_settle_orders take
-- new arguments (the capture mode; the hold of a settlement to
-- AUTHORIZED), so they are dropped and created again; the refund
-- functions keep their arguments and are replaced. Only functions change
-- here: Citus creates a function on its workers only before any change to
-- a distributed table in a transaction (00014).
DROP FUNCTION settle_create_order(text, uuid, text, bigint, text, text, text, text, text);
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text, text);
DROP FUNCTION settle_settle_orders(text, uuid[], uuid[], text[], interval[], boolean[], text[], text[], text[], text[],
    text[], text[], text[], text[]);

-- create_order.sql, with the order's capture mode.
-- +goose StatementBegin
CREATE FUNCTION settle_create_order(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_state text, p_event text, p_capture_mode text)
RETURNS TABLE (created boolean, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
        capture_mode)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway, p_state,
        p_capture_mode)
    ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
    RETURNING * INTO v_o;
    IF FOUND THEN
        INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
        VALUES (p_merchant_id, p_id, NULL, p_state, p_event, 'api');
        RETURN QUERY SELECT true, v_o;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, o FROM orders o
        WHERE o.merchant_id = p_merchant_id AND o.merchant_reference = p_merchant_reference;
END
$$;
-- +goose StatementEnd

-- create_claimed_order.sql, with the order's capture mode.
-- +goose StatementBegin
CREATE FUNCTION settle_create_claimed(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_to_state text, p_attempt_id uuid, p_lease interval,
    p_request_id text, p_from_state text, p_create_event text, p_claim_event text, p_actor text, p_customer text,
    p_capture_mode text)
RETURNS TABLE (ord orders, att charge_attempts) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_a charge_attempts;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
        state, current_attempt, reconcile_at, capture_mode)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway,
        p_to_state, p_attempt_id, v_reconcile_at, p_capture_mode)
    ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
    RETURNING * INTO v_o;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor,
        currency)
    VALUES (p_attempt_id, p_id, p_merchant_id, p_request_id, p_payment_method, p_customer, p_amount_minor, p_currency)
    RETURNING * INTO v_a;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
    VALUES (p_merchant_id, p_id, NULL, p_from_state, p_create_event, p_actor, NULL),
        (p_merchant_id, p_id, p_from_state, p_to_state, p_claim_event, p_actor, p_attempt_id);
    RETURN QUERY SELECT v_o, v_a;
END
$$;
-- +goose StatementEnd

-- settles.sql: a settlement to AUTHORIZED records the hold (what the
-- gateway holds, the order's amount when it did not say, and until when).
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

-- refund_claim.sql: what is left to refund is what was paid (the amount,
-- or for a capture-manual order what was captured) less what is refunded
-- or being refunded, read from the order's row held locked. The amount
-- guard is the line that compares with v_left.
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

-- refund_settle.sql: a refund is full when the refunded total reaches what
-- was paid (the amount, or for a capture-manual order what was captured).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_settle_refund(p_merchant_id text, p_refund_id uuid, p_from_state text,
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

-- capture_claim.sql: every rule is read from the order's row held locked
-- (capturable, capture manual, the hold open, no void in flight). The hold
-- guard is the line that compares with v_left.
-- +goose StatementBegin
CREATE FUNCTION settle_claim_capture(p_merchant_id text, p_order_id uuid, p_request_id text, p_capture_id uuid,
    p_amount_minor bigint, p_final boolean, p_reason text, p_actor text, p_lease interval, p_capturable text[],
    p_from_state text, p_to_state text, p_event text, p_create_event text)
RETURNS TABLE (claimed boolean, ord orders, capture captures, charge_id text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_c captures;
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
    SELECT * INTO v_c FROM captures WHERE merchant_id = p_merchant_id AND request_id = p_request_id;
    IF NOT FOUND THEN
        v_left := v_o.authorized_minor - v_o.captured_minor - v_o.capturing_minor;
        v_amount := coalesce(nullif(p_amount_minor, 0), v_left);
        IF v_o.state = ANY(p_capturable) AND v_o.capture_mode = 'manual' AND NOT v_o.hold_closed AND NOT v_o.voiding
            AND v_amount > 0
            AND v_amount <= v_left
        THEN
            INSERT INTO captures (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, final,
                reason, actor, state, reconcile_at)
            VALUES (p_merchant_id, p_capture_id, p_order_id, p_request_id, p_amount_minor, v_amount, v_o.currency,
                p_final, p_reason, p_actor, p_to_state, v_reconcile_at)
            ON CONFLICT (merchant_id, request_id) DO NOTHING
            RETURNING * INTO v_c;
            IF FOUND THEN
                UPDATE orders SET capturing_minor = v_o.capturing_minor + v_amount
                WHERE merchant_id = p_merchant_id AND id = p_order_id
                RETURNING * INTO v_o;
                INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor,
                    reason)
                VALUES (p_merchant_id, p_order_id, 'capture', p_capture_id, NULL, p_from_state, p_create_event, p_actor,
                        p_reason),
                    (p_merchant_id, p_order_id, 'capture', p_capture_id, p_from_state, p_to_state, p_event, p_actor, '');
                v_claimed := true;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_c, coalesce((SELECT a.gateway_charge_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = v_o.current_attempt), '');
END
$$;
-- +goose StatementEnd

-- capture_settle.sql: the order's row is locked before the capture's, and
-- the guard and the new totals are read from the locked rows.
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

-- void_claim.sql: every rule is read from the order's row held locked
-- (AUTHORIZED with capture manual, nothing captured or being captured, no
-- other void in flight); a void marks the order voiding.
-- +goose StatementBegin
CREATE FUNCTION settle_claim_void(p_merchant_id text, p_order_id uuid, p_request_id text, p_void_id uuid,
    p_reason text, p_actor text, p_lease interval, p_authorized text, p_from_state text, p_to_state text,
    p_event text, p_create_event text)
RETURNS TABLE (claimed boolean, ord orders, vd voids, charge_id text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_v voids;
    v_claimed boolean := false;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = p_order_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_v FROM voids WHERE merchant_id = p_merchant_id AND request_id = p_request_id;
    IF NOT FOUND AND v_o.state = p_authorized AND v_o.capture_mode = 'manual'
        AND v_o.captured_minor = 0 AND v_o.capturing_minor = 0 AND NOT v_o.voiding
    THEN
        INSERT INTO voids (merchant_id, id, order_id, request_id, reason, actor, state, reconcile_at)
        VALUES (p_merchant_id, p_void_id, p_order_id, p_request_id, p_reason, p_actor, p_to_state, v_reconcile_at)
        ON CONFLICT (merchant_id, request_id) DO NOTHING
        RETURNING * INTO v_v;
        IF FOUND THEN
            UPDATE orders SET voiding = true
            WHERE merchant_id = p_merchant_id AND id = p_order_id
            RETURNING * INTO v_o;
            INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor,
                reason)
            VALUES (p_merchant_id, p_order_id, 'void', p_void_id, NULL, p_from_state, p_create_event, p_actor, p_reason),
                (p_merchant_id, p_order_id, 'void', p_void_id, p_from_state, p_to_state, p_event, p_actor, '');
            v_claimed := true;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_v, coalesce((SELECT a.gateway_charge_id FROM charge_attempts a
        WHERE a.merchant_id = p_merchant_id AND a.id = v_o.current_attempt), '');
END
$$;
-- +goose StatementEnd

-- void_settle.sql: the order's row is locked before the void's; a void
-- that succeeds or fails clears voiding, one in review keeps it.
-- +goose StatementBegin
CREATE FUNCTION settle_settle_void(p_merchant_id text, p_void_id uuid, p_from_state text, p_to_state text,
    p_outcome text, p_decline_code text, p_recheck_in interval, p_checked boolean, p_last_error text, p_event text,
    p_actor text, p_reason text, p_void_event text, p_voided_state text)
RETURNS TABLE (ord orders, vd voids) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_v voids;
    v_order_id uuid;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
    v_from text;
    v_to text;
BEGIN
    PERFORM settle_require_worker();
    SELECT order_id INTO v_order_id FROM voids WHERE merchant_id = p_merchant_id AND id = p_void_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_order_id FOR UPDATE;
    SELECT * INTO v_v FROM voids WHERE merchant_id = p_merchant_id AND id = p_void_id FOR UPDATE;
    IF v_v.state <> p_from_state THEN
        RETURN;
    END IF;
    v_reconcile_at := CASE WHEN p_to_state = 'VOIDING' THEN v_now + p_recheck_in END;
    v_updated_at := CASE WHEN p_to_state = 'VOIDING' THEN v_v.updated_at ELSE v_now END;
    v_settled_at := CASE WHEN p_to_state = 'VOIDING' THEN NULL ELSE v_now END;
    UPDATE voids SET state = p_to_state, outcome = p_outcome, decline_code = p_decline_code,
        reconcile_at = v_reconcile_at, reconcile_count = v_v.reconcile_count + p_checked::int,
        last_error = p_last_error, updated_at = v_updated_at, settled_at = v_settled_at
    WHERE merchant_id = p_merchant_id AND id = p_void_id
    RETURNING * INTO v_v;
    IF v_v.state IN ('SUCCEEDED', 'FAILED') THEN
        v_from := v_o.state;
        v_to := CASE WHEN v_v.state = 'SUCCEEDED' AND v_o.state = 'AUTHORIZED' THEN p_voided_state ELSE v_o.state END;
        v_updated_at := CASE WHEN v_to = v_from THEN v_o.updated_at ELSE v_now END;
        UPDATE orders SET voiding = false, state = v_to, updated_at = v_updated_at
        WHERE merchant_id = p_merchant_id AND id = v_order_id
        RETURNING * INTO v_o;
        IF v_to <> v_from THEN
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, void_id)
            VALUES (p_merchant_id, v_order_id, v_from, v_to, p_void_event, p_actor, p_reason, p_void_id);
        END IF;
    END IF;
    IF p_event <> '' THEN
        INSERT INTO hold_events (merchant_id, order_id, kind, operation_id, from_state, to_state, event, actor, reason)
        VALUES (p_merchant_id, v_order_id, 'void', p_void_id, p_from_state, v_v.state, p_event, p_actor, p_reason);
    END IF;
    RETURN QUERY SELECT v_o, v_v;
END
$$;
-- +goose StatementEnd

-- expire_hold.sql: the guard is checked on the row held locked.
-- +goose StatementBegin
CREATE FUNCTION settle_expire_hold(p_merchant_id text, p_order_id uuid, p_attempt_id uuid, p_to_state text,
    p_event text, p_actor text, p_reason text)
RETURNS TABLE (expired bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := now();
BEGIN
    PERFORM settle_require_worker();
    UPDATE orders SET state = p_to_state, reconcile_at = NULL, last_error = '', updated_at = v_now
    WHERE merchant_id = p_merchant_id AND id = p_order_id AND state = 'AUTHORIZED' AND current_attempt = p_attempt_id
        AND captured_minor = 0 AND capturing_minor = 0 AND NOT voiding;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0::bigint;
        RETURN;
    END IF;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
    VALUES (p_merchant_id, p_order_id, 'AUTHORIZED', p_to_state, p_event, p_actor, p_reason, p_attempt_id);
    RETURN QUERY SELECT 1::bigint;
END
$$;
-- +goose StatementEnd

-- On Citus, distribute the new functions by their merchant argument,
-- co-located with orders, as 00016 does.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_create_order(text,uuid,text,bigint,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,'
        'interval,text,text,text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_orders(text,uuid[],uuid[],text[],interval[],boolean[],text[],'
        'text[],text[],text[],text[],text[],text[],text[],bigint[],timestamptz[])', 'p_merchant_id',
        colocate_with => 'orders');
    PERFORM create_distributed_function('settle_claim_capture(text,uuid,text,uuid,bigint,boolean,text,text,interval,'
        'text[],text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_capture(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_claim_void(text,uuid,text,uuid,text,text,interval,text,text,text,'
        'text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_void(text,uuid,text,text,text,text,interval,boolean,text,'
        'text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_expire_hold(text,uuid,uuid,text,text,text,text)', 'p_merchant_id',
        colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The functions of the capture and void paths go; the charge path's take
-- their arguments of 00016 and 00017 again (their bodies there), and the
-- refunds' bodies are 00016's.
DROP FUNCTION settle_expire_hold(text, uuid, uuid, text, text, text, text);
DROP FUNCTION settle_settle_void(text, uuid, text, text, text, text, interval, boolean, text, text, text, text, text,
    text);
DROP FUNCTION settle_claim_void(text, uuid, text, uuid, text, text, interval, text, text, text, text, text);
DROP FUNCTION settle_settle_capture(text, uuid, text, text, text, text, text, interval, boolean, text, text, text,
    text, text, text, text, text);
DROP FUNCTION settle_claim_capture(text, uuid, text, uuid, bigint, boolean, text, text, interval, text[], text, text,
    text, text);
DROP FUNCTION settle_settle_orders(text, uuid[], uuid[], text[], interval[], boolean[], text[], text[], text[], text[],
    text[], text[], text[], text[], bigint[], timestamptz[]);
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text, text, text);
DROP FUNCTION settle_create_order(text, uuid, text, bigint, text, text, text, text, text, text);

-- +goose StatementBegin
CREATE FUNCTION settle_create_order(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_state text, p_event text)
RETURNS TABLE (created boolean, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway, p_state)
    ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
    RETURNING * INTO v_o;
    IF FOUND THEN
        INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
        VALUES (p_merchant_id, p_id, NULL, p_state, p_event, 'api');
        RETURN QUERY SELECT true, v_o;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, o FROM orders o
        WHERE o.merchant_id = p_merchant_id AND o.merchant_reference = p_merchant_reference;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION settle_create_claimed(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_to_state text, p_attempt_id uuid, p_lease interval,
    p_request_id text, p_from_state text, p_create_event text, p_claim_event text, p_actor text, p_customer text)
RETURNS TABLE (ord orders, att charge_attempts) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_a charge_attempts;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
        state, current_attempt, reconcile_at)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway,
        p_to_state, p_attempt_id, v_reconcile_at)
    ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
    RETURNING * INTO v_o;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor,
        currency)
    VALUES (p_attempt_id, p_id, p_merchant_id, p_request_id, p_payment_method, p_customer, p_amount_minor, p_currency)
    RETURNING * INTO v_a;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
    VALUES (p_merchant_id, p_id, NULL, p_from_state, p_create_event, p_actor, NULL),
        (p_merchant_id, p_id, p_from_state, p_to_state, p_claim_event, p_actor, p_attempt_id);
    RETURN QUERY SELECT v_o, v_a;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION settle_settle_orders(p_merchant_id text, p_order_id uuid[], p_attempt_id uuid[], p_to_state text[],
    p_recheck_in interval[], p_checked boolean[], p_last_error text[], p_outcome text[], p_decline_code text[],
    p_charge_id text[], p_event text[], p_actor text[], p_reason text[], p_from_state text[])
RETURNS TABLE (i bigint, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_st record;
    v_o orders;
    v_now timestamptz := now();
    v_reconcile_at timestamptz;
    v_updated_at timestamptz;
    v_settled_at timestamptz;
BEGIN
    PERFORM settle_require_worker();
    FOR v_st IN
        SELECT * FROM unnest(p_order_id, p_attempt_id, p_to_state, p_recheck_in, p_checked, p_last_error, p_outcome,
            p_decline_code, p_charge_id, p_event, p_actor, p_reason, p_from_state) WITH ORDINALITY
            AS st(order_id, attempt_id, to_state, recheck_in, checked, last_error, outcome, decline_code, charge_id,
                event, actor, reason, from_state, i)
        ORDER BY st.order_id
    LOOP
        SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = v_st.order_id FOR UPDATE;
        CONTINUE WHEN NOT FOUND OR v_o.state <> v_st.from_state
            OR v_o.current_attempt IS DISTINCT FROM v_st.attempt_id;
        v_reconcile_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN v_now + v_st.recheck_in END;
        v_updated_at := CASE WHEN v_st.to_state = v_st.from_state THEN v_o.updated_at ELSE v_now END;
        v_settled_at := CASE WHEN v_st.to_state IN ('CHARGING', 'REQUIRES_ACTION') THEN NULL ELSE v_now END;
        UPDATE orders SET state = v_st.to_state, reconcile_at = v_reconcile_at,
            reconcile_count = v_o.reconcile_count + v_st.checked::int, last_error = v_st.last_error,
            updated_at = v_updated_at
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION settle_claim_refund(p_merchant_id text, p_order_id uuid, p_request_id text, p_refund_id uuid,
    p_amount_minor bigint, p_reason text, p_actor text, p_lease interval, p_refundable text[], p_from_state text,
    p_to_state text, p_event text, p_create_event text)
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
        v_left := v_o.amount_minor - v_o.refunded_minor - v_o.refunding_minor;
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
CREATE OR REPLACE FUNCTION settle_settle_refund(p_merchant_id text, p_refund_id uuid, p_from_state text, p_to_state text,
    p_outcome text, p_decline_code text, p_gateway_refund_id text, p_recheck_in interval, p_checked boolean,
    p_last_error text, p_event text, p_actor text, p_reason text, p_partial_event text, p_partial_to text,
    p_full_event text, p_full_to text)
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
        v_full := v_r.state = 'SUCCEEDED' AND v_o.refunded_minor + v_r.amount_minor >= v_o.amount_minor;
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

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_create_order(text,uuid,text,bigint,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function(
        'settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,interval,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_orders(text,uuid[],uuid[],text[],interval[],boolean[],text[],'
        'text[],text[],text[],text[],text[],text[],text[])', 'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd
