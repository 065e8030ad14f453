-- +goose Up
-- settle_create_claimed (create_claimed.sql on Citus) records the attempt's
-- customer, as settle_claim does: a saved card's one-call charge is then
-- one commit too, and a taken request id creates nothing, where its create
-- and then its claim left a PENDING order behind.
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text);

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
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function(
        'settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,interval,text,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION settle_create_claimed(text, uuid, text, bigint, text, text, text, text, uuid, interval, text, text, text,
    text, text, text);

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

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    PERFORM create_distributed_function(
        'settle_create_claimed(text,uuid,text,bigint,text,text,text,text,uuid,interval,text,text,text,text,text)',
        'p_merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd
