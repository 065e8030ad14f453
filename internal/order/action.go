package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The completion of a customer's action (3-D Secure) by what the gateway
// handed the customer's browser on return: a ChargeOrder replay with an
// action result. It is an operation of the charge's lifecycle (see
// operation.go): its claim gives the waiting attempt a lease, its call
// sends the result, and it settles from REQUIRES_ACTION as resumeOp does.

// ActionCompleter is a Gateway to which Settle sends the result of a
// customer's action itself: Adyen, whose /payments/details takes the
// redirectResult it appended to the return URL. A gateway without it
// learns the result by itself (Stripe, the simulator), and a lookup of the
// attempt says it.
type ActionCompleter interface {
	// CompleteAction sends result, the opaque text the gateway handed the
	// customer's browser on return from its challenge, for the attempt
	// req (as LookupRequest builds it), and reports what the payment came
	// to, as Charge does. A replay with the same result must be harmless
	// (the gateway's idempotency key is derived from the attempt).
	// OutcomeRefused says the gateway did not accept the result (nothing
	// was processed). The result never appears in errors.
	CompleteAction(ctx context.Context, req ChargeRequest, result string) (Result, error)
}

// MaxActionResultLen bounds an action result: Adyen's redirectResult is
// well under it.
const MaxActionResultLen = 8192

// ActionError refuses an action result that the order cannot take as it
// stands: it waits for no action of this request's attempt, or its
// gateway learns the action's result by itself.
type ActionError struct {
	Reason string
}

func (e *ActionError) Error() string { return "action_result: " + e.Reason }

// CheckActionResult validates an action result as every client's text
// (1 to MaxActionResultLen characters, no card number), each an ASCII
// letter, a digit or one of - _ . ~ + / = ! % * (base64, base64url, and
// either percent-encoded). A gateway's opaque text is no card number: in
// base64 the digits of one stand beside letters, which the card rule
// reads as an identifier. The reason never repeats the value.
func CheckActionResult(s string) error {
	if err := checkText("action_result", s, 1, MaxActionResultLen); err != nil {
		return err
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '~', c == '+', c == '/', c == '=', c == '!', c == '%', c == '*':
		default:
			return &ValidationError{Field: "action_result",
				Reason: "must be the gateway's text as it came back: letters, digits and - _ . ~ + / = ! % * only"}
		}
	}
	return nil
}

// completeAction is Charge with an action result: it sends the result to
// the gateway for the attempt in.RequestID names, which must be the
// order's attempt waiting for the customer, and settles what the gateway
// says. A replay once that challenge ended answers the order as it
// stands. No new attempt is ever made here.
func (s *Service) completeAction(ctx context.Context, merchantID string, in ChargeInput) (Order, *Attempt, error) {
	o, a, err := s.store.OrderAttempt(ctx, merchantID, in.OrderID, AttemptID(merchantID, in.OrderID, in.RequestID))
	if errors.Is(err, ErrNotFound) {
		if _, oerr := s.store.Order(ctx, ForMerchant(merchantID), in.OrderID); oerr != nil {
			return Order{}, nil, oerr
		}
		return Order{}, nil, &ActionError{Reason: "request_id names no charge of this order: send the request_id of the charge that answered REQUIRES_ACTION"}
	}
	if err != nil {
		return Order{}, nil, fmt.Errorf("read order %s: %w", in.OrderID, err)
	}
	if err := in.sameAttempt(a); err != nil {
		return Order{}, nil, err
	}
	ac, ok := s.gateways[o.AttemptGateway(a)].(ActionCompleter)
	if !ok {
		return Order{}, nil, &ActionError{Reason: fmt.Sprintf(
			"gateway %q learns the result of the customer's action by itself: replay the request without action_result", o.AttemptGateway(a))}
	}
	if o.State != StateRequiresAction || o.CurrentAttempt != a.ID {
		ended, err := s.challengeEnded(ctx, o, a.ID)
		if err != nil || ended {
			// A replay: the challenge of this attempt ended (a notification,
			// an earlier call, the expiry). Nothing is sent again.
			return o, &a, err
		}
		return Order{}, nil, &ActionError{Reason: fmt.Sprintf(
			"is taken only while the order waits for the customer (REQUIRES_ACTION) on this request_id's attempt; the order is %s: GetOrder shows it", o.State)}
	}
	op := &actionOp{resumeOp: resumeOp{chargeOp{s: s, merchantID: merchantID, in: in, o: o, a: a}}, gw: ac}
	op.att = &op.a
	return op.answer(&op.chargeOp, s.run(ctx, op))
}

