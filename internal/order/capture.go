package order

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/looplab/fsm"
)

// Captures and voids of an authorization (an order made with
// CaptureManual that is AUTHORIZED): two more kinds of operation at a
// gateway, taken through the one lifecycle (operation.go) as refunds are.
// Each is its own record, with its own id (the gateway reference and
// idempotency key), admitted by one statement of the store that checks the
// hold's rules on the locked order row:
//
//   - captured + capturing + this capture ≤ authorized;
//   - no capture while a void is in flight or in review, no void while a
//     capture is;
//   - a void only while nothing is captured (after a capture: refund);
//   - a capture after capture_before is still sent: the gateway decides.

// CaptureState is where a capture stands. The database mirrors these
// values.
type CaptureState string

// The states of a capture, as a refund's: SUCCEEDED and FAILED are
// terminal, and NEEDS_REVIEW keeps its amount reserved, since the money
// may have been taken.
const (
	CapturePending     CaptureState = "PENDING"
	CaptureCapturing   CaptureState = "CAPTURING"
	CaptureSucceeded   CaptureState = "SUCCEEDED"
	CaptureFailed      CaptureState = "FAILED"
	CaptureNeedsReview CaptureState = "NEEDS_REVIEW"
)

// CaptureStates lists every state of a capture, in the order the API
// numbers them.
var CaptureStates = []CaptureState{CapturePending, CaptureCapturing, CaptureSucceeded, CaptureFailed, CaptureNeedsReview}

// VoidState is where a void stands. The database mirrors these values.
type VoidState string

// The states of a void: SUCCEEDED and FAILED are terminal; NEEDS_REVIEW
// keeps every capture out, since the hold may be gone.
const (
	VoidPending     VoidState = "PENDING"
	VoidVoiding     VoidState = "VOIDING"
	VoidSucceeded   VoidState = "SUCCEEDED"
	VoidFailed      VoidState = "FAILED"
	VoidNeedsReview VoidState = "NEEDS_REVIEW"
)

// VoidStates lists every state of a void, in the order the API numbers
// them.
var VoidStates = []VoidState{VoidPending, VoidVoiding, VoidSucceeded, VoidFailed, VoidNeedsReview}

// EventStart claims a PENDING capture or void for its gateway call.
const EventStart EventName = "start"

// captureTransitions and voidTransitions say which move a capture and a
// void may make: the refunds' table, with their in-flight state.
var (
	captureTransitions = opTransitions(string(CapturePending), string(CaptureCapturing))
	voidTransitions    = opTransitions(string(VoidPending), string(VoidVoiding))
)

func opTransitions(pending, inFlight string) fsm.Events {
	return fsm.Events{
		{Name: string(EventStart), Src: []string{pending}, Dst: inFlight},
		{Name: string(EventSucceed), Src: []string{inFlight}, Dst: "SUCCEEDED"},
		{Name: string(EventFail), Src: []string{inFlight}, Dst: "FAILED"},
		{Name: string(EventEscalate), Src: []string{inFlight}, Dst: "NEEDS_REVIEW"},
	}
}

// opEvents lists every event of the captures' and voids' tables.
var opEvents = []EventName{EventStart, EventSucceed, EventFail, EventEscalate}

// NextCapture returns the state that ev leads a capture to from from.
func NextCapture(from CaptureState, ev EventName) (CaptureState, error) {
	to, ok := run(string(from), captureTransitions, ev)
	if !ok || !validOpState(to, string(CaptureCapturing)) {
		return "", &StateError{Current: State("capture " + from), Event: ev}
	}
	return CaptureState(to), nil
}

// NextVoid returns the state that ev leads a void to from from.
func NextVoid(from VoidState, ev EventName) (VoidState, error) {
	to, ok := run(string(from), voidTransitions, ev)
	if !ok || !validOpState(to, string(VoidVoiding)) {
		return "", &StateError{Current: State("void " + from), Event: ev}
	}
	return VoidState(to), nil
}

