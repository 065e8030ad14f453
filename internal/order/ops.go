package order

import (
	"context"
	"errors"
	"fmt"
)

// Resolve records an operator's decision for an order in NEEDS_REVIEW:
// ev is EventResolvePaid (chargeID required), EventResolvePending or
// EventResolveCanceled. actor is the operator (see Operator), scope the
// merchants their key reaches; reason is required.
func (s *Service) Resolve(ctx context.Context, scope Scope, id string, ev EventName, chargeID, reason string, actor Actor) (Order, error) {
	if err := CheckID("order_id", id); err != nil {
		return Order{}, err
	}
	switch ev {
	case EventResolvePaid:
		if err := checkText("gateway_charge_id", chargeID, 1, MaxTokenLen); err != nil {
			return Order{}, err
		}
	case EventResolvePending, EventResolveCanceled:
		if chargeID != "" {
			return Order{}, &ValidationError{Field: "gateway_charge_id", Reason: "is only for RESOLUTION_PAID"}
		}
	default:
		return Order{}, &ValidationError{Field: "resolution", Reason: "must be RESOLUTION_PAID, RESOLUTION_PENDING or RESOLUTION_CANCELED"}
	}
	if err := CheckReason("reason", reason, true); err != nil {
		return Order{}, err
	}
	if actor == "" {
		return Order{}, errors.New("resolve: no operator identity")
	}
	if ev != EventResolvePaid {
		if err := s.checkNoCharge(ctx, scope, id); err != nil {
			return Order{}, err
		}
	} else if o, err := s.store.Order(ctx, scope, id); err != nil {
		return Order{}, err
	} else if o.Capture == CaptureManual {
		// PAID would say the money was taken; a capture-manual charge only
		// holds it, and the hold's amount and expiry are the gateway's to
		// tell, which the reconciler's lookup of the order in review does.
		return Order{}, &HoldError{Msg: "the order was created with capture MANUAL: its charge only authorizes, so it cannot be " +
			"resolved PAID; resolve it PENDING or CANCELED once the gateway shows no authorization, or capture it after it is AUTHORIZED"}
	}
	o, err := s.store.Transition(ctx, scope, id, func(o Order) (Move, error) {
		to, err := Next(o.State, ev)
		m := Move{Event: ev, To: to, Actor: actor, Reason: reason}
		if ev == EventResolvePaid {
			m.Attempt = &Result{Outcome: OutcomeSucceeded, ChargeID: chargeID}
		}
		return m, err
	})
	if err == nil {
		Transition{OrderID: o.ID, AttemptID: o.CurrentAttempt, From: StateNeedsReview, To: o.State, Event: ev, Actor: actor}.Log(ctx, s.log)
	}
	return o, err
}

// checkNoCharge asks the gateway about every attempt of order id that might
// have charged the customer (every one it has not declined, and that was
// not provably never sent) before an operator may resolve the order as
// unpaid: an operator's word alone must not forget a charge. It returns a
// *ChargeFoundError naming the charge when the gateway reports one, and a
// *GatewayUnsureError when the gateway cannot say. Only an order in
// NEEDS_REVIEW is asked about; the transition refuses the others.
func (s *Service) checkNoCharge(ctx context.Context, scope Scope, id string) error {
	o, err := s.store.Order(ctx, scope, id)
	if err != nil || o.State != StateNeedsReview {
		return err
	}
	_, attempts, err := s.store.History(ctx, o.MerchantID, id)
	if err != nil {
		return err
	}
	for _, a := range attempts {
		if a.Outcome == OutcomeDeclined || a.Outcome == OutcomeNotSent {
			continue
		}
		// Each attempt is asked at its own gateway: an order with routes
		// may have attempts on several.
		res, err := s.lookupForOperator(ctx, o, a)
		switch {
		case err != nil:
			return &GatewayUnsureError{AttemptID: a.ID, Err: err}
		case res.Outcome == OutcomeSucceeded:
			return &ChargeFoundError{AttemptID: a.ID, ChargeID: res.ChargeID}
		}
	}
	return nil
}

// lookupForOperator asks the gateway of attempt a of order o about it for
// an operator's decision, within one gateway call's timeout.
func (s *Service) lookupForOperator(ctx context.Context, o Order, a Attempt) (Result, error) {
	name := o.AttemptGateway(a)
	gw, ok := s.gateways[name]
	if !ok {
		return Result{}, fmt.Errorf("gateway %q is not configured here", name)
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.GatewayTimeout)
	defer cancel()
	res, err := gw.Lookup(lctx, LookupRequest(o, a))
	GatewayCall{Op: "lookup", Gateway: name, OrderID: o.ID, AttemptID: a.ID, Outcome: res.Outcome, Err: err}.Log(ctx, s.log)
	return res, err
}
