package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// The store of captures and voids (order.HoldStore): the refunds' shape,
// one statement for each claim and each settle, in each engine's form
// (on Citus, a call of one of migration 00019's functions).

// captureRow is a capture as the statements select it: its columns
// prefixed capture_, as refundRow's are.
type captureRow struct {
	ID               string     `db:"capture_id"`
	MerchantID       string     `db:"capture_merchant_id"`
	OrderID          string     `db:"capture_order_id"`
	RequestID        string     `db:"capture_request_id"`
	RequestedMinor   int64      `db:"capture_requested_minor"`
	AmountMinor      int64      `db:"capture_amount_minor"`
	Currency         string     `db:"capture_currency"`
	Final            bool       `db:"capture_final"`
	Reason           string     `db:"capture_reason"`
	Actor            string     `db:"capture_actor"`
	State            string     `db:"capture_state"`
	Outcome          string     `db:"capture_outcome"`
	DeclineCode      string     `db:"capture_decline_code"`
	GatewayCaptureID string     `db:"capture_gateway_capture_id"`
	ReconcileAt      *time.Time `db:"capture_reconcile_at"`
	ReconcileCount   int        `db:"capture_reconcile_count"`
	LastError        string     `db:"capture_last_error"`
	CreatedAt        time.Time  `db:"capture_created_at"`
	UpdatedAt        time.Time  `db:"capture_updated_at"`
}

func (r captureRow) capture() order.Capture {
	c := order.Capture{
		ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, RequestID: r.RequestID, Requested: r.RequestedMinor,
		Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor}, Final: r.Final, Reason: r.Reason,
		Actor: order.Actor(r.Actor), State: order.CaptureState(r.State), Outcome: order.Outcome(r.Outcome),
		DeclineCode: r.DeclineCode, GatewayCaptureID: r.GatewayCaptureID, ReconcileCount: r.ReconcileCount,
		LastError: r.LastError, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ReconcileAt != nil {
		c.ReconcileAt = *r.ReconcileAt
	}
	return c
}

// voidRow is a void as the statements select it, its columns prefixed
// void_.
type voidRow struct {
	ID             string     `db:"void_id"`
	MerchantID     string     `db:"void_merchant_id"`
	OrderID        string     `db:"void_order_id"`
	RequestID      string     `db:"void_request_id"`
	Reason         string     `db:"void_reason"`
	Actor          string     `db:"void_actor"`
	State          string     `db:"void_state"`
	Outcome        string     `db:"void_outcome"`
	DeclineCode    string     `db:"void_decline_code"`
	ReconcileAt    *time.Time `db:"void_reconcile_at"`
	ReconcileCount int        `db:"void_reconcile_count"`
	LastError      string     `db:"void_last_error"`
	CreatedAt      time.Time  `db:"void_created_at"`
	UpdatedAt      time.Time  `db:"void_updated_at"`
}

func (r voidRow) void() order.Void {
	v := order.Void{
		ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, RequestID: r.RequestID, Reason: r.Reason,
		Actor: order.Actor(r.Actor), State: order.VoidState(r.State), Outcome: order.Outcome(r.Outcome),
		DeclineCode: r.DeclineCode, ReconcileCount: r.ReconcileCount, LastError: r.LastError,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.ReconcileAt != nil {
		v.ReconcileAt = *r.ReconcileAt
	}
	return v
}

//go:embed sql/capture_claim.sql
var captureClaimSQL string

// captureClaimRow is what capture_claim.sql returns; a capture ID of ”
// means no capture.
type captureClaimRow struct {
	Claimed  bool   `db:"claimed"`
	ChargeID string `db:"charge_id"`
	refundedOrderRow
	captureRow
}

// capturableStates are the states the capture claim admits a capture in.
var capturableStates = statesWhere(order.State.Capturable)

// ClaimCapture implements order.HoldStore. As ClaimRefund, a claim that
// made nothing and saw nothing runs once more, so that a capture of its
// request id committed after the first statement's snapshot is read with
// its order.
func (s *Store) ClaimCapture(ctx context.Context, c order.CaptureClaim) (order.CaptureClaimResult, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.CaptureClaimResult{}, err
	}
	sql := e.statements().captureClaim
	var res order.CaptureClaimResult
	to, _ := order.NextCapture(order.CapturePending, order.EventStart)
	for run := 0; run < 2 && !res.Claimed && res.Capture == nil; run++ {
		err := retry(ctx, func() error {
			r, err := queryOne[captureClaimRow](ctx, s.pool, sql, pgx.StrictNamedArgs{
				"order_id": c.OrderID, "merchant_id": c.MerchantID, "request_id": c.RequestID, "capture_id": c.CaptureID,
				"amount_minor": c.AmountMinor, "final": c.Final, "reason": c.Reason, "actor": c.Actor, "lease": c.Lease,
				"capturable": capturableStates, "from_state": order.CapturePending, "to_state": to,
				"event": order.EventStart, "create_event": order.EventCreate,
			})
			if err != nil {
				return err
			}
			res = order.CaptureClaimResult{Order: r.order(), Claimed: r.Claimed, ChargeID: r.ChargeID}
			if r.ID != "" { // the capture's id
				cp := r.capture()
				res.Capture = &cp
			}
			return nil
		})
		if err != nil {
			return order.CaptureClaimResult{}, err
		}
	}
	return res, nil
}

