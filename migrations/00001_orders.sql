-- +goose Up
CREATE TABLE orders (
    id                 uuid PRIMARY KEY,
    merchant_id        text NOT NULL,
    merchant_reference text NOT NULL,
    amount_minor       bigint NOT NULL CHECK (amount_minor > 0),
    currency           text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payment_method     text NOT NULL,
    gateway            text NOT NULL,
    state              text NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'CHARGING', 'PAID', 'CANCELED', 'NEEDS_REVIEW')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT orders_merchant_reference_key UNIQUE (merchant_id, merchant_reference)
);

-- +goose Down
DROP TABLE orders;
