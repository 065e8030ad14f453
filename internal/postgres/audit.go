package postgres

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/order"
)

// auditRunRow is an audit run as the audit statements select it.
type auditRunRow struct {
	MerchantID     string     `db:"merchant_id"`
	ID             string     `db:"id"`
	Gateway        string     `db:"gateway"`
	WindowFrom     time.Time  `db:"window_from"`
	WindowTo       time.Time  `db:"window_to"`
	MarginUS       int64      `db:"margin_us"`
	Phase          string     `db:"phase"`
	CursorCreated  string     `db:"cursor_created"`
	CursorID       string     `db:"cursor_id"`
	Seen           int64      `db:"seen"`
	Counts         string     `db:"counts"`
	Coverage       string     `db:"coverage"`
	CoverageReason string     `db:"coverage_reason"`
	Actor          string     `db:"actor"`
	StartedAt      time.Time  `db:"started_at"`
	FinishedAt     *time.Time `db:"finished_at"`
}

func (r auditRunRow) run() (audit.Run, error) {
	run := audit.Run{
		MerchantID: r.MerchantID, ID: r.ID, Gateway: r.Gateway, Window: audit.Window{From: r.WindowFrom, To: r.WindowTo},
		Margin: time.Duration(r.MarginUS) * time.Microsecond, Phase: audit.Phase(r.Phase), Seen: r.Seen,
		Covered: r.Coverage == "covered", NotCovered: r.CoverageReason, Actor: r.Actor, StartedAt: r.StartedAt,
		Counts: map[audit.Class]int64{},
	}
	if r.FinishedAt != nil {
		run.FinishedAt = *r.FinishedAt
	}
	if err := json.Unmarshal([]byte(r.Counts), &run.Counts); err != nil {
		return run, fmt.Errorf("audit run %s: counts: %w", r.ID, err)
	}
	if r.CursorCreated != "" {
		t, err := time.Parse(time.RFC3339Nano, r.CursorCreated)
		if err != nil {
			return run, fmt.Errorf("audit run %s: cursor: %w", r.ID, err)
		}
		run.Cursor = audit.Cursor{Created: t, ID: r.CursorID}
	}
	return run, nil
}

// cursorText is how audit_runs keeps a cursor's time: as the gateway sent
// it, to the nanosecond.
func cursorText(c audit.Cursor) string {
	if c.Created.IsZero() {
		return ""
	}
	return c.Created.UTC().Format(time.RFC3339Nano)
}

// foundRow is a finding as the matching statements return it.
type foundRow struct {
	Class string `db:"class"`
	New   bool   `db:"new"`
}

//go:embed sql/audit_start_run.sql
var auditStartRunSQL string

// StartRun implements audit.Store.
func (s *Store) StartRun(ctx context.Context, r audit.Run) (audit.Run, error) {
	coverage := "covered"
	if !r.Covered {
		coverage = "not_covered"
	}
	var row auditRunRow
	err := withTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
		row, err = queryOne[auditRunRow](ctx, tx, auditStartRunSQL, pgx.StrictNamedArgs{
			"merchant_id": r.MerchantID, "id": r.ID, "gateway": r.Gateway, "window_from": r.Window.From,
			"window_to": r.Window.To, "margin": r.Margin, "phase": string(r.Phase), "coverage": coverage,
			"coverage_reason": r.NotCovered, "actor": r.Actor,
		})
		if err != nil || row.Phase != string(audit.PhaseDone) {
			return err
		}
		// A run that is not covered is done as it starts.
		row.FinishedAt, err = finish(ctx, tx, r)
		return err
	})
	if err != nil {
		return audit.Run{}, err
	}
	return row.run()
}

//go:embed sql/audit_finish.sql
var auditFinishSQL string

// finish finishes the run r, done, in tx, and returns when.
func finish(ctx context.Context, tx pgx.Tx, r audit.Run) (*time.Time, error) {
	row, err := queryOne[struct {
		ID         string    `db:"id"`
		FinishedAt time.Time `db:"finished_at"`
	}](ctx, tx, auditFinishSQL, pgx.StrictNamedArgs{"merchant_id": r.MerchantID, "id": r.ID})
	if errors.Is(err, order.ErrNotFound) {
		return nil, errRunMoved
	}
	return &row.FinishedAt, err
}

//go:embed sql/audit_checkpoint.sql
var auditCheckpointSQL string

// errRunMoved means that another process moved the run's checkpoint
// first: this one's work is rolled back.
var errRunMoved = errors.New("the audit run was moved on by another process")

// checkpoint moves r's checkpoint to next (with its seen and counts) in
// tx, guarded by r's own.
func checkpoint(ctx context.Context, tx pgx.Tx, r, next audit.Run) error {
	counts, err := json.Marshal(next.Counts)
	if err != nil {
		return err
	}
	_, err = queryOne[struct {
		ID string `db:"id"`
	}](ctx, tx, auditCheckpointSQL, pgx.StrictNamedArgs{
		"merchant_id": r.MerchantID, "id": r.ID, "phase": string(next.Phase), "cursor_created": cursorText(next.Cursor),
		"cursor_id": next.Cursor.ID, "seen": next.Seen, "counts": string(counts), "from_phase": string(r.Phase),
		"from_created": cursorText(r.Cursor), "from_id": r.Cursor.ID,
	})
	if errors.Is(err, order.ErrNotFound) {
		return errRunMoved
	}
	return err
}

