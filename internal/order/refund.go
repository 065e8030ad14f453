package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RefundState is where a refund stands. The database mirrors these values.
type RefundState string

// The states of a refund. SUCCEEDED and FAILED are terminal; NEEDS_REVIEW
// waits for a person, and its amount stays reserved meanwhile, because the
// money may have gone back.
const (
	RefundPending     RefundState = "PENDING"
	RefundRefunding   RefundState = "REFUNDING"
	RefundSucceeded   RefundState = "SUCCEEDED"
	RefundFailed      RefundState = "FAILED"
	RefundNeedsReview RefundState = "NEEDS_REVIEW"
)

// RefundStates lists every state of a refund, in the order the API numbers
// them.
var RefundStates = []RefundState{RefundPending, RefundRefunding, RefundSucceeded, RefundFailed, RefundNeedsReview}

// Refund is money going back to the customer for a paid order. Its ID is
// the gateway reference and idempotency key; it never changes, and every
// retry of the refund's gateway call reuses it.
type Refund struct {
	ID         string
	MerchantID string
	OrderID    string
	RequestID  string
	// Requested is the amount the client asked for, 0 for "the rest";
	// Amount is what the refund is for.
	Requested int64
	Amount    Money
	Reason    string
	Actor     Actor
	State     RefundState
	// Outcome is empty while the first call is in flight.
	Outcome         Outcome
	DeclineCode     string
	GatewayRefundID string
	ReconcileAt     time.Time
	ReconcileCount  int
	LastError       string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// RefundEvent is one recorded transition in a refund's history.
type RefundEvent struct {
	Seq       int64
	OrderID   string
	RefundID  string
	From      RefundState // empty for the creation of the refund
	To        RefundState
	Name      string
	Actor     Actor
	Reason    string
	CreatedAt time.Time
}

// RefundInput is a request to refund an order.
type RefundInput struct {
	OrderID   string
	RequestID string
	// AmountMinor is the amount to refund in the order's currency's minor
	// units; 0 refunds what is left.
	AmountMinor int64
	Reason      string
}

// Validate checks every field of a refund request.
func (in RefundInput) Validate() error {
	if err := CheckID("order_id", in.OrderID); err != nil {
		return err
	}
	if err := CheckRequestID(in.RequestID); err != nil {
		return err
	}
	if in.AmountMinor < 0 {
		return &ValidationError{Field: "amount_minor", Reason: "must not be negative (0 refunds what is left)"}
	}
	if in.AmountMinor > MaxAmountMinor {
		return &ValidationError{Field: "amount_minor", Reason: tooLarge}
	}
	return CheckReason("reason", in.Reason, false)
}

// RefundRequest is what a gateway needs to refund, and to look up, one
// refund.
type RefundRequest struct {
	// RefundID is the gateway reference and idempotency key.
	RefundID string
	OrderID  string
	// ChargeAttemptID is the reference of the charge being refunded, and
	// ChargeID the gateway's own id for it, when the gateway told us.
	ChargeAttemptID string
	ChargeID        string
	Amount          Money
	// CreatedAt is when the refund was made (database time, for lookups).
	CreatedAt time.Time
}

// Refunder is a gateway that can refund. Refund reports an outcome for
// every call: OutcomeSucceeded, OutcomeDeclined (the gateway refused the
// refund), OutcomeNotSent, or OutcomeUnknown; its error explains the last
// two and is for logs. LookupRefund asks about an earlier refund by its
// reference: OutcomeSucceeded, OutcomeDeclined (it failed), OutcomeNotFound,
// or an error when the gateway cannot say (a refund still pending at the
// gateway is such a case).
type Refunder interface {
	Refund(ctx context.Context, req RefundRequest) (Result, error)
	LookupRefund(ctx context.Context, req RefundRequest) (Result, error)
}

// RefundStore is what refunds need of storage, beside Store.
type RefundStore interface {
	// ClaimRefund admits a refund in one statement: it locks the order, and
	// when no refund has used the request id, the order is refundable and
	// the amount fits in what is left (paid - succeeded - in flight), it
	// creates the refund in REFUNDING with its lease and reserves its
	// amount on the order.
	ClaimRefund(ctx context.Context, c RefundClaim) (RefundClaimResult, error)
	// SettleRefund records a gateway's answer for a refund, guarded by the
	// refund being REFUNDING; it reports false and changes nothing when the
	// guard does not hold. A refund that succeeds moves its order with
	// s.OrderPartial or s.OrderFull, whichever it comes to.
	SettleRefund(ctx context.Context, s RefundSettlement) (Order, Refund, bool, error)
	// Refund returns a merchant's refund by id.
	Refund(ctx context.Context, merchantID, id string) (Refund, error)
	// OrderRefund returns a merchant's refund by id and its order, as they
	// stood at one moment (one read).
	OrderRefund(ctx context.Context, merchantID, refundID string) (Order, Refund, error)
}

// RefundClaim asks the store to admit a refund; see RefundStore.ClaimRefund.
type RefundClaim struct {
	MerchantID string
	OrderID    string
	RequestID  string
	RefundID   string
	// AmountMinor is what the client asked for: 0 for what is left.
	AmountMinor int64
	Reason      string
	Actor       Actor
	Lease       time.Duration
	// Gateways are those that can refund: the claim admits a refund only
	// of an order whose gateway is one of them (nil admits any).
	Gateways []string
}

// RefundClaimResult is the order after a refund claim (with the charge
// being refunded), and the refund that the request id names: the new one
// when Claimed, or the earlier one.
type RefundClaimResult struct {
	Order   Order
	Refund  *Refund
	Claimed bool
	// ChargeID is the gateway's id of the order's charge.
	ChargeID string
}

// RefundSettlement is what a gateway said about a refund. With an Event,
// the refund moves to To; without one it stays REFUNDING and is checked
// again after RecheckIn.
type RefundSettlement struct {
	MerchantID string
	// OrderID is the refund's order: the settle applies only to a refund
	// of that order.
	OrderID  string
	RefundID string
	Result   Result
	// From is the state the refund must be in: REFUNDING when empty, or
	// NEEDS_REVIEW for an operator's decision.
	From  RefundState
	Event EventName
	To    RefundState
	// The order's move when the refund succeeds: partial, or full when
	// the order's refunded total reaches its amount.
	OrderPartial, OrderFull EventName
	RecheckIn               time.Duration
	Checked                 bool
	LastError               string
	Actor                   Actor
	Reason                  string
	// Lease, when set, is the refund's reconcile_at as the reconciler's
	// lease of it set it: the settle applies only while it is still that,
	// as Settlement.Lease (a REFUND_FAILED recorded during the lookup that
	// read the REFUND wakes the refund, and the settle to SUCCEEDED loses).
	Lease time.Time
}

// RefundLimitError refuses a refund that does not fit in what is left of
// the order's payment, counting refunds in flight.
type RefundLimitError struct {
	Left     int64
	Currency string
}

func (e *RefundLimitError) Error() string {
	if e.Left <= 0 {
		return "nothing is left to refund on this order (refunds in flight count until they fail)"
	}
	return fmt.Sprintf("the refund exceeds what is left to refund on this order: %s (refunds in flight count until they fail)",
		Money{Currency: e.Currency, AmountMinor: e.Left})
}

// RefundStateError refuses a refund of an order that is not paid, or a
// refund move that the refunds' table does not allow.
type RefundStateError struct {
	Current RefundState
	Event   EventName
}

func (e *RefundStateError) Error() string {
	return fmt.Sprintf("cannot %s a refund in state %s", e.Event, e.Current)
}

// ErrRefundsUnsupported refuses a refund of an order whose gateway cannot
// refund.
var ErrRefundsUnsupported = errors.New("refunds: the order's gateway does not support refunds")

// Refund refunds a paid order, at most once per request id, and never
// more than was paid: the claim admits it only if it fits in what is left.
// actor is who asks (ActorAPI for the merchant's checkout, Operator for a
// person); scope is whose orders they reach. It returns the order and the
// refund as they then stand. An unknown outcome is not an error: the
// refund is returned REFUNDING, to be settled by the reconciler.
func (s *Service) Refund(ctx context.Context, scope Scope, actor Actor, in RefundInput) (Order, Refund, error) {
	if err := in.Validate(); err != nil {
		return Order{}, Refund{}, err
	}
	if s.refunds == nil || len(s.refunders) == 0 {
		return Order{}, Refund{}, ErrRefundsUnsupported
	}
	// A merchant's call goes straight to the claim, whose guard admits
	// only an order whose gateway can refund. An operator's names no
	// merchant: the order is read first for its merchant.
	merchantID := scope.MerchantID()
	if scope.IsAnyMerchant() {
		o, err := s.store.Order(ctx, scope, in.OrderID)
		if err != nil {
			return Order{}, Refund{}, err
		}
		merchantID = o.MerchantID
	}
	if merchantID == "" {
		return Order{}, Refund{}, ErrNotFound // the zero Scope reaches no order
	}
	op := &refundOp{s: s, actor: actor, in: in, merchantID: merchantID}
	if err := s.run(ctx, op); err != nil {
		return Order{}, Refund{}, err
	}
	return op.o, op.r, nil
}

// refundOp is a refund of a paid order by one request, as the lifecycle
// runs it (see operation.go).
type refundOp struct {
	s          *Service
	actor      Actor
	in         RefundInput
	merchantID string
	// o and r are the order and the refund as the operation last read or
	// settled them; chargeID is the gateway's id of the order's charge.
	o        Order
	r        Refund
	chargeID string
}

func (op *refundOp) claim(ctx context.Context) (bool, error) {
	in := op.in
	c, err := op.s.refunds.ClaimRefund(ctx, RefundClaim{
		MerchantID: op.merchantID, OrderID: in.OrderID, RequestID: in.RequestID,
		RefundID:    RefundID(op.merchantID, in.OrderID, in.RequestID),
		AmountMinor: in.AmountMinor, Reason: in.Reason, Actor: op.actor, Lease: op.s.cfg.GatewayTimeout + op.s.cfg.Grace,
		Gateways: op.s.refunders,
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return false, ErrNotFound
	case err != nil:
		return false, fmt.Errorf("claim refund of order %s: %w", in.OrderID, err)
	}
	if !c.Claimed {
		if r := c.Refund; r != nil {
			// A replay of an earlier request: refund nothing more.
			if r.OrderID != in.OrderID || r.Requested != in.AmountMinor || r.Reason != in.Reason {
				return false, &ConflictError{Msg: "request_id was already used for another refund"}
			}
			op.o, op.r = c.Order, *r
			return false, nil
		}
		if _, ok := op.s.gateways[c.Order.Gateway].(Refunder); !ok {
			return false, ErrRefundsUnsupported
		}
		if !c.Order.State.Refundable() {
			return false, &StateError{Current: c.Order.State, Event: EventRefund}
		}
		if c.Order.OpenDisputes > 0 {
			return false, op.s.openDispute(ctx, c.Order)
		}
		return false, &RefundLimitError{Left: c.Order.Amount.AmountMinor - c.Order.Refunded - c.Order.Refunding -
			c.Order.ChargedBack, Currency: c.Order.Amount.Currency}
	}
	op.o, op.r, op.chargeID = c.Order, *c.Refund, c.ChargeID
	return true, nil
}

func (op *refundOp) claimed(ctx context.Context) {
	RefundTransition{OrderID: op.o.ID, RefundID: op.r.ID, RequestID: op.in.RequestID, From: RefundPending, To: op.r.State,
		Event: EventRefund, Actor: op.actor}.Log(ctx, op.s.log)
}

// call asks the order's gateway to refund. A refund draws from its
// gateway's request budget as a charge does. Past it nothing is sent: the
// refund fails, and its amount may be refunded again with a new request
// id.
func (op *refundOp) call(ctx context.Context) (Result, error) {
	o, r := &op.o, &op.r
	// The claim's guard admitted the order's gateway as one that refunds;
	// on Citus it is checked on a read just before the claim, which a
	// charge of the order on another gateway could follow. Then nothing
	// is sent, and the refund fails.
	gw, ok := op.s.gateways[o.Gateway].(Refunder)
	if !ok {
		return Result{Outcome: OutcomeNotSent, DeclineCode: "refunds_unsupported"}, ErrRefundsUnsupported
	}
	start := time.Now()
	res, err := Result{Outcome: OutcomeNotSent, DeclineCode: "gateway_busy"}, op.s.cfg.Budgets[o.Gateway].WaitCharge(ctx)
	if err == nil {
		res, err = gw.Refund(ctx, RefundRequest{RefundID: r.ID, OrderID: o.ID, ChargeAttemptID: o.CurrentAttempt,
			ChargeID: op.chargeID, Amount: r.Amount, CreatedAt: r.CreatedAt})
	}
	GatewayCall{Op: "refund", Gateway: o.Gateway, OrderID: o.ID, AttemptID: r.ID, RequestID: op.in.RequestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, op.s.log)
	return res, err
}

func (op *refundOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	st := RefundSettlementFor(op.o.MerchantID, op.o.ID, op.r.ID, res, op.s.cfg.FirstRecheck)
	st.Actor = op.actor
	if gerr != nil {
		st.LastError = gerr.Error()
	}
	settled, r, ok, err := op.s.refunds.SettleRefund(ctx, st)
	if err != nil {
		return false, fmt.Errorf("settle refund %s of order %s: %w", op.r.ID, op.o.ID, err)
	}
	if !ok {
		return false, nil
	}
	if st.Event != "" {
		RefundTransition{OrderID: op.o.ID, RefundID: op.r.ID, RequestID: op.in.RequestID, From: RefundRefunding, To: st.To,
			Event: st.Event, Actor: op.actor}.Log(ctx, op.s.log)
	}
	op.o, op.r = settled, r
	return true, nil
}

func (op *refundOp) reread(ctx context.Context) error {
	o, r, err := op.s.refunds.OrderRefund(ctx, op.o.MerchantID, op.r.ID)
	if err != nil {
		return err
	}
	op.o, op.r = o, r
	return nil
}

// RefundSettlementFor turns a refund call's or lookup's result into the
// settlement of the refund: succeeded, or failed on a proof that no money
// went back (declined, not sent); anything else is unknown and checked
// again after recheck. A lookup's "not found" is for the caller to judge
// (the reconciler, against its no-show horizon).
func RefundSettlementFor(merchantID, orderID, refundID string, res Result, recheck time.Duration) RefundSettlement {
	st := RefundSettlement{MerchantID: merchantID, OrderID: orderID, RefundID: refundID, Result: res, RecheckIn: recheck,
		OrderPartial: EventRefundPartial, OrderFull: EventRefundFull}
	switch res.Outcome {
	case OutcomeSucceeded:
		st.Event = EventSucceed
	case OutcomeDeclined, OutcomeNotSent:
		st.Event = EventFail
		st.Reason = string(res.Outcome)
		if res.DeclineCode != "" {
			st.Reason += ": " + res.DeclineCode
		}
	default:
		st.Result.Outcome = OutcomeUnknown
		return st
	}
	st.To = MustNextRefund(RefundRefunding, st.Event)
	return st
}

// DueRefund is a REFUNDING refund leased for a reconciler's check, with
// what its lookup needs.
type DueRefund struct {
	Refund Refund
	// Gateway is the order's gateway; ChargeAttemptID and ChargeID name
	// the charge being refunded.
	Gateway         string
	ChargeAttemptID string
	ChargeID        string
	// Age is how long ago the refund was made, in database time.
	Age time.Duration
}

// RefundStats summarises the refunds an operator's scope reaches.
type RefundStats struct {
	ByState map[RefundState]int64
	// OldestRefunding is when the oldest REFUNDING refund was made.
	OldestRefunding time.Time
}

// ResolveRefund records an operator's decision for a refund in
// NEEDS_REVIEW: ev is EventResolveSucceeded (gatewayRefundID required: the
// money went back) or EventResolveFailed (it did not, and the amount may be
// refunded again). actor is the operator, scope the merchants their key
// reaches; reason is required.
func (s *Service) ResolveRefund(ctx context.Context, scope Scope, orderID, refundID string, ev EventName, gatewayRefundID, reason string,
	actor Actor) (Order, Refund, error) {
	if err := CheckID("order_id", orderID); err != nil {
		return Order{}, Refund{}, err
	}
	if err := CheckID("refund_id", refundID); err != nil {
		return Order{}, Refund{}, err
	}
	res := Result{Outcome: OutcomeSucceeded, ChargeID: gatewayRefundID}
	switch ev {
	case EventResolveSucceeded:
		if err := checkText("gateway_refund_id", gatewayRefundID, 1, MaxTokenLen); err != nil {
			return Order{}, Refund{}, err
		}
	case EventResolveFailed:
		if gatewayRefundID != "" {
			return Order{}, Refund{}, &ValidationError{Field: "gateway_refund_id", Reason: "is only for REFUND_RESOLUTION_SUCCEEDED"}
		}
		res = Result{Outcome: OutcomeDeclined, DeclineCode: "resolved_failed"}
	default:
		return Order{}, Refund{}, &ValidationError{Field: "resolution", Reason: "must be REFUND_RESOLUTION_SUCCEEDED or REFUND_RESOLUTION_FAILED"}
	}
	if err := CheckReason("reason", reason, true); err != nil {
		return Order{}, Refund{}, err
	}
	if actor == "" {
		return Order{}, Refund{}, errors.New("resolve refund: no operator identity")
	}
	if s.refunds == nil {
		return Order{}, Refund{}, ErrRefundsUnsupported
	}
	o, err := s.store.Order(ctx, scope, orderID)
	if err != nil {
		return Order{}, Refund{}, err
	}
	r, err := s.refunds.Refund(ctx, o.MerchantID, refundID)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && r.OrderID != o.ID):
		return Order{}, Refund{}, ErrRefundNotFound
	case err != nil:
		return Order{}, Refund{}, err
	}
	to, err := NextRefund(r.State, ev)
	if err != nil {
		return Order{}, Refund{}, err
	}
	settled, sr, ok, err := s.refunds.SettleRefund(ctx, RefundSettlement{
		MerchantID: o.MerchantID, OrderID: o.ID, RefundID: r.ID, Result: res, From: RefundNeedsReview, Event: ev, To: to,
		OrderPartial: EventRefundPartial, OrderFull: EventRefundFull, Actor: actor, Reason: reason,
	})
	if err != nil {
		return Order{}, Refund{}, err
	}
	if !ok {
		// Another operator decided first.
		cur, err := s.refunds.Refund(ctx, o.MerchantID, r.ID)
		if err != nil {
			return Order{}, Refund{}, err
		}
		return Order{}, Refund{}, &RefundStateError{Current: cur.State, Event: ev}
	}
	RefundTransition{OrderID: o.ID, RefundID: r.ID, From: RefundNeedsReview, To: to, Event: ev, Actor: actor}.Log(ctx, s.log)
	return settled, sr, nil
}

// ErrRefundNotFound means there is no such refund of the order.
var ErrRefundNotFound = errors.New("refund not found")
