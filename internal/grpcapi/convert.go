package grpcapi

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

var stateToProto = map[order.State]settlev1.OrderState{
	order.StatePending:           settlev1.OrderState_ORDER_STATE_PENDING,
	order.StateCharging:          settlev1.OrderState_ORDER_STATE_CHARGING,
	order.StatePaid:              settlev1.OrderState_ORDER_STATE_PAID,
	order.StateCanceled:          settlev1.OrderState_ORDER_STATE_CANCELED,
	order.StateNeedsReview:       settlev1.OrderState_ORDER_STATE_NEEDS_REVIEW,
	order.StatePartiallyRefunded: settlev1.OrderState_ORDER_STATE_PARTIALLY_REFUNDED,
	order.StateRefunded:          settlev1.OrderState_ORDER_STATE_REFUNDED,
	order.StateRequiresAction:    settlev1.OrderState_ORDER_STATE_REQUIRES_ACTION,
	order.StateAuthorized:        settlev1.OrderState_ORDER_STATE_AUTHORIZED,
	order.StateVoided:            settlev1.OrderState_ORDER_STATE_VOIDED,
	order.StateExpired:           settlev1.OrderState_ORDER_STATE_EXPIRED,
}

var captureStateToProto = map[order.CaptureState]settlev1.CaptureState{
	order.CapturePending:     settlev1.CaptureState_CAPTURE_STATE_PENDING,
	order.CaptureCapturing:   settlev1.CaptureState_CAPTURE_STATE_CAPTURING,
	order.CaptureSucceeded:   settlev1.CaptureState_CAPTURE_STATE_SUCCEEDED,
	order.CaptureFailed:      settlev1.CaptureState_CAPTURE_STATE_FAILED,
	order.CaptureNeedsReview: settlev1.CaptureState_CAPTURE_STATE_NEEDS_REVIEW,
}

var voidStateToProto = map[order.VoidState]settlev1.VoidState{
	order.VoidPending:     settlev1.VoidState_VOID_STATE_PENDING,
	order.VoidVoiding:     settlev1.VoidState_VOID_STATE_VOIDING,
	order.VoidSucceeded:   settlev1.VoidState_VOID_STATE_SUCCEEDED,
	order.VoidFailed:      settlev1.VoidState_VOID_STATE_FAILED,
	order.VoidNeedsReview: settlev1.VoidState_VOID_STATE_NEEDS_REVIEW,
}

var captureModeToProto = map[order.CaptureMode]settlev1.CaptureMode{
	order.CaptureAutomatic: settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC,
	order.CaptureManual:    settlev1.CaptureMode_CAPTURE_MODE_MANUAL,
}

// captureModeFromProto is a request's capture mode as the domain takes it;
// unset is automatic.
func captureModeFromProto(m settlev1.CaptureMode) (order.CaptureMode, error) {
	switch m {
	case settlev1.CaptureMode_CAPTURE_MODE_UNSPECIFIED, settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC:
		return order.CaptureAutomatic, nil
	case settlev1.CaptureMode_CAPTURE_MODE_MANUAL:
		return order.CaptureManual, nil
	default:
		return "", &order.ValidationError{Field: "capture", Reason: "must be CAPTURE_MODE_AUTOMATIC or CAPTURE_MODE_MANUAL"}
	}
}

var refundStateToProto = map[order.RefundState]settlev1.RefundState{
	order.RefundPending:     settlev1.RefundState_REFUND_STATE_PENDING,
	order.RefundRefunding:   settlev1.RefundState_REFUND_STATE_REFUNDING,
	order.RefundSucceeded:   settlev1.RefundState_REFUND_STATE_SUCCEEDED,
	order.RefundFailed:      settlev1.RefundState_REFUND_STATE_FAILED,
	order.RefundNeedsReview: settlev1.RefundState_REFUND_STATE_NEEDS_REVIEW,
}

