-- The naive floor: the same three transactions as floor.sql, written the
-- way an ORM or a first draft would: BEGIN, one statement per row (read the
-- row, then write it), COMMIT. 3 commits and 16 round trips per order. As
-- in floor.sql, guards take the state read before as a parameter.
--
--   pgbench -M prepared -n -c C -j min(C,2) -T D -f bench/naive.sql DB

\set amount random(100, 100000)

-- Create (4 round trips).
BEGIN;
INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
VALUES (gen_random_uuid(), 'default', 'naive-' || gen_random_uuid(), :amount, 'GBP', 'tok_ok', 'instant', 'PENDING')
ON CONFLICT (merchant_id, merchant_reference) DO NOTHING
RETURNING id AS order_id, state AS order_state
\gset
INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
VALUES ('default', :order_id::uuid, NULL, 'PENDING', 'create', 'api');
COMMIT;

-- Claim (6 round trips): lock and read the order, then write.
BEGIN;
SELECT state AS order_state, payment_method, amount_minor, currency FROM orders
WHERE id = :order_id::uuid AND merchant_id = 'default'
FOR UPDATE
\gset
INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency)
VALUES (gen_random_uuid(), :order_id::uuid, 'default', 'req-' || :order_id, :payment_method, :amount_minor, :currency)
ON CONFLICT (merchant_id, request_id) DO NOTHING
RETURNING id AS attempt_id
\gset
UPDATE orders SET state = 'CHARGING', current_attempt = :attempt_id::uuid, reconcile_at = now() + interval '15 seconds',
	reconcile_count = 0, last_error = '', updated_at = now()
WHERE merchant_id = 'default' AND id = :order_id::uuid AND state = :order_state;
INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, attempt_id)
VALUES ('default', :order_id::uuid, 'PENDING', 'CHARGING', 'charge', 'api', :attempt_id::uuid);
COMMIT;

-- Settle (6 round trips): lock and read the order, then write.
BEGIN;
SELECT state AS order_state, current_attempt FROM orders
WHERE merchant_id = 'default' AND id = :order_id::uuid
FOR UPDATE
\gset
UPDATE orders SET state = 'PAID', reconcile_at = NULL, last_error = '', updated_at = now()
WHERE merchant_id = 'default' AND id = :order_id::uuid AND state = :order_state AND current_attempt = :attempt_id::uuid;
UPDATE charge_attempts SET outcome = 'succeeded', gateway_charge_id = 'ch_naive', settled_at = now()
WHERE merchant_id = 'default' AND id = :attempt_id::uuid;
INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor, reason, attempt_id)
VALUES ('default', :order_id::uuid, 'CHARGING', 'PAID', 'succeed', 'api', '', :attempt_id::uuid);
COMMIT;