// validOpState reports whether s is a state of an operation whose
// in-flight state is inFlight (looplab/fsm takes any source it is given).
func validOpState(s, inFlight string) bool {
	switch s {
	case "PENDING", "SUCCEEDED", "FAILED", "NEEDS_REVIEW":
		return true
	default:
		return s == inFlight
	}
}

// Capture takes some or all of an authorization. Its ID is the gateway
// reference and idempotency key; it never changes.
type Capture struct {
	ID         string
	MerchantID string
	OrderID    string
	RequestID  string
	// Requested is what the client asked for, 0 for all that is left;
	// Amount is what the capture is for.
	Requested int64
	Amount    Money
	Final     bool
	Reason    string
	Actor     Actor
	State     CaptureState
	// Outcome is empty while the first call is in flight.
	Outcome          Outcome
	DeclineCode      string
	GatewayCaptureID string
	ReconcileAt      time.Time
	ReconcileCount   int
	LastError        string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Void releases an authorization. Its ID is the gateway reference and
// idempotency key.
type Void struct {
	ID             string
	MerchantID     string
	OrderID        string
	RequestID      string
	Reason         string
	Actor          Actor
	State          VoidState
	Outcome        Outcome
	DeclineCode    string
	ReconcileAt    time.Time
	ReconcileCount int
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// CaptureEvent is one transition of a capture, as RefundEvent is of a
// refund.
type CaptureEvent struct {
	Seq       int64
	OrderID   string
	CaptureID string
	From      CaptureState // empty for the creation of the capture
	To        CaptureState
	Name      string
	Actor     Actor
	Reason    string
	CreatedAt time.Time
}

// VoidEvent is one transition of a void.
type VoidEvent struct {
	Seq       int64
	OrderID   string
	VoidID    string
	From      VoidState // empty for the creation of the void
	To        VoidState
	Name      string
	Actor     Actor
	Reason    string
	CreatedAt time.Time
}

// CaptureInput is a request to capture an authorized order.
type CaptureInput struct {
	OrderID   string
	RequestID string
	// AmountMinor is the amount to capture in minor units; 0 captures all
	// that is left of the hold.
	AmountMinor int64
	// Final releases the rest of the hold once the capture succeeds.
	Final  bool
	Reason string
}

// Validate checks every field of a capture request; reasonRequired is
// true for an operator's.
func (in CaptureInput) Validate(reasonRequired bool) error {
	if err := CheckID("order_id", in.OrderID); err != nil {
		return err
	}
	if err := CheckRequestID(in.RequestID); err != nil {
		return err
	}
	if in.AmountMinor < 0 {
		return &ValidationError{Field: "amount_minor", Reason: "must not be negative (0 captures all that is left of the hold)"}
	}
	if in.AmountMinor > MaxAmountMinor {
		return &ValidationError{Field: "amount_minor", Reason: tooLarge}
	}
	return CheckReason("reason", in.Reason, reasonRequired)
}

// VoidInput is a request to void an authorized order.
type VoidInput struct {
	OrderID   string
	RequestID string
	Reason    string
}

// Validate checks every field of a void request; reasonRequired is true
// for an operator's.
func (in VoidInput) Validate(reasonRequired bool) error {
	if err := CheckID("order_id", in.OrderID); err != nil {
		return err
	}
	if err := CheckRequestID(in.RequestID); err != nil {
		return err
	}
	return CheckReason("reason", in.Reason, reasonRequired)
}

// HoldStore is what captures and voids need of storage, beside Store.
type HoldStore interface {
	// ClaimCapture admits a capture in one statement: it locks the order,
	// and when no capture has used the request id, the order is
	// capturable (Capturable, its hold not closed, no void in flight or
	// in review) and the amount fits in authorized - captured - capturing,
	// it creates the capture in CAPTURING with its lease and reserves its
	// amount on the order.
	ClaimCapture(ctx context.Context, c CaptureClaim) (CaptureClaimResult, error)
	// SettleCapture records a gateway's answer for a capture, guarded by
	// the capture being in st.From (CAPTURING); it reports false and
	// changes nothing when the guard does not hold. A capture that
	// succeeds adds its amount to the order's captured total and moves an
	// AUTHORIZED order to PAID (EventCapture); every settled capture
	// writes a row of the order's history (EventCapture, EventCaptured or
	// EventCaptureFailed).
	SettleCapture(ctx context.Context, st CaptureSettlement) (Order, Capture, bool, error)
	// OrderCapture returns a merchant's capture by id and its order, as
	// they stood at one moment.
	OrderCapture(ctx context.Context, merchantID, captureID string) (Order, Capture, error)
	// ClaimVoid admits a void in one statement: it locks the order, and
	// when no void has used the request id, the order is AUTHORIZED with
	// nothing captured or capturing and no void in flight, it creates the
	// void in VOIDING with its lease and marks the order voiding.
	ClaimVoid(ctx context.Context, c VoidClaim) (VoidClaimResult, error)
	// SettleVoid records a gateway's answer for a void, guarded as
	// SettleCapture is. A void that succeeds moves its order to VOIDED.
	SettleVoid(ctx context.Context, st VoidSettlement) (Order, Void, bool, error)
	// OrderVoid returns a merchant's void by id and its order.
	OrderVoid(ctx context.Context, merchantID, voidID string) (Order, Void, error)
}

// CaptureClaim asks the store to admit a capture; see HoldStore.ClaimCapture.
type CaptureClaim struct {
	MerchantID string
	OrderID    string
	RequestID  string
	CaptureID  string
	// AmountMinor is what the client asked for: 0 for all that is left.
	AmountMinor int64
	Final       bool
	Reason      string
	Actor       Actor
	Lease       time.Duration
}

// CaptureClaimResult is the order after a capture claim, and the capture
// that the request id names: the new one when Claimed, or the earlier one.
type CaptureClaimResult struct {
	Order   Order
	Capture *Capture
	Claimed bool
	// ChargeID is the gateway's id of the order's authorizing charge.
	ChargeID string
}

// CaptureSettlement is what a gateway said about a capture. With an Event
// the capture moves to To; without one it stays CAPTURING and is checked
// again after RecheckIn.
type CaptureSettlement struct {
	MerchantID string
	CaptureID  string
	Result     Result
	// From is the state the capture must be in: CAPTURING when empty.
	From      CaptureState
	Event     EventName
	To        CaptureState
	RecheckIn time.Duration
	Checked   bool
	LastError string
	Actor     Actor
	Reason    string
	// Lease, when set, is the capture's reconcile_at as the reconciler's
	// lease of it set it: the settle applies only while it is still that,
	// as Settlement.Lease (a CAPTURE_FAILED recorded during the lookup that
	// read the CAPTURE wakes the capture, and the settle to SUCCEEDED loses).
	Lease time.Time
}

// VoidClaim asks the store to admit a void; see HoldStore.ClaimVoid.
type VoidClaim struct {
	MerchantID string
	OrderID    string
	RequestID  string
	VoidID     string
	Reason     string
	Actor      Actor
	Lease      time.Duration
}

// VoidClaimResult is the order after a void claim, and the void that the
// request id names.
type VoidClaimResult struct {
	Order    Order
	Void     *Void
	Claimed  bool
	ChargeID string
}

// VoidSettlement is what a gateway said about a void, as
// CaptureSettlement is for a capture.
type VoidSettlement struct {
	MerchantID string
	VoidID     string
	Result     Result
	From       VoidState
	Event      EventName
	To         VoidState
	RecheckIn  time.Duration
	Checked    bool
	LastError  string
	Actor      Actor
	Reason     string
}

// CaptureLimitError refuses a capture that does not fit in what is left of
// the order's hold, counting captures in flight.
type CaptureLimitError struct {
	Left     int64
	Currency string
}

func (e *CaptureLimitError) Error() string {
	if e.Left <= 0 {
		return "nothing is left to capture on this order's authorization (captures in flight count until they fail)"
	}
	return fmt.Sprintf("the capture exceeds what is left of this order's authorization: %s (captures in flight count until they fail)",
		Money{Currency: e.Currency, AmountMinor: e.Left})
}

// HoldError refuses a capture or a void that the hold's rules forbid (a
// void beside a capture, a capture after a final one); Msg says why and
// what to do.
type HoldError struct {
	Msg string
}

func (e *HoldError) Error() string { return e.Msg }

// ErrCapturesUnsupported refuses a capture or a void of an order whose
// gateway cannot capture, or that was not made with CaptureManual.
var ErrCapturesUnsupported = errors.New("captures: the order was not authorized with capture MANUAL on a gateway that can capture")

// Namespaces of the captures' and voids' derived ids, fixed forever as
// the others are (service.go).
var (
	captureNamespace = uuid.MustParse("5e771e00-c4a7-4b1e-9a3d-a77e0a7c0003")
	voidNamespace    = uuid.MustParse("5e771e00-c4a7-4b1e-9a3d-a77e0a7c0004")
)

// CaptureID is the id of the capture that merchantID's request requestID
// makes on order orderID, derived as AttemptID is: it is the capture's
// gateway reference and idempotency key.
func CaptureID(merchantID, orderID, requestID string) string {
	return derivedID(captureNamespace, merchantID, strings.ToLower(orderID), requestID)
}

// VoidID is the id of the void that merchantID's request requestID makes
// on order orderID.
func VoidID(merchantID, orderID, requestID string) string {
	return derivedID(voidNamespace, merchantID, strings.ToLower(orderID), requestID)
}

// capturerOf returns the gateway of o when it can capture and o was made
// with CaptureManual.
func (s *Service) capturerOf(o Order) (Capturer, error) {
	if s.holds == nil || o.Capture != CaptureManual {
		return nil, ErrCapturesUnsupported
	}
	gw, ok := s.gateways[o.Gateway].(Capturer)
	if !ok {
		return nil, ErrCapturesUnsupported
	}
	return gw, nil
}

// Capture captures some or all of an authorized order's hold, at most
// once per request id, and never more than is held: the claim admits it
// only if it fits in what is left. actor is who asks, scope whose orders
// they reach. An unknown outcome is not an error: the capture is returned
// CAPTURING, to be settled by the reconciler.
func (s *Service) Capture(ctx context.Context, scope Scope, actor Actor, in CaptureInput) (Order, Capture, error) {
	if err := in.Validate(actor != ActorAPI); err != nil {
		return Order{}, Capture{}, err
	}
	o, err := s.store.Order(ctx, scope, in.OrderID)
	if err != nil {
		return Order{}, Capture{}, err
	}
	gw, err := s.capturerOf(o)
	if err != nil {
		return Order{}, Capture{}, err
	}
	op := &captureOp{s: s, gw: gw, actor: actor, in: in, o: o}
	if err := s.run(ctx, op); err != nil {
		return Order{}, Capture{}, err
	}
	return op.o, op.c, nil
}

// captureOp is a capture of an authorized order by one request, as the
// lifecycle runs it (see operation.go).
type captureOp struct {
	s        *Service
	gw       Capturer
	actor    Actor
	in       CaptureInput
	o        Order
	c        Capture
	chargeID string
}

func (op *captureOp) claim(ctx context.Context) (bool, error) {
	o, in := op.o, op.in
	c, err := op.s.holds.ClaimCapture(ctx, CaptureClaim{
		MerchantID: o.MerchantID, OrderID: o.ID, RequestID: in.RequestID, CaptureID: CaptureID(o.MerchantID, o.ID, in.RequestID),
		AmountMinor: in.AmountMinor, Final: in.Final, Reason: in.Reason, Actor: op.actor,
		Lease: op.s.cfg.GatewayTimeout + op.s.cfg.Grace,
	})
	if err != nil {
		return false, fmt.Errorf("claim capture of order %s: %w", o.ID, err)
	}
	if !c.Claimed {
		if r := c.Capture; r != nil {
			if r.OrderID != in.OrderID || r.Requested != in.AmountMinor || r.Final != in.Final || r.Reason != in.Reason {
				return false, &ConflictError{Msg: "request_id was already used for another capture"}
			}
			op.o, op.c = c.Order, *r
			return false, nil
		}
		return false, captureRefusal(c.Order)
	}
	op.o, op.c, op.chargeID = c.Order, *c.Capture, c.ChargeID
	return true, nil
}

// captureRefusal says why an order refused a capture, read from the order
// as the claim saw it.
func captureRefusal(o Order) error {
	switch {
	case !o.State.Capturable():
		return &StateError{Current: o.State, Event: EventCapture}
	case o.Voiding:
		return &HoldError{Msg: "a void of this order is in flight or in review: no capture until it fails"}
	case o.HoldClosed:
		return &HoldError{Msg: "a final capture released the rest of this order's authorization: nothing is left to capture"}
	default:
		return &CaptureLimitError{Left: o.AuthorizedMinor - o.CapturedMinor - o.CapturingMinor, Currency: o.Amount.Currency}
	}
}

func (op *captureOp) claimed(ctx context.Context) {
	OperationTransition{Kind: "capture", OrderID: op.o.ID, ID: op.c.ID, RequestID: op.in.RequestID,
		From: string(CapturePending), To: string(op.c.State), Event: EventStart, Actor: op.actor}.Log(ctx, op.s.log)
}

// call asks the order's gateway to capture, within its request budget as
// a refund does; past it nothing is sent and the capture fails.
func (op *captureOp) call(ctx context.Context) (Result, error) {
	o, c := &op.o, &op.c
	start := time.Now()
	res, err := Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_busy"}, op.s.cfg.Budgets[o.Gateway].WaitCharge(ctx)
	if err == nil {
		res, err = op.gw.Capture(ctx, CaptureRequestFor(*o, *c, op.chargeID))
	}
	GatewayCall{Op: "capture", Gateway: o.Gateway, OrderID: o.ID, AttemptID: c.ID, RequestID: op.in.RequestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, op.s.log)
	return res, err
}

// CaptureRequestFor is the gateway request of capture c of order o, whose
// authorizing charge the gateway calls chargeID.
func CaptureRequestFor(o Order, c Capture, chargeID string) CaptureRequest {
	return CaptureRequest{CaptureID: c.ID, OrderID: o.ID, ChargeAttemptID: o.CurrentAttempt, ChargeID: chargeID,
		Amount: c.Amount, Final: c.Final, CreatedAt: c.CreatedAt}
}

func (op *captureOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	st := CaptureSettlementFor(op.o.MerchantID, op.c.ID, res, op.s.cfg.FirstRecheck)
	st.Actor = op.actor
	if gerr != nil {
		st.LastError = gerr.Error()
	}
	o, c, ok, err := op.s.holds.SettleCapture(ctx, st)
	if err != nil {
		return false, fmt.Errorf("settle capture %s of order %s: %w", op.c.ID, op.o.ID, err)
	}
	if !ok {
		return false, nil
	}
	if st.Event != "" {
		OperationTransition{Kind: "capture", OrderID: op.o.ID, ID: op.c.ID, RequestID: op.in.RequestID,
			From: string(CaptureCapturing), To: string(st.To), Event: st.Event, Actor: op.actor}.Log(ctx, op.s.log)
	}
	op.o, op.c = o, c
	return true, nil
}

func (op *captureOp) reread(ctx context.Context) error {
	o, c, err := op.s.holds.OrderCapture(ctx, op.o.MerchantID, op.c.ID)
	if err != nil {
		return err
	}
	op.o, op.c = o, c
	return nil
}

// opEventFor is the event that a gateway call's or lookup's result leads
// an operation in flight to: succeed, fail on a proof that nothing
// happened (declined, not sent), or none for anything else (unknown, to
// be checked again). A lookup's "not found" is for the caller to judge.
func opEventFor(res Result) (EventName, string) {
	switch res.Outcome {
	case OutcomeSucceeded:
		return EventSucceed, ""
	case OutcomeDeclined, OutcomeNotSent:
		reason := string(res.Outcome)
		if res.DeclineCode != "" {
			reason += ": " + res.DeclineCode
		}
		return EventFail, reason
	default:
		return "", ""
	}
}

// CaptureSettlementFor turns a capture call's or lookup's result into the
// capture's settlement, as RefundSettlementFor does for a refund.
func CaptureSettlementFor(merchantID, captureID string, res Result, recheck time.Duration) CaptureSettlement {
	st := CaptureSettlement{MerchantID: merchantID, CaptureID: captureID, Result: res, RecheckIn: recheck}
	st.Event, st.Reason = opEventFor(res)
	if st.Event == "" {
		st.Result.Outcome = OutcomeUnknown
		return st
	}
	st.To, _ = NextCapture(CaptureCapturing, st.Event)
	return st
}

// Void releases an authorized order's hold, at most once per request id,
// and only while nothing is captured or capturing. An unknown outcome is
// not an error: the void is returned VOIDING, to be settled by the
// reconciler.
func (s *Service) Void(ctx context.Context, scope Scope, actor Actor, in VoidInput) (Order, Void, error) {
	if err := in.Validate(actor != ActorAPI); err != nil {
		return Order{}, Void{}, err
	}
	o, err := s.store.Order(ctx, scope, in.OrderID)
	if err != nil {
		return Order{}, Void{}, err
	}
	gw, err := s.capturerOf(o)
	if err != nil {
		return Order{}, Void{}, err
	}
	op := &voidOp{s: s, gw: gw, actor: actor, in: in, o: o}
	if err := s.run(ctx, op); err != nil {
		return Order{}, Void{}, err
	}
	return op.o, op.v, nil
}

// voidOp is a void of an authorized order by one request.
type voidOp struct {
	s        *Service
	gw       Capturer
	actor    Actor
	in       VoidInput
	o        Order
	v        Void
	chargeID string
}

func (op *voidOp) claim(ctx context.Context) (bool, error) {
	o, in := op.o, op.in
	c, err := op.s.holds.ClaimVoid(ctx, VoidClaim{
		MerchantID: o.MerchantID, OrderID: o.ID, RequestID: in.RequestID, VoidID: VoidID(o.MerchantID, o.ID, in.RequestID),
		Reason: in.Reason, Actor: op.actor, Lease: op.s.cfg.GatewayTimeout + op.s.cfg.Grace,
	})
	if err != nil {
		return false, fmt.Errorf("claim void of order %s: %w", o.ID, err)
	}
	if !c.Claimed {
		if v := c.Void; v != nil {
			if v.OrderID != in.OrderID || v.Reason != in.Reason {
				return false, &ConflictError{Msg: "request_id was already used for another void"}
			}
			op.o, op.v = c.Order, *v
			return false, nil
		}
		return false, voidRefusal(c.Order)
	}
	op.o, op.v, op.chargeID = c.Order, *c.Void, c.ChargeID
	return true, nil
}

// voidRefusal says why an order refused a void.
func voidRefusal(o Order) error {
	switch {
	case o.State != StateAuthorized:
		if o.CapturedMinor > 0 {
			return &HoldError{Msg: "the order has been captured: refund it instead of voiding"}
		}
		return &StateError{Current: o.State, Event: EventVoid}
	case o.Voiding:
		return &HoldError{Msg: "another void of this order is in flight or in review"}
	default:
		return &HoldError{Msg: "a capture of this order is in flight or in review: no void until it fails"}
	}
}

func (op *voidOp) claimed(ctx context.Context) {
	OperationTransition{Kind: "void", OrderID: op.o.ID, ID: op.v.ID, RequestID: op.in.RequestID,
		From: string(VoidPending), To: string(op.v.State), Event: EventStart, Actor: op.actor}.Log(ctx, op.s.log)
}

func (op *voidOp) call(ctx context.Context) (Result, error) {
	o, v := &op.o, &op.v
	start := time.Now()
	res, err := Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_busy"}, op.s.cfg.Budgets[o.Gateway].WaitCharge(ctx)
	if err == nil {
		res, err = op.gw.Void(ctx, VoidRequestFor(*o, *v, op.chargeID))
	}
	GatewayCall{Op: "void", Gateway: o.Gateway, OrderID: o.ID, AttemptID: v.ID, RequestID: op.in.RequestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, op.s.log)
	return res, err
}

// VoidRequestFor is the gateway request of void v of order o.
func VoidRequestFor(o Order, v Void, chargeID string) VoidRequest {
	return VoidRequest{VoidID: v.ID, OrderID: o.ID, ChargeAttemptID: o.CurrentAttempt, ChargeID: chargeID, CreatedAt: v.CreatedAt}
}

func (op *voidOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	st := VoidSettlementFor(op.o.MerchantID, op.v.ID, res, op.s.cfg.FirstRecheck)
	st.Actor = op.actor
	if gerr != nil {
		st.LastError = gerr.Error()
	}
	o, v, ok, err := op.s.holds.SettleVoid(ctx, st)
	if err != nil {
		return false, fmt.Errorf("settle void %s of order %s: %w", op.v.ID, op.o.ID, err)
	}
	if !ok {
		return false, nil
	}
	if st.Event != "" {
		OperationTransition{Kind: "void", OrderID: op.o.ID, ID: op.v.ID, RequestID: op.in.RequestID,
			From: string(VoidVoiding), To: string(st.To), Event: st.Event, Actor: op.actor}.Log(ctx, op.s.log)
	}
	op.o, op.v = o, v
	return true, nil
}

func (op *voidOp) reread(ctx context.Context) error {
	o, v, err := op.s.holds.OrderVoid(ctx, op.o.MerchantID, op.v.ID)
	if err != nil {
		return err
	}
	op.o, op.v = o, v
	return nil
}

// VoidSettlementFor turns a void call's or lookup's result into the
// void's settlement.
func VoidSettlementFor(merchantID, voidID string, res Result, recheck time.Duration) VoidSettlement {
	st := VoidSettlement{MerchantID: merchantID, VoidID: voidID, Result: res, RecheckIn: recheck}
	st.Event, st.Reason = opEventFor(res)
	if st.Event == "" {
		st.Result.Outcome = OutcomeUnknown
		return st
	}
	st.To, _ = NextVoid(VoidVoiding, st.Event)
	return st
}

// DueCapture is a CAPTURING capture leased for a reconciler's check, with
// what its lookup needs.
type DueCapture struct {
	Capture Capture
	// Gateway is the order's gateway; ChargeAttemptID and ChargeID name
	// the authorizing charge.
	Gateway         string
	ChargeAttemptID string
	ChargeID        string
	// Age is how long ago the capture was made, in database time.
	Age time.Duration
}

// DueVoid is a VOIDING void leased for a reconciler's check.
type DueVoid struct {
	Void            Void
	Gateway         string
	ChargeAttemptID string
	ChargeID        string
	Age             time.Duration
}