//go:embed sql/capture_settle.sql
var captureSettleSQL string

// capturedRow is what capture_settle.sql and order_capture.sql return.
type capturedRow struct {
	refundedOrderRow
	captureRow
}

// outcomeArg is a settlement's outcome as the statements take it: NULL
// for none.
func outcomeArg(o order.Outcome) *string {
	if o == "" {
		return nil
	}
	s := string(o)
	return &s
}

// SettleCapture implements order.HoldStore.
func (s *Store) SettleCapture(ctx context.Context, st order.CaptureSettlement) (order.Order, order.Capture, bool, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, order.Capture{}, false, err
	}
	sql := e.statements().captureSettle
	from := cmp.Or(st.From, order.CaptureCapturing)
	to := st.To
	if st.Event == "" {
		to = order.CaptureCapturing
	}
	var r capturedRow
	err = retry(ctx, func() (err error) {
		r, err = queryOne[capturedRow](ctx, s.pool, sql, pgx.StrictNamedArgs{
			"merchant_id": st.MerchantID, "capture_id": st.CaptureID, "from_state": from, "to_state": to,
			"outcome": outcomeArg(st.Result.Outcome), "decline_code": truncate(st.Result.DeclineCode, 255),
			"gateway_capture_id": truncate(st.Result.ChargeID, 255), "recheck_in": st.RecheckIn, "checked": st.Checked,
			"last_error": truncate(st.LastError, 1000), "event": st.Event, "actor": st.Actor,
			"reason": truncate(st.Reason, 1000), "capture_event": order.EventCapture,
			"paid_state":     order.MustNext(order.StateAuthorized, order.EventCapture),
			"captured_event": order.EventCaptured, "failed_event": order.EventCaptureFailed,
			"lease": leaseArg(st.Lease),
		})
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		return order.Order{}, order.Capture{}, false, nil // the guard did not hold
	case err != nil:
		return order.Order{}, order.Capture{}, false, err
	}
	return r.order(), r.capture(), true, nil
}

//go:embed sql/order_capture.sql
var orderCaptureSQL string

// OrderCapture implements order.HoldStore.
func (s *Store) OrderCapture(ctx context.Context, merchantID, captureID string) (order.Order, order.Capture, error) {
	var r capturedRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[capturedRow](ctx, s.pool, orderCaptureSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "capture_id": captureID})
		return err
	})
	return r.order(), r.capture(), err
}

//go:embed sql/void_claim.sql
var voidClaimSQL string

// voidClaimRow is what void_claim.sql returns; a void ID of ” means no
// void.
type voidClaimRow struct {
	Claimed  bool   `db:"claimed"`
	ChargeID string `db:"charge_id"`
	refundedOrderRow
	voidRow
}

// ClaimVoid implements order.HoldStore, running its statement twice at
// most as ClaimCapture does.
func (s *Store) ClaimVoid(ctx context.Context, c order.VoidClaim) (order.VoidClaimResult, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.VoidClaimResult{}, err
	}
	sql := e.statements().voidClaim
	var res order.VoidClaimResult
	to, _ := order.NextVoid(order.VoidPending, order.EventStart)
	for run := 0; run < 2 && !res.Claimed && res.Void == nil; run++ {
		err := retry(ctx, func() error {
			r, err := queryOne[voidClaimRow](ctx, s.pool, sql, pgx.StrictNamedArgs{
				"order_id": c.OrderID, "merchant_id": c.MerchantID, "request_id": c.RequestID, "void_id": c.VoidID,
				"reason": c.Reason, "actor": c.Actor, "lease": c.Lease, "authorized": order.StateAuthorized,
				"from_state": order.VoidPending, "to_state": to, "event": order.EventStart,
				"create_event": order.EventCreate,
			})
			if err != nil {
				return err
			}
			res = order.VoidClaimResult{Order: r.order(), Claimed: r.Claimed, ChargeID: r.ChargeID}
			if r.ID != "" { // the void's id
				v := r.void()
				res.Void = &v
			}
			return nil
		})
		if err != nil {
			return order.VoidClaimResult{}, err
		}
	}
	return res, nil
}

