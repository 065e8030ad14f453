-- +goose Up
-- The checkout path's writes as functions that Citus runs whole on the
-- worker that holds the merchant's shard (function call delegation).
--
-- Citus plans a statement whose CTEs insert rows (every Settle statement
-- that appends history) as several distributed steps, each a round trip
-- from the coordinator with its result pulled back, and holds a shard lock
-- meanwhile: measured 10-50 ms per statement, and 3 orders/s. It router-plans
-- only statements whose CTEs select, update or delete. A call
-- SELECT ... FROM f(@merchant_id, ...) of a function distributed by its
-- merchant argument, co-located with orders, is instead sent as it is to
-- that merchant's worker, where each statement of the body is a
-- single-shard statement on local shards: one round trip, one local commit.
-- Running there, the body also takes its identity values and transaction id
-- from that worker, so that a merchant's events are numbered by one node
-- (ListEvents' cursor compares them).
--
-- Each function is the Citus form of a statement in
-- internal/postgres/sql/ (named beside it) and must do what that statement
-- does; the store's tests run on both engines. They are plain PL/pgSQL, one
-- simple statement at a time: the row lock is taken first, and each later
-- statement reads the latest committed versions (READ COMMITTED), so the
-- guards read the locked rows as the statements' do. They are created on
-- plain PostgreSQL too, where Settle does not call them (its one statement
-- is cheaper there), so that one migration path serves both engines.
--
-- Each returns whole rows (orders, charge_attempts, refunds); the calls in
-- sql/citus_*.sql select the columns the statements do. Variables are
-- prefixed v_ and parameters p_, and a name that is also a column's means
-- the column (#variable_conflict use_column). Times are computed into
-- variables: Citus refuses a stable function applied to a column in an
-- UPDATE's SET list.

-- Every function first checks that Citus delegated its call. A call that
-- Citus did not delegate runs on the coordinator, where its single-shard
-- statements still work but draw identity values and transaction ids from
-- the coordinator: a merchant's history would then be numbered by two
-- nodes, out of order. Citus 13.2.2 stops delegating on a connection for
-- good after it has failed to plan certain statements with their CTEs
-- inlined (it loses count of its recursive planning); such a call fails
-- with SQLSTATE SE001, and the store retries it on another connection.
-- +goose StatementBegin
CREATE FUNCTION settle_require_worker() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF citus_is_coordinator() THEN
        RAISE EXCEPTION 'a Settle function ran on the Citus coordinator: its call was not delegated to a worker'
            USING ERRCODE = 'SE001';
    END IF;
END
$$;
-- +goose StatementEnd

-- create_order.sql
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

-- claim.sql: the guard is checked on the row held locked.
-- +goose StatementBegin
CREATE FUNCTION settle_claim(p_merchant_id text, p_order_id uuid, p_request_id text, p_attempt_id uuid,
    p_payment_method text, p_customer text, p_from_state text, p_to_state text, p_lease interval, p_event text, p_actor text)
RETURNS TABLE (claimed boolean, ord orders, att charge_attempts) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_a charge_attempts;
    v_claimed boolean := false;
    v_reconcile_at timestamptz := now() + p_lease;
    v_now timestamptz := now();
BEGIN
    PERFORM settle_require_worker();
    SELECT * INTO v_o FROM orders WHERE merchant_id = p_merchant_id AND id = p_order_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO v_a FROM charge_attempts WHERE merchant_id = p_merchant_id AND request_id = p_request_id;
    IF NOT FOUND AND v_o.state = p_from_state THEN
        INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor,
            currency)
        VALUES (p_attempt_id, p_order_id, p_merchant_id, p_request_id,
            coalesce(nullif(p_payment_method, ''), v_o.payment_method), p_customer, v_o.amount_minor, v_o.currency)
        ON CONFLICT (merchant_id, request_id) DO NOTHING
        RETURNING * INTO v_a;
        IF FOUND THEN
            UPDATE orders SET state = p_to_state, current_attempt = p_attempt_id, reconcile_at = v_reconcile_at,
                reconcile_count = 0, last_error = '', updated_at = v_now
            WHERE merchant_id = p_merchant_id AND id = p_order_id
            RETURNING * INTO v_o;
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
            VALUES (p_merchant_id, p_order_id, p_from_state, p_to_state, p_event, p_actor, p_attempt_id);
            v_claimed := true;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_a;
END
$$;
-- +goose StatementEnd

-- create_claimed.sql. No row when the reference is taken; a request id
-- that is taken fails the call (charge_attempts_request_key).
-- +goose StatementBegin
CREATE FUNCTION settle_create_claimed(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_to_state text, p_attempt_id uuid, p_lease interval,
    p_request_id text, p_from_state text, p_create_event text, p_claim_event text, p_actor text)
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
    INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
    VALUES (p_attempt_id, p_id, p_merchant_id, p_request_id, p_payment_method, p_amount_minor, p_currency)
    RETURNING * INTO v_a;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
    VALUES (p_merchant_id, p_id, NULL, p_from_state, p_create_event, p_actor, NULL),
        (p_merchant_id, p_id, p_from_state, p_to_state, p_claim_event, p_actor, p_attempt_id);
    RETURN QUERY SELECT v_o, v_a;
END
$$;
-- +goose StatementEnd

-- settle.sql, for one merchant's settlements (element i of each array is
-- the i-th; the row returned for it carries i). The orders are locked in id
-- order, as settle.sql locks them, so that two calls settling overlapping
-- sets wait for each other instead of deadlocking.
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