// challengeEnded reports whether attemptID is o's current attempt and
// its challenge ended: the order left REQUIRES_ACTION on it.
func (s *Service) challengeEnded(ctx context.Context, o Order, attemptID string) (bool, error) {
	if o.CurrentAttempt != attemptID {
		return false, nil
	}
	events, _, err := s.store.History(ctx, o.MerchantID, o.ID)
	if err != nil {
		return false, fmt.Errorf("read order %s history: %w", o.ID, err)
	}
	for _, e := range events {
		if e.From == StateRequiresAction && e.AttemptID == attemptID {
			return true, nil
		}
	}
	return false, nil
}

// actionOp sends an action result for an attempt waiting for the
// customer: the claim leases the attempt, the call is the gateway's
// CompleteAction, and the settle is resumeOp's, from REQUIRES_ACTION and
// only on a definite answer; an unknown one leaves the order waiting for
// the reconciler, never failed.
type actionOp struct {
	resumeOp
	gw ActionCompleter
}

// claim gives the waiting attempt a lease under its row lock, guarded by
// its still waiting: no expiry of the reconciler starts before the call's
// deadline and the grace have passed, so that the result cannot reach the
// gateway beside the expiry's cancel. It changes nothing else.
func (op *actionOp) claim(ctx context.Context) (bool, error) {
	st := Settlement{MerchantID: op.o.MerchantID, OrderID: op.o.ID, AttemptID: op.a.ID, From: StateRequiresAction,
		Result:    Result{Outcome: op.a.Outcome, ChargeID: op.a.GatewayChargeID, DeclineCode: op.a.DeclineCode},
		RecheckIn: op.s.cfg.GatewayTimeout + op.s.cfg.Grace, LastError: op.o.LastError, Actor: ActorAPI}
	o, ok, err := op.s.store.Settle(ctx, st)
	if err != nil {
		return false, fmt.Errorf("lease order %s attempt %s: %w", op.o.ID, op.a.ID, err)
	}
	if !ok {
		// The action ended meanwhile (a notification, the expiry): say
		// how the order stands.
		return false, op.reread(ctx)
	}
	op.o = o
	return true, nil
}

// claimed logs nothing: the lease moves no state.
func (op *actionOp) claimed(context.Context) {}

func (op *actionOp) call(ctx context.Context) (Result, error) {
	o, a := &op.o, &op.a
	if err := op.s.cfg.Budgets[o.Gateway].WaitCharge(ctx); err != nil {
		return Result{Outcome: OutcomeNotSent}, err
	}
	req := LookupRequest(*o, *a)
	req.CustomerPresent = true
	start := time.Now()
	res, err := op.gw.CompleteAction(ctx, req, op.in.ActionResult)
	GatewayCall{Op: "complete_action", Gateway: o.Gateway, OrderID: o.ID, AttemptID: a.ID, RequestID: op.in.RequestID,
		Outcome: res.Outcome, Latency: time.Since(start), Err: err}.Log(ctx, op.s.log)
	return res, err
}

func (op *actionOp) settle(ctx context.Context, res Result, gerr error) (bool, error) {
	won, err := op.resumeOp.settle(ctx, res, gerr)
	switch {
	case err != nil || !won:
		return won, err
	case errors.Is(gerr, ErrBudgetExhausted):
		return true, fmt.Errorf("complete the action of order %s attempt %s: %w", op.o.ID, op.a.ID, gerr)
	case res.Outcome == OutcomeRefused:
		return true, &ValidationError{Field: "action_result",
			Reason: "was not accepted by the gateway: send the text it appended to return_url, unchanged; nothing was charged and the order still waits for the customer"}
	}
	return true, nil
}