// advance returns r moved past page, whose last record is at last, with
// what was found added to its counts.
func advance(r audit.Run, n int, last audit.Cursor, found []audit.Found) audit.Run {
	next := r
	next.Cursor, next.Seen = last, r.Seen+int64(n)
	next.Counts = make(map[audit.Class]int64, len(r.Counts))
	for k, v := range r.Counts {
		next.Counts[k] = v
	}
	for _, f := range found {
		next.Counts[f.Class]++
	}
	return next
}

// match runs a matching statement and then the checkpoint from r to the
// run next computes of what it found, in one transaction, finishing the
// run when next is done.
func (s *Store) match(ctx context.Context, r audit.Run, sql string, args pgx.StrictNamedArgs,
	next func([]audit.Found) audit.Run) (audit.Run, []audit.Found, error) {
	var (
		out   audit.Run
		found []audit.Found
	)
	err := withTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := queryAll[foundRow](ctx, tx, sql, args)
		if err != nil {
			return err
		}
		found = make([]audit.Found, len(rows))
		for i, f := range rows {
			found[i] = audit.Found{Class: audit.Class(f.Class), New: f.New}
		}
		out = next(found)
		if err := checkpoint(ctx, tx, r, out); err != nil || out.Phase != audit.PhaseDone {
			return err
		}
		at, err := finish(ctx, tx, out)
		if at != nil {
			out.FinishedAt = *at
		}
		return err
	})
	if err != nil {
		return r, nil, err
	}
	return out, found, nil
}

// settleRefs is each of a page's references that could be Settle's (an
// attempt's or a refund's id: a UUID in its 36-character form), and nil
// for the others, which the matching statements take as no one's.
func settleRefs(refs []string) []*string {
	out := make([]*string, len(refs))
	for i := range refs {
		if len(refs[i]) == 36 && uuid.Validate(refs[i]) == nil {
			out[i] = &refs[i]
		}
	}
	return out
}

//go:embed sql/audit_match_charges.sql
var auditMatchChargesSQL string

// MatchCharges implements audit.Store.
func (s *Store) MatchCharges(ctx context.Context, r audit.Run, page []order.GatewayCharge, charged []order.State) (audit.Run, []audit.Found, error) {
	n := len(page)
	if n == 0 {
		return r, nil, nil
	}
	var (
		ids, refs, currencies, outcomes, holds, created = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		amounts, captured, refunded = make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for i, c := range page {
		ids[i], refs[i], currencies[i], outcomes[i], holds[i] = c.ID, c.Reference, c.Amount.Currency, string(c.Outcome), string(c.Hold)
		created[i] = c.Created.UTC().Format(time.RFC3339Nano)
		amounts[i], captured[i], refunded[i] = c.Amount.AmountMinor, c.Captured, c.Refunded
	}
	last := audit.Cursor{Created: page[n-1].Created, ID: page[n-1].ID}
	return s.match(ctx, r, auditMatchChargesSQL, pgx.StrictNamedArgs{
		"merchant_id": r.MerchantID, "run_id": r.ID, "gateway": r.Gateway, "charged": states(charged),
		"id": ids, "reference": refs, "amount_minor": amounts, "currency": currencies, "outcome": outcomes,
		"hold": holds, "captured_minor": captured, "refunded_minor": refunded, "created": created,
		"settle_ref": settleRefs(refs),
	}, func(found []audit.Found) audit.Run { return advance(r, n, last, found) })
}

//go:embed sql/audit_match_refunds.sql
var auditMatchRefundsSQL string

// MatchRefunds implements audit.Store.
func (s *Store) MatchRefunds(ctx context.Context, r audit.Run, page []order.GatewayRefund) (audit.Run, []audit.Found, error) {
	n := len(page)
	if n == 0 {
		return r, nil, nil
	}
	var (
		ids, refs, chargeIDs, chargeRefs = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		currencies, outcomes, created    = make([]string, n), make([]string, n), make([]string, n)
		amounts                          = make([]int64, n)
	)
	for i, rf := range page {
		ids[i], refs[i], chargeIDs[i], chargeRefs[i] = rf.ID, rf.Reference, rf.ChargeID, rf.ChargeReference
		currencies[i], outcomes[i], amounts[i] = rf.Amount.Currency, string(rf.Outcome), rf.Amount.AmountMinor
		created[i] = rf.Created.UTC().Format(time.RFC3339Nano)
	}
	last := audit.Cursor{Created: page[n-1].Created, ID: page[n-1].ID}
	return s.match(ctx, r, auditMatchRefundsSQL, pgx.StrictNamedArgs{
		"merchant_id": r.MerchantID, "run_id": r.ID, "gateway": r.Gateway, "id": ids, "reference": refs,
		"charge_id": chargeIDs, "charge_reference": chargeRefs, "amount_minor": amounts, "currency": currencies,
		"outcome": outcomes, "created": created, "settle_ref": settleRefs(refs), "charge_settle_ref": settleRefs(chargeRefs),
	}, func(found []audit.Found) audit.Run { return advance(r, n, last, found) })
}

// NextPhase implements audit.Store.
func (s *Store) NextPhase(ctx context.Context, r audit.Run, p audit.Phase) (audit.Run, error) {
	next := r
	next.Phase, next.Cursor = p, audit.Cursor{}
	err := withTx(ctx, s.pool, func(tx pgx.Tx) error { return checkpoint(ctx, tx, r, next) })
	if err != nil {
		return r, err
	}
	return next, nil
}

//go:embed sql/audit_missing.sql
var auditMissingSQL string

//go:embed sql/audit_forget_seen.sql
var auditForgetSeenSQL string

// FinishRun implements audit.Store.
func (s *Store) FinishRun(ctx context.Context, r audit.Run, charged []order.State) (audit.Run, []audit.Found, error) {
	out, found, err := s.match(ctx, r, auditMissingSQL, pgx.StrictNamedArgs{
		"merchant_id": r.MerchantID, "run_id": r.ID, "gateway": r.Gateway, "window_from": r.Window.From,
		"window_to": r.Window.To, "charged": states(charged),
	}, func(found []audit.Found) audit.Run {
		next := advance(r, 0, audit.Cursor{}, found)
		next.Phase = audit.PhaseDone
		return next
	})
	if err != nil {
		return r, nil, err
	}
	// What the run saw is needed no more. A failure here leaves rows that
	// no statement reads again; the next run's are its own.
	if err := retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, auditForgetSeenSQL, namedArgs(pgx.StrictNamedArgs{"merchant_id": r.MerchantID, "run_id": r.ID}))
		return err
	}); err != nil {
		return out, found, fmt.Errorf("forget what run %s saw: %w", r.ID, err)
	}
	return out, found, nil
}