var outcomeToProto = map[order.Outcome]settlev1.AttemptOutcome{
	order.OutcomeSucceeded:      settlev1.AttemptOutcome_ATTEMPT_OUTCOME_SUCCEEDED,
	order.OutcomeDeclined:       settlev1.AttemptOutcome_ATTEMPT_OUTCOME_DECLINED,
	order.OutcomeNotSent:        settlev1.AttemptOutcome_ATTEMPT_OUTCOME_NOT_SENT,
	order.OutcomeUnknown:        settlev1.AttemptOutcome_ATTEMPT_OUTCOME_UNKNOWN,
	order.OutcomeNotFound:       settlev1.AttemptOutcome_ATTEMPT_OUTCOME_NOT_FOUND,
	order.OutcomeRefused:        settlev1.AttemptOutcome_ATTEMPT_OUTCOME_REFUSED,
	order.OutcomeRequiresAction: settlev1.AttemptOutcome_ATTEMPT_OUTCOME_REQUIRES_ACTION,
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func orderToProto(o order.Order) *settlev1.Order {
	p := &settlev1.Order{
		Id:                o.ID,
		MerchantId:        o.MerchantID,
		MerchantReference: o.MerchantReference,
		Amount:            &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.Amount.AmountMinor},
		PaymentMethod:     o.PaymentMethod,
		Gateway:           o.Gateway,
		State:             stateToProto[o.State],
		CurrentAttemptId:  o.CurrentAttempt,
		CreateTime:        timestamp(o.CreatedAt),
		UpdateTime:        timestamp(o.UpdatedAt),
	}
	if o.State.AwaitsGateway() {
		p.NextCheckTime = timestamp(o.ReconcileAt)
	}
	if o.Refunded > 0 {
		p.Refunded = &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.Refunded}
	}
	if o.Refunding > 0 {
		p.Refunding = &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.Refunding}
	}
	p.Capture = captureModeToProto[o.Capture]
	if o.AuthorizedMinor > 0 {
		p.Authorized = &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.AuthorizedMinor}
		p.Captured = &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.CapturedMinor}
		p.CaptureBefore = timestamp(o.CaptureBefore)
	}
	if o.CapturingMinor > 0 {
		p.Capturing = &settlev1.Money{Currency: o.Amount.Currency, AmountMinor: o.CapturingMinor}
	}
	p.Voiding = o.Voiding
	p.Disputed = moneyOf(o.Amount.Currency, o.Disputed)
	p.ChargedBack = moneyOf(o.Amount.Currency, o.ChargedBack)
	return p
}

func captureToProto(c order.Capture) *settlev1.Capture {
	p := &settlev1.Capture{
		Id: c.ID, OrderId: c.OrderID, RequestId: c.RequestID,
		Amount: &settlev1.Money{Currency: c.Amount.Currency, AmountMinor: c.Amount.AmountMinor},
		Final:  c.Final, State: captureStateToProto[c.State], Outcome: outcomeToProto[c.Outcome],
		FailureCode: c.DeclineCode, Actor: string(c.Actor),
		CreateTime: timestamp(c.CreatedAt), UpdateTime: timestamp(c.UpdatedAt),
	}
	if c.State == order.CaptureCapturing {
		p.NextCheckTime = timestamp(c.ReconcileAt)
	}
	return p
}

func voidToProto(v order.Void) *settlev1.Void {
	p := &settlev1.Void{
		Id: v.ID, OrderId: v.OrderID, RequestId: v.RequestID, Reason: v.Reason,
		State: voidStateToProto[v.State], Outcome: outcomeToProto[v.Outcome], FailureCode: v.DeclineCode,
		Actor: string(v.Actor), CreateTime: timestamp(v.CreatedAt), UpdateTime: timestamp(v.UpdatedAt),
	}
	if v.State == order.VoidVoiding {
		p.NextCheckTime = timestamp(v.ReconcileAt)
	}
	return p
}

func refundToProto(r order.Refund) *settlev1.Refund {
	p := &settlev1.Refund{
		Id: r.ID, OrderId: r.OrderID, RequestId: r.RequestID,
		Amount: &settlev1.Money{Currency: r.Amount.Currency, AmountMinor: r.Amount.AmountMinor},
		Reason: r.Reason, State: refundStateToProto[r.State], Outcome: outcomeToProto[r.Outcome],
		FailureCode: r.DeclineCode, GatewayRefundId: r.GatewayRefundID, Actor: string(r.Actor),
		CreateTime: timestamp(r.CreatedAt), UpdateTime: timestamp(r.UpdatedAt),
	}
	if r.State == order.RefundRefunding {
		p.NextCheckTime = timestamp(r.ReconcileAt)
	}
	return p
}