//go:embed sql/void_settle.sql
var voidSettleSQL string

// voidedRow is what void_settle.sql and order_void.sql return.
type voidedRow struct {
	refundedOrderRow
	voidRow
}

// SettleVoid implements order.HoldStore.
func (s *Store) SettleVoid(ctx context.Context, st order.VoidSettlement) (order.Order, order.Void, bool, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return order.Order{}, order.Void{}, false, err
	}
	sql := e.statements().voidSettle
	from := cmp.Or(st.From, order.VoidVoiding)
	to := st.To
	if st.Event == "" {
		to = order.VoidVoiding
	}
	var r voidedRow
	err = retry(ctx, func() (err error) {
		r, err = queryOne[voidedRow](ctx, s.pool, sql, pgx.StrictNamedArgs{
			"merchant_id": st.MerchantID, "void_id": st.VoidID, "from_state": from, "to_state": to,
			"outcome": outcomeArg(st.Result.Outcome), "decline_code": truncate(st.Result.DeclineCode, 255),
			"recheck_in": st.RecheckIn, "checked": st.Checked, "last_error": truncate(st.LastError, 1000),
			"event": st.Event, "actor": st.Actor, "reason": truncate(st.Reason, 1000),
			"void_event": order.EventVoid, "voided_state": order.MustNext(order.StateAuthorized, order.EventVoid),
		})
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		return order.Order{}, order.Void{}, false, nil // the guard did not hold
	case err != nil:
		return order.Order{}, order.Void{}, false, err
	}
	return r.order(), r.void(), true, nil
}

//go:embed sql/order_void.sql
var orderVoidSQL string

// OrderVoid implements order.HoldStore.
func (s *Store) OrderVoid(ctx context.Context, merchantID, voidID string) (order.Order, order.Void, error) {
	var r voidedRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[voidedRow](ctx, s.pool, orderVoidSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "void_id": voidID})
		return err
	})
	return r.order(), r.void(), err
}

// dueCaptureRow is a leased capture with what its lookup needs.
type dueCaptureRow struct {
	captureRow
	Gateway         string  `db:"gateway"`
	ChargeAttemptID string  `db:"charge_attempt_id"`
	ChargeID        string  `db:"charge_id"`
	AgeSeconds      float64 `db:"age_seconds"`
}

// dueVoidRow is a leased void with what its lookup needs.
type dueVoidRow struct {
	voidRow
	Gateway         string  `db:"gateway"`
	ChargeAttemptID string  `db:"charge_attempt_id"`
	ChargeID        string  `db:"charge_id"`
	AgeSeconds      float64 `db:"age_seconds"`
}

func (r dueCaptureRow) due() order.DueCapture {
	return order.DueCapture{Capture: r.capture(), Gateway: r.Gateway, ChargeAttemptID: r.ChargeAttemptID,
		ChargeID: r.ChargeID, Age: seconds(r.AgeSeconds)}
}

func (r dueVoidRow) due() order.DueVoid {
	return order.DueVoid{Void: r.void(), Gateway: r.Gateway, ChargeAttemptID: r.ChargeAttemptID,
		ChargeID: r.ChargeID, Age: seconds(r.AgeSeconds)}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

//go:embed sql/claim_due_captures.sql
var claimDueCapturesSQL string

//go:embed sql/claim_due_voids.sql
var claimDueVoidsSQL string

//go:embed sql/claim_due_holds.sql
var claimDueHoldsSQL string

// ClaimDueCaptures leases up to limit CAPTURING captures whose
// reconcile_at has come, oldest first, skipping those another reconciler
// holds.
func (s *Store) ClaimDueCaptures(ctx context.Context, limit int, lease time.Duration) ([]order.DueCapture, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimDueCaptures(ctx, limit, lease)
}

// ClaimDueVoids leases up to limit VOIDING voids whose reconcile_at has
// come.
func (s *Store) ClaimDueVoids(ctx context.Context, limit int, lease time.Duration) ([]order.DueVoid, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimDueVoids(ctx, limit, lease)
}

// ClaimDueHolds leases up to limit AUTHORIZED orders past their
// capture_before whose next lookup has come, with their authorizing
// attempts.
func (s *Store) ClaimDueHolds(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return nil, err
	}
	return e.claimDueHolds(ctx, limit, lease)
}