//go:embed sql/audit_last_run.sql
var auditLastRunSQL string

// LastRun implements audit.Store.
func (s *Store) LastRun(ctx context.Context, merchantID, gateway string) (audit.Run, error) {
	var row auditRunRow
	err := retry(ctx, func() (err error) {
		row, err = queryOne[auditRunRow](ctx, s.pool, auditLastRunSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "gateway": gateway})
		return err
	})
	if err != nil {
		return audit.Run{}, err
	}
	return row.run()
}

//go:embed sql/audit_runs.sql
var auditRunsSQL string

// Runs implements audit.Store.
func (s *Store) Runs(ctx context.Context, merchantID string, limit int) ([]audit.Run, error) {
	var rows []auditRunRow
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[auditRunRow](ctx, s.pool, auditRunsSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "limit": limit})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]audit.Run, len(rows))
	for i, row := range rows {
		if out[i], err = row.run(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// findingRow is a finding as audit_findings.sql selects it.
type findingRow struct {
	MerchantID      string     `db:"merchant_id"`
	ID              string     `db:"id"`
	RunID           string     `db:"run_id"`
	Gateway         string     `db:"gateway"`
	Class           string     `db:"class"`
	OrderID         string     `db:"order_id"`
	AttemptID       string     `db:"attempt_id"`
	GatewayRecordID string     `db:"gateway_record_id"`
	Settle          string     `db:"settle"`
	GatewayRecord   string     `db:"gateway_record"`
	CreatedAt       time.Time  `db:"created_at"`
	ResolvedAt      *time.Time `db:"resolved_at"`
	Actor           string     `db:"actor"`
	Note            string     `db:"note"`
}

func (r findingRow) finding() audit.Finding {
	f := audit.Finding{MerchantID: r.MerchantID, ID: r.ID, RunID: r.RunID, Gateway: r.Gateway, Class: audit.Class(r.Class),
		OrderID: r.OrderID, AttemptID: r.AttemptID, GatewayRecordID: r.GatewayRecordID,
		Settle: json.RawMessage(r.Settle), GatewayRecord: json.RawMessage(r.GatewayRecord), CreatedAt: r.CreatedAt,
		Actor: order.Actor(r.Actor), Note: r.Note}
	if r.ResolvedAt != nil {
		f.ResolvedAt = *r.ResolvedAt
	}
	return f
}

//go:embed sql/audit_findings.sql
var auditFindingsSQL string

// Findings implements audit.Store.
func (s *Store) Findings(ctx context.Context, merchantID, runID string) ([]audit.Finding, error) {
	var rows []findingRow
	err := retry(ctx, func() (err error) {
		rows, err = queryAll[findingRow](ctx, s.pool, auditFindingsSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "run_id": runID})
		return err
	})
	out := make([]audit.Finding, len(rows))
	for i, row := range rows {
		out[i] = row.finding()
	}
	return out, err
}

// states is ss as text, for a statement's text[] argument.
func states(ss []order.State) []string {
	out := make([]string, len(ss))
	for i, st := range ss {
		out[i] = string(st)
	}
	return out
}