func attemptToProto(a *order.Attempt) *settlev1.Attempt {
	if a == nil {
		return nil
	}
	return &settlev1.Attempt{
		Id:              a.ID,
		OrderId:         a.OrderID,
		RequestId:       a.RequestID,
		Outcome:         outcomeToProto[a.Outcome],
		DeclineCode:     a.DeclineCode,
		GatewayChargeId: a.GatewayChargeID,
		CreateTime:      timestamp(a.CreatedAt),
		Gateway:         a.Gateway,
		CascadeAfter:    a.CascadeAfter,
		Skipped:         a.Skipped,
	}
}

// newOrderFromProto is a CreateOrder request as the domain takes it; the
// domain validates the fields.
func newOrderFromProto(req *settlev1.CreateOrderRequest) (order.NewOrder, error) {
	if req.GetAmount() == nil {
		return order.NewOrder{}, &order.ValidationError{Field: "amount", Reason: "is required"}
	}
	capture, err := captureModeFromProto(req.GetCapture())
	if err != nil {
		return order.NewOrder{}, err
	}
	return order.NewOrder{
		Capture:           capture,
		MerchantReference: req.GetMerchantReference(),
		Amount:            order.Money{Currency: req.GetAmount().GetCurrency(), AmountMinor: req.GetAmount().GetAmountMinor()},
		PaymentMethod:     req.GetPaymentMethod(),
		Gateway:           req.GetGateway(),
		Routes:            routesFromProto(req.GetRoutes()),
	}, nil
}

// routesFromProto is an order's routes as the domain takes them.
func routesFromProto(rs []*settlev1.Route) []order.Route {
	if len(rs) == 0 {
		return nil
	}
	routes := make([]order.Route, len(rs))
	for i, r := range rs {
		routes[i] = order.Route{Gateway: r.GetGateway(), PaymentMethod: r.GetPaymentMethod()}
	}
	return routes
}

// chargeInputFromProto is a ChargeOrder request as the domain takes it.
func chargeInputFromProto(req *settlev1.ChargeOrderRequest) order.ChargeInput {
	return order.ChargeInput{OrderID: canonicalID(req.GetOrderId()), RequestID: req.GetRequestId(), PaymentMethod: req.GetPaymentMethod(),
		CustomerPresent: req.GetCustomerPresent(), ReturnURL: req.GetReturnUrl(), Customer: req.GetCustomer(),
		ActionResult: req.GetActionResult()}
}

// createAndChargeInputFromProto is the charge of a CreateAndChargeOrder
// request as the domain takes it: ChargeOrder's fields but the order's.
func createAndChargeInputFromProto(req *settlev1.CreateAndChargeOrderRequest) order.ChargeInput {
	return order.ChargeInput{RequestID: req.GetRequestId(), CustomerPresent: req.GetCustomerPresent(),
		ReturnURL: req.GetReturnUrl(), Customer: req.GetCustomer()}
}

// nextActionToProto is the next action of an attempt waiting for the
// customer, or nil.
// noAttemptReason says why a charge that returns no attempt made none,
// from the state the order stands in.
func noAttemptReason(o order.Order, a *order.Attempt) settlev1.NoAttemptReason {
	if a != nil {
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_UNSPECIFIED
	}
	switch o.State {
	case order.StatePaid, order.StatePartiallyRefunded, order.StateRefunded:
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_ALREADY_PAID
	case order.StateCanceled:
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_CANCELED
	case order.StateCharging, order.StateRequiresAction:
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_ATTEMPT_IN_FLIGHT
	case order.StateNeedsReview:
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_IN_REVIEW
	default: // PENDING: an attempt is to be made, there is no reason
		return settlev1.NoAttemptReason_NO_ATTEMPT_REASON_UNSPECIFIED
	}
}

func nextActionToProto(a *order.Attempt) *settlev1.NextAction {
	if a == nil || a.NextAction == (order.NextAction{}) {
		return nil
	}
	return &settlev1.NextAction{RedirectUrl: a.NextAction.RedirectURL, ClientSecret: a.NextAction.ClientSecret}
}

// canonicalID returns an order or attempt id in the canonical form Settle
// writes and PostgreSQL prints: lower case. Ids are normalized here, at the
// edge, because the server keys things by the id's text (WatchOrder's
// subscriptions, which notifications name in lower case). Anything that is
// not UUID-shaped is left alone for validation to refuse.
func canonicalID(id string) string {
	if len(id) != 36 {
		return id
	}
	return strings.ToLower(id)
}
