package order

import (
	"context"
	"errors"
)

// Resolve records an operator's decision for an order in NEEDS_REVIEW:
// ev is EventResolvePaid (chargeID required), EventResolvePending or
// EventResolveCanceled. actor is the operator (see Operator); reason is required.
func (s *Service) Resolve(ctx context.Context, id string, ev EventName, chargeID, reason string, actor Actor) (Order, error) {
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
	o, err := s.store.Transition(ctx, AnyMerchant, id, func(o Order) (Move, error) {
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
