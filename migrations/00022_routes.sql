-- +goose Up
-- Orders charged on several gateways, with a cascade only after a proven
-- non-charge (issue #30, order/cascade.go).
--
-- An order created with routes keeps them, in the client's order, as a
-- JSON array of {"gateway", "payment_method"} (NULL: the order's one route
-- is its gateway and payment method, as before). Each attempt records the
-- gateway it was sent to; when it followed another attempt in a cascade,
-- that attempt's proven outcome (cascade_after: "<gateway> <outcome>[:
-- <decline code>]"); and the routes skipped as ineligible for it, with why
-- (skipped). The order's gateway is its current attempt's: the claim sets
-- both in one statement, so that the reconciler, lookups, captures, voids
-- and refunds, which act on the current attempt, reach the gateway that
-- attempt was sent to. Attempts older than this migration are given their
-- order's gateway, which no cascade has changed.
--
-- The Citus functions of the create and claim statements take the new
-- values (so they are dropped and created again), before the tables
-- change: Citus creates a function on its workers only before any change
-- to a distributed table in a transaction (00014). On Citus the columns
-- are added to the distributed tables' shards by the same statements.
DROP FUNCTION settle_create_order(text, uuid, text, bigint, text, text, text, text, text, text);
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text, text, text);
DROP FUNCTION settle_claim(text, uuid, text, uuid, text, text, text, text, interval, text, text);

-- create_order.sql, with the order's routes.
-- +goose StatementBegin
CREATE FUNCTION settle_create_order(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_state text, p_event text, p_capture_mode text,
    p_routes text)
RETURNS TABLE (created boolean, ord orders) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state,
        capture_mode, routes)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway, p_state,
        p_capture_mode, nullif(p_routes, '')::jsonb)
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

-- claim.sql, with the attempt's gateway (the order's when empty), which the
-- order takes, its cascade, its skipped routes and the event's reason.
-- +goose StatementBegin
CREATE FUNCTION settle_claim(p_merchant_id text, p_order_id uuid, p_request_id text, p_attempt_id uuid,
    p_payment_method text, p_customer text, p_from_state text, p_to_state text, p_lease interval, p_event text,
    p_actor text, p_gateway text, p_cascade_after text, p_skipped text, p_reason text, p_check_follows boolean,
    p_follows text)
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
    IF NOT FOUND AND v_o.state = p_from_state
        AND (NOT p_check_follows OR coalesce(v_o.current_attempt::text, '') = p_follows) THEN
        INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor,
            currency, gateway, cascade_after, skipped)
        VALUES (p_attempt_id, p_order_id, p_merchant_id, p_request_id,
            coalesce(nullif(p_payment_method, ''), v_o.payment_method), p_customer, v_o.amount_minor, v_o.currency,
            coalesce(nullif(p_gateway, ''), v_o.gateway), p_cascade_after, p_skipped)
        ON CONFLICT (merchant_id, request_id) DO NOTHING
        RETURNING * INTO v_a;
        IF FOUND THEN
            UPDATE orders SET state = p_to_state, gateway = v_a.gateway, current_attempt = p_attempt_id,
                reconcile_at = v_reconcile_at, reconcile_count = 0, last_error = '', updated_at = v_now
            WHERE merchant_id = p_merchant_id AND id = p_order_id
            RETURNING * INTO v_o;
            INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id, reason)
            VALUES (p_merchant_id, p_order_id, p_from_state, p_to_state, p_event, p_actor, p_attempt_id, p_reason);
            v_claimed := true;
        END IF;
    END IF;
    RETURN QUERY SELECT v_claimed, v_o, v_a;
END
$$;
-- +goose StatementEnd

-- create_claimed_order.sql, with the order's routes and the attempt's
-- gateway and skipped routes.
-- +goose StatementBegin
CREATE FUNCTION settle_create_claimed(p_merchant_id text, p_id uuid, p_merchant_reference text, p_amount_minor bigint,
    p_currency text, p_payment_method text, p_gateway text, p_to_state text, p_attempt_id uuid, p_lease interval,
    p_request_id text, p_from_state text, p_create_event text, p_claim_event text, p_actor text, p_customer text,
    p_capture_mode text, p_routes text, p_skipped text)
RETURNS TABLE (ord orders, att charge_attempts) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_o orders;
    v_a charge_attempts;
    v_reconcile_at timestamptz := now() + p_lease;
BEGIN
    PERFORM settle_require_worker();
    INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway,
        state, current_attempt, reconcile_at, capture_mode, routes)
    VALUES (p_id, p_merchant_id, p_merchant_reference, p_amount_minor, p_currency, p_payment_method, p_gateway,
        p_to_state, p_attempt_id, v_reconcile_at, p_capture_mode, nullif(p_routes, '')::jsonb)
    ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
    RETURNING * INTO v_o;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, customer, amount_minor,
        currency, gateway, skipped)
    VALUES (p_attempt_id, p_id, p_merchant_id, p_request_id, p_payment_method, p_customer, p_amount_minor, p_currency,
        p_gateway, p_skipped)
    RETURNING * INTO v_a;
    INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
    VALUES (p_merchant_id, p_id, NULL, p_from_state, p_create_event, p_actor, NULL),
        (p_merchant_id, p_id, p_from_state, p_to_state, p_claim_event, p_actor, p_attempt_id);
    RETURN QUERY SELECT v_o, v_a;
END
$$;
-- +goose StatementEnd

ALTER TABLE orders ADD COLUMN routes jsonb;
ALTER TABLE charge_attempts ADD COLUMN gateway text NOT NULL DEFAULT '',
    ADD COLUMN cascade_after text NOT NULL DEFAULT '', ADD COLUMN skipped text NOT NULL DEFAULT '';
UPDATE charge_attempts a SET gateway = o.gateway
FROM orders o WHERE o.merchant_id = a.merchant_id AND o.id = a.order_id;

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function(
        'settle_create_order(text,uuid,text,bigint,text,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_claim(text,uuid,text,uuid,text,text,text,text,interval,text,text,'
        'text,text,text,text,boolean,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,'
        'interval,text,text,text,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The functions take their arguments of 00016 and 00019 again (their bodies
-- there), and the columns go.
DROP FUNCTION settle_create_order(text, uuid, text, bigint, text, text, text, text, text, text, text);
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text, text, text, text, text);
DROP FUNCTION settle_claim(text, uuid, text, uuid, text, text, text, text, interval, text, text, text, text, text,
    text, boolean, text);

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

ALTER TABLE charge_attempts DROP COLUMN gateway, DROP COLUMN cascade_after, DROP COLUMN skipped;
ALTER TABLE orders DROP COLUMN routes;

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function('settle_create_order(text,uuid,text,bigint,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_claim(text,uuid,text,uuid,text,text,text,text,interval,text,text)',
        'p_merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_function('settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,'
        'interval,text,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd
