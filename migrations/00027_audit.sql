-- +goose Up
-- The gateway audit (issue #31): per merchant, gateway account and closed
-- window, the gateway's own records are matched with Settle's attempts,
-- orders, captures and refunds by our reference, in both directions
-- (internal/audit). Each run is recorded with its window, where it has got
-- to and what it found; each discrepancy is a finding, which an operator
-- resolves with a note. Nothing here changes an order: findings are never
-- fixed automatically.
--
-- An audit run. window_from and window_to bound the attempts Settle made
-- (created_at) that the run answers for; the gateway's records are listed
-- from margin before window_from to margin after window_to, so that a
-- record stamped by the gateway's clock a little before or after Settle's
-- is seen, and successive windows' listings overlap (findings are
-- deduplicated by audit_findings_key). phase and the cursor are the
-- checkpoint, written in the transaction that records what a page of the
-- listing found: a run that stopped (a crash, a deploy) resumes after the
-- last record it matched. The cursor keeps the gateway's creation time as
-- the gateway sent it (text, to the nanosecond: a timestamptz would round
-- it to the microsecond and resume before records already matched).
-- counts holds what the run found, by class. A gateway that offers no
-- listing makes the run not_covered, with the reason, never clean.
CREATE TABLE audit_runs (
    merchant_id     text NOT NULL,
    id              uuid NOT NULL,
    gateway         text NOT NULL,
    window_from     timestamptz NOT NULL,
    window_to       timestamptz NOT NULL,
    margin          interval NOT NULL,
    phase           text NOT NULL CHECK (phase IN ('charges', 'refunds', 'missing', 'done')),
    cursor_created  text NOT NULL DEFAULT '',
    cursor_id       text NOT NULL DEFAULT '',
    seen            bigint NOT NULL DEFAULT 0,
    counts          jsonb NOT NULL DEFAULT '{}',
    coverage        text NOT NULL CHECK (coverage IN ('covered', 'not_covered')),
    coverage_reason text NOT NULL DEFAULT '',
    actor           text NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (merchant_id, id),
    CONSTRAINT audit_runs_window_check CHECK (window_from < window_to),
    CONSTRAINT audit_runs_done_check CHECK (finished_at IS NULL OR phase = 'done')
);
-- One unfinished run per window: a run started again resumes it.
CREATE UNIQUE INDEX audit_runs_open_key ON audit_runs (merchant_id, gateway, window_from, window_to)
    WHERE finished_at IS NULL;
-- The schedule's next window starts where the account's last one ended.
CREATE INDEX audit_runs_window_idx ON audit_runs (merchant_id, gateway, window_to);

-- What a run has seen of the gateway's charges, while it runs: the sweep
-- for paid orders with no succeeded charge (MISSING_ON_GATEWAY) reads it
-- in SQL, so that the run's memory does not grow with its window. Its
-- rows are deleted when the run finishes.
CREATE TABLE audit_seen (
    merchant_id       text NOT NULL,
    run_id            uuid NOT NULL,
    gateway_charge_id text NOT NULL,
    attempt_id        uuid,
    outcome           text NOT NULL,
    PRIMARY KEY (merchant_id, run_id, gateway_charge_id)
);
CREATE INDEX audit_seen_attempt_idx ON audit_seen (merchant_id, run_id, attempt_id) WHERE outcome = 'succeeded';

-- A discrepancy. record_key is what makes one finding of what two
-- overlapping windows both see: the gateway's charge id (a refund's
-- finding names the charge it refunds, so that a charge's refunded total
-- and its refund records make one finding), or the attempt's id for a
-- paid order whose charge the gateway does not list. settle and
-- gateway_record are the two sides, as the run read them. last_run_id is
-- the latest run that saw it. An operator resolves a finding with a note
-- (resolved_at, actor); a resolved finding seen again stays resolved.
CREATE TABLE audit_findings (
    merchant_id       text NOT NULL,
    id                uuid NOT NULL DEFAULT gen_random_uuid(),
    run_id            uuid NOT NULL,
    last_run_id       uuid NOT NULL,
    gateway           text NOT NULL,
    class             text NOT NULL CHECK (class IN ('DUPLICATE', 'MISSING_IN_SETTLE', 'MISSING_ON_GATEWAY',
        'AMOUNT_MISMATCH', 'CURRENCY_MISMATCH', 'STATUS_MISMATCH', 'REFUND_MISMATCH', 'FOREIGN')),
    order_id          uuid,
    attempt_id        uuid,
    gateway_record_id text NOT NULL DEFAULT '',
    record_key        text NOT NULL,
    settle            jsonb,
    gateway_record    jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz,
    actor             text NOT NULL DEFAULT '',
    note              text NOT NULL DEFAULT '',
    PRIMARY KEY (merchant_id, id),
    CONSTRAINT audit_findings_key UNIQUE (merchant_id, gateway, class, record_key),
    CONSTRAINT audit_findings_resolved_check CHECK (resolved_at IS NULL OR actor <> '')
);
-- The review queue reads the open findings oldest first (00021's shape).
CREATE INDEX audit_findings_queue_idx ON audit_findings (merchant_id, created_at, id) WHERE resolved_at IS NULL;
CREATE INDEX audit_findings_run_idx ON audit_findings (merchant_id, last_run_id);

-- On Citus, distributed by merchant, co-located with orders: every
-- statement of the audit names its merchant and runs on its shard.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
    PERFORM create_distributed_table('audit_runs', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('audit_seen', 'merchant_id', colocate_with => 'orders');
    PERFORM create_distributed_table('audit_findings', 'merchant_id', colocate_with => 'orders');
END
$$;
-- +goose StatementEnd

-- The sweep reads a merchant's attempts at one gateway account by when
-- they were made. Created after the new tables are distributed: on
-- Citus, an index of a distributed table is built in parallel on its
-- shards, after which the transaction can distribute no table in
-- sequential mode.
CREATE INDEX charge_attempts_audit_idx ON charge_attempts (merchant_id, gateway, created_at);

-- +goose Down
DROP INDEX charge_attempts_audit_idx;
DROP TABLE audit_findings;
DROP TABLE audit_seen;
DROP TABLE audit_runs;