-- transition.sql: a transition decided in Go on the order that the
-- caller's transaction holds locked (lock_order.sql). It is delegated
-- inside that transaction (force_delegation), to the worker that holds the
-- lock.
-- +goose StatementBegin
CREATE FUNCTION settle_transition(p_merchant_id text, p_id uuid, p_from_state text, p_to_state text, p_outcome text,
    p_decline_code text, p_charge_id text, p_event text, p_actor text, p_reason text)
RETURNS SETOF orders LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_now timestamptz := now();
BEGIN
    PERFORM settle_require_worker();
    UPDATE orders SET state = p_to_state, reconcile_at = NULL, updated_at = v_now
    WHERE merchant_id = p_merchant_id AND id = p_id AND state = p_from_state
    RETURNING * INTO v_o;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_outcome <> '' THEN
        UPDATE charge_attempts SET outcome = p_outcome, decline_code = p_decline_code, gateway_charge_id = p_charge_id,
            settled_at = v_now
        WHERE merchant_id = p_merchant_id AND id = v_o.current_attempt;
    END IF;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
    VALUES (p_merchant_id, p_id, p_from_state, p_to_state, p_event, p_actor, p_reason, v_o.current_attempt);
    RETURN NEXT v_o;
END
$$;
-- +goose StatementEnd