func (e *postgresEngine) claimDueCaptures(ctx context.Context, limit int, lease time.Duration) ([]order.DueCapture, error) {
	var due []order.DueCapture
	err := retry(ctx, func() error {
		rows, err := queryAll[dueCaptureRow](ctx, e.pool, claimDueCapturesSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.DueCapture, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

func (e *postgresEngine) claimDueVoids(ctx context.Context, limit int, lease time.Duration) ([]order.DueVoid, error) {
	var due []order.DueVoid
	err := retry(ctx, func() error {
		rows, err := queryAll[dueVoidRow](ctx, e.pool, claimDueVoidsSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.DueVoid, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

func (e *postgresEngine) claimDueHolds(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		rows, err := queryAll[leaseRow](ctx, e.pool, claimDueHoldsSQL, pgx.StrictNamedArgs{"limit": limit, "lease": lease})
		due = make([]order.Due, len(rows))
		for i, r := range rows {
			due[i] = r.due()
		}
		return err
	})
	return due, err
}

//go:embed sql/expire_hold.sql
var expireHoldSQL string

// ExpireHold moves merchantID's AUTHORIZED order orderID, whose attempt
// attemptID the gateway says has lapsed, to EXPIRED, guarded by nothing
// having been captured, being captured or voided; it reports whether the
// guard held.
func (s *Store) ExpireHold(ctx context.Context, merchantID, orderID, attemptID string, actor order.Actor, reason string) (bool, error) {
	e, err := s.engine(ctx)
	if err != nil {
		return false, err
	}
	sql := e.statements().expireHold
	var r struct {
		Expired int64 `db:"expired"`
	}
	err = retry(ctx, func() (err error) {
		r, err = queryOne[struct {
			Expired int64 `db:"expired"`
		}](ctx, s.pool, sql, pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": orderID, "attempt_id": attemptID,
			"to_state": order.MustNext(order.StateAuthorized, order.EventExpire), "event": order.EventExpire,
			"actor": actor, "reason": truncate(reason, 1000),
		})
		return err
	})
	return r.Expired > 0, err
}

//go:embed sql/recheck_hold.sql
var recheckHoldSQL string

// RecheckHold pushes the next lookup of an AUTHORIZED order's hold to
// recheckIn from now, recording why.
func (s *Store) RecheckHold(ctx context.Context, merchantID, orderID string, recheckIn time.Duration, why string) error {
	return retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, recheckHoldSQL, namedArgs(pgx.StrictNamedArgs{
			"merchant_id": merchantID, "order_id": orderID, "recheck_in": recheckIn, "last_error": truncate(why, 1000),
		}))
		return err
	})
}

//go:embed sql/order_captures.sql
var orderCapturesSQL string

//go:embed sql/order_voids.sql
var orderVoidsSQL string

//go:embed sql/order_hold_events.sql
var orderHoldEventsSQL string

// holdEventRow is a row of hold_events: a transition of a capture or a
// void (Kind).
type holdEventRow struct {
	Seq         int64     `db:"seq"`
	OrderID     string    `db:"order_id"`
	Kind        string    `db:"kind"`
	OperationID string    `db:"operation_id"`
	From        string    `db:"from_state"`
	To          string    `db:"to_state"`
	Name        string    `db:"event"`
	Actor       string    `db:"actor"`
	Reason      string    `db:"reason"`
	CreatedAt   time.Time `db:"created_at"`
}

// holdsOf reads an order's captures and voids, with their histories, into
// h, in q's snapshot.
func holdsOf(ctx context.Context, q querier, merchantID, orderID string, h *order.History) error {
	args := pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": orderID}
	cs, err := queryAll[captureRow](ctx, q, orderCapturesSQL, args)
	if err != nil {
		return err
	}
	vs, err := queryAll[voidRow](ctx, q, orderVoidsSQL, args)
	if err != nil {
		return err
	}
	evs, err := queryAll[holdEventRow](ctx, q, orderHoldEventsSQL, args)
	if err != nil {
		return err
	}
	for _, c := range cs {
		h.Captures = append(h.Captures, c.capture())
	}
	for _, v := range vs {
		h.Voids = append(h.Voids, v.void())
	}
	for _, e := range evs {
		switch e.Kind {
		case "capture":
			h.CaptureEvents = append(h.CaptureEvents, order.CaptureEvent{Seq: e.Seq, OrderID: e.OrderID, CaptureID: e.OperationID,
				From: order.CaptureState(e.From), To: order.CaptureState(e.To), Name: e.Name, Actor: order.Actor(e.Actor),
				Reason: e.Reason, CreatedAt: e.CreatedAt})
		case "void":
			h.VoidEvents = append(h.VoidEvents, order.VoidEvent{Seq: e.Seq, OrderID: e.OrderID, VoidID: e.OperationID,
				From: order.VoidState(e.From), To: order.VoidState(e.To), Name: e.Name, Actor: order.Actor(e.Actor),
				Reason: e.Reason, CreatedAt: e.CreatedAt})
		}
	}
	return nil
}