-- refund_claim.sql: what is left to refund is read from the order's row
-- held locked. The amount guard is the line that compares with v_left.
-- +goose StatementBegin
CREATE FUNCTION settle_claim_refund(p_merchant_id text, p_order_id uuid, p_request_id text, p_refund_id uuid,
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

-- refund_settle.sql: the order's row is locked before the refund's, and the
-- guard and the new totals are read from the locked rows.
-- +goose StatementBegin
CREATE FUNCTION settle_settle_refund(p_merchant_id text, p_refund_id uuid, p_from_state text, p_to_state text,
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

-- record_gateway_event.sql, without its notification: pg_notify would fire
-- on the worker, where no reconciler listens (the reconcilers' next poll
-- finds the order due).
-- +goose StatementBegin
CREATE FUNCTION settle_record_gateway_event(p_merchant_id text, p_attempt_id uuid, p_gateway text, p_event_id text,
    p_event_type text, p_object_id text, p_succeeded boolean)
RETURNS TABLE (result text, order_id text, attempt_id text, woken bigint, raised bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_order_id uuid;
    v_o orders;
    v_result text;
    v_woken bigint := 0;
    v_raised bigint := 0;
    v_now timestamptz := now();
    v_due timestamptz;
BEGIN
    PERFORM settle_require_worker();
    SELECT a.order_id INTO v_order_id FROM charge_attempts a
    WHERE a.merchant_id = p_merchant_id AND a.id = p_attempt_id;
    IF FOUND THEN
        SELECT * INTO v_o FROM orders o WHERE o.merchant_id = p_merchant_id AND o.id = v_order_id FOR UPDATE;
    END IF;
    v_result := CASE
        WHEN v_o.id IS NULL THEN 'unknown_object'
        WHEN v_o.state IN ('CHARGING', 'REQUIRES_ACTION', 'NEEDS_REVIEW') AND v_o.current_attempt = p_attempt_id
            THEN 'woken'
        WHEN p_succeeded AND NOT (v_o.state IN ('PAID', 'PARTIALLY_REFUNDED', 'REFUNDED')
            AND v_o.current_attempt = p_attempt_id) THEN 'review'
        ELSE 'ignored' END;
    INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, attempt_id, order_id, result)
    VALUES (p_merchant_id, p_gateway, p_event_id, p_event_type, p_object_id,
        CASE WHEN v_o.id IS NULL THEN NULL ELSE p_attempt_id END, v_o.id, v_result)
    ON CONFLICT (merchant_id, gateway, event_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'duplicate'::text, ''::text, ''::text, 0::bigint, 0::bigint;
        RETURN;
    END IF;
    IF v_result = 'woken' THEN
        v_due := least(v_o.reconcile_at, v_now);
        UPDATE orders SET reconcile_at = v_due WHERE merchant_id = p_merchant_id AND id = v_o.id;
        v_woken := 1;
    ELSIF v_result = 'review' THEN
        INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
        VALUES (p_merchant_id, 'possible_double_charge', v_o.id, p_attempt_id, p_gateway, p_event_id)
        ON CONFLICT (merchant_id, attempt_id, kind) DO NOTHING;
        GET DIAGNOSTICS v_raised = ROW_COUNT;
    END IF;
    RETURN QUERY SELECT v_result, coalesce(v_o.id::text, ''),
        CASE WHEN v_o.id IS NULL THEN '' ELSE p_attempt_id::text END, v_woken, v_raised;
END
$$;
-- +goose StatementEnd

-- On Citus, distribute them by their merchant argument, co-located with
-- orders. settle_transition is delegated inside the caller's transaction,
-- which has locked the order on that worker already.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    -- On every node, called from each function below.
    PERFORM create_distributed_function('settle_require_worker()');
    PERFORM create_distributed_function('settle_create_order(text,uuid,text,bigint,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_claim(text,uuid,text,uuid,text,text,text,text,interval,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function(
        'settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,interval,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_orders(text,uuid[],uuid[],text[],interval[],boolean[],text[],'
        'text[],text[],text[],text[],text[],text[],text[])', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_transition(text,uuid,text,text,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders', force_delegation => true);
    PERFORM create_distributed_function('settle_claim_refund(text,uuid,text,uuid,bigint,text,text,interval,text[],'
        'text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_settle_refund(text,uuid,text,text,text,text,text,interval,boolean,'
        'text,text,text,text,text,text,text,text)', 'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_record_gateway_event(text,uuid,text,text,text,text,boolean)',
        'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION settle_record_gateway_event(text, uuid, text, text, text, text, boolean);
DROP FUNCTION settle_settle_refund(text, uuid, text, text, text, text, text, interval, boolean, text, text, text, text,
    text, text, text, text);
DROP FUNCTION settle_claim_refund(text, uuid, text, uuid, bigint, text, text, interval, text[], text, text, text, text);
DROP FUNCTION settle_transition(text, uuid, text, text, text, text, text, text, text, text);
DROP FUNCTION settle_settle_orders(text, uuid[], uuid[], text[], interval[], boolean[], text[], text[], text[], text[],
    text[], text[], text[], text[]);
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text);
DROP FUNCTION settle_claim(text, uuid, text, uuid, text, text, text, text, interval, text, text);
DROP FUNCTION settle_create_order(text, uuid, text, bigint, text, text, text, text, text);
DROP FUNCTION settle_require_worker();
