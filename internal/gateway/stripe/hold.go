package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Authorizations
//
// A charge with order.CaptureManual creates its PaymentIntent with
// capture_method=manual (and, with Config.Multicapture,
// payment_method_options[card][request_multicapture]=if_available); its
// confirm and Lookup's retrieve expand latest_charge, whose
// payment_method_details.card.capture_before is the hold's deadline. Such
// a PaymentIntent reads as the hold (order.Hold), amounts in order minor
// units:
//
//	PaymentIntent                                  outcome    Hold
//	requires_capture                               succeeded  open: authorized = amount_capturable +
//	                                                          amount_received, captured = amount_received
//	succeeded (captured)                           succeeded  captured: authorized = amount,
//	                                                          captured = amount_received
//	canceled after a capture (multicapture: the    succeeded  captured: authorized = amount,
//	  cancel released only the rest)                          captured = amount_received
//	canceled, cancellation_reason automatic        succeeded  expired (Stripe let the hold lapse)
//	canceled after an authorization (its latest    succeeded  voided
//	  charge succeeded), any other reason
//	anything else                                  as for an automatic charge
//
// The calls of order.Capturer, each on the PaymentIntent req.ChargeID with
// a key derived from the capture's or void's id, as a charge's keys are
// from the attempt's:
//
//	POST /v1/payment_intents/<pi>/capture   Idempotency-Key: <capture id>:capture
//	  amount_to_capture=<Stripe units>  [final_capture=false]  expand[]=latest_charge
//	POST /v1/payment_intents/<pi>/cancel    Idempotency-Key: <void id>:void
//	  expand[]=latest_charge
//
// A capture with Final false needs Config.Multicapture; without it, it is
// declined "multicapture_unsupported" before anything is sent. Outcomes,
// by the rules of Charge's table for everything not named here:
//
//	Stripe's answer                                    capture                void
//	200, succeeded (or requires_capture after a        succeeded              -
//	  capture that is not final)
//	200, canceled                                      -                      succeeded
//	200, canceled with captures (multicapture)         -                      declined "already_captured"
//	400 charge_expired_for_capture                     declined "authorization_expired"
//	400 amount_too_large                               declined "amount_too_large"
//	400 charge_already_captured                        declined "already_captured"
//	400 payment_intent_unexpected_state, the intent:
//	  succeeded                                        declined "already_captured"
//	  canceled, automatic                              declined "authorization_expired"
//	  canceled, another reason                         declined               succeeded (released
//	                                                   "authorization_voided" by an earlier void)
//	  never authorized (requires_*)                    declined "not_authorized"
//	400 about final_capture (no multicapture)          declined "multicapture_unsupported"
//	401, 403, 404 (first try)                          not_sent: Settle's key or URL is wrong, logged
//	other 4xx (first try)                              declined "rejected_<code>"
//	429 (first try), no connection ever obtained       not_sent
//	409, 5xx, no answer, a 4xx after a retry           unknown
//
// LookupCapture and LookupVoid read the PaymentIntent first (GET, with
// latest_charge expanded). What that settles without asking more:
//
//	canceled, nothing received     capture: declined "authorization_expired" or "authorization_voided"
//	canceled                       void: succeeded, or declined "authorization_expired" when automatic
//	succeeded, or any received     void: declined "already_captured"
//	never authorized               declined "not_authorized"
//
// Otherwise, while the capture or void is younger than Config.ReplayWindow
// (its CreatedAt), the lookup replays it under its own key: Stripe answers
// with the saved answer of the first request, or, if that one never
// reached it, executes it now. Either way the answer is the request's one
// fate, and a first request still on its way can no longer do anything
// else: the same rule as a charge's replay of its create, within the
// same 24-hour retention of Stripe's keys. (The replay does move money
// when the first request never arrived: it is the capture Settle already
// claimed and the merchant asked for, done once.) Past the window, a hold
// with nothing captured is not found (the reconciler trusts that past its
// no-show horizon) and one with captures that cannot be told apart returns
// an error wrapping order.ErrLookupExpired, for a person.

var _ order.Capturer = (*Gateway)(nil)

// The suffixes of the idempotency keys of a capture and a void.
const (
	captureKey = ":capture"
	voidKey    = ":void"
)

// The decline codes of captures and voids.
const (
	declineExpired         = "authorization_expired"
	declineVoided          = "authorization_voided"
	declineAlreadyCaptured = "already_captured"
	declineAmountTooLarge  = "amount_too_large"
	declineNotAuthorized   = "not_authorized"
	declineNoMulticapture  = "multicapture_unsupported"
	// reasonLapsed is the cancellation_reason Stripe gives a
	// PaymentIntent it canceled because its authorization lapsed.
	reasonLapsed = stripego.PaymentIntentCancellationReasonAutomatic
)

// authorized reads a manual-capture PaymentIntent as a hold, when it is
// one (see above); false sends the caller to the rules of an automatic
// charge.
func (g *Gateway) authorized(pi *stripego.PaymentIntent) (order.Result, bool) {
	h, ok := holdOf(pi)
	if !ok {
		return order.Result{}, false
	}
	return order.Result{Outcome: order.OutcomeSucceeded, Hold: h}, true
}

// holdOf is the hold a PaymentIntent is, or false when it never held
// anything (not yet confirmed, declined, canceled unconfirmed).
func holdOf(pi *stripego.PaymentIntent) (*order.Hold, bool) {
	cur := strings.ToUpper(string(pi.Currency))
	h := &order.Hold{
		AuthorizedMinor: minorAmount(cur, pi.Amount),
		CapturedMinor:   minorAmount(cur, pi.AmountReceived),
	}
	if c := pi.LatestCharge; c != nil && c.PaymentMethodDetails != nil && c.PaymentMethodDetails.Card != nil &&
		c.PaymentMethodDetails.Card.CaptureBefore > 0 {
		h.CaptureBefore = time.Unix(c.PaymentMethodDetails.Card.CaptureBefore, 0).UTC()
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresCapture:
		h.State = order.HoldOpen
		h.AuthorizedMinor = minorAmount(cur, pi.AmountCapturable+pi.AmountReceived)
	case stripego.PaymentIntentStatusSucceeded:
		h.State = order.HoldCaptured
	case stripego.PaymentIntentStatusCanceled:
		switch {
		case pi.AmountReceived > 0:
			// A cancel after captures (multicapture) releases only
			// what is left: what was captured stays captured.
			h.State = order.HoldCaptured
		case pi.CancellationReason == reasonLapsed:
			// Stripe cancels an uncaptured PaymentIntent when its
			// authorization lapses, with this reason.
			h.State = order.HoldExpired
		case pi.LatestCharge != nil && pi.LatestCharge.Status == stripego.ChargeStatusSucceeded:
			h.State = order.HoldVoided
		default:
			return nil, false
		}
	case stripego.PaymentIntentStatusProcessing, stripego.PaymentIntentStatusRequiresAction,
		stripego.PaymentIntentStatusRequiresConfirmation, stripego.PaymentIntentStatusRequiresPaymentMethod:
		return nil, false
	default:
		return nil, false
	}
	return h, true
}

// minorAmount converts an amount in the units Stripe counts a currency in
// back into ISO 4217 minor units: stripeAmount's inverse.
func minorAmount(currency string, units int64) int64 {
	switch currency {
	case "ISK":
		return units / 100
	case "MGA":
		return units * 100
	}
	return units
}

// Capture captures req.Amount of the authorization req.ChargeID (see
// above). It always reports an outcome; a non-nil error explains an
// unknown or not-sent outcome or a rejection, and is for logs.
func (g *Gateway) Capture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	amount, err := g.checkCapture(req)
	if err != nil {
		var d declinedError
		if errors.As(err, &d) {
			return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: d.code}, fmt.Errorf("stripe: capture %s: %w", req.CaptureID, err)
		}
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("stripe: capture %s: %w", req.CaptureID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.holdAnswer(ctx, captureCall(req, amount), g.sendCapture(ctx, req, amount))
	if err != nil {
		err = fmt.Errorf("stripe: capture %s: %w", req.CaptureID, err)
	}
	return res, err
}

// Void cancels the PaymentIntent req.ChargeID, releasing its hold (see
// above).
func (g *Gateway) Void(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	if err := checkVoid(req); err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("stripe: void %s: %w", req.VoidID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.holdAnswer(ctx, voidCall(req), g.sendVoid(ctx, req))
	if err != nil {
		err = fmt.Errorf("stripe: void %s: %w", req.VoidID, err)
	}
	return res, err
}

// LookupCapture says what became of the capture req (see above):
// OutcomeSucceeded, OutcomeDeclined, OutcomeNotFound, or an error, with
// OutcomeUnknown, when Stripe cannot say now.
func (g *Gateway) LookupCapture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	res, err = g.lookupCapture(ctx, req)
	if err != nil {
		res.Outcome = order.OutcomeUnknown
		err = fmt.Errorf("stripe: lookup capture %s: %w", req.CaptureID, err)
	}
	return res, err
}

func (g *Gateway) lookupCapture(ctx context.Context, req order.CaptureRequest) (order.Result, error) {
	amount, err := g.checkCapture(req)
	if err != nil {
		var d declinedError
		if errors.As(err, &d) {
			// Capture never sends such a capture.
			return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: d.code}, nil
		}
		return unknown(err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	call := captureCall(req, amount)
	pi, err := g.retrieveHold(ctx, call)
	if err != nil {
		return unknown(err)
	}
	switch {
	case pi.Status == stripego.PaymentIntentStatusCanceled && pi.AmountReceived == 0:
		// Nothing was captured, and nothing can be any more.
		if pi.CancellationReason == reasonLapsed {
			return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineExpired}, nil
		}
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineVoided}, nil
	case neverAuthorized(pi):
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineNotAuthorized}, nil
	case g.replayable(req.CreatedAt):
		return g.replayed(ctx, call, g.sendCapture(ctx, req, amount))
	case pi.Status == stripego.PaymentIntentStatusRequiresCapture && pi.AmountReceived == 0:
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	default:
		return unknown(fmt.Errorf("PaymentIntent %s has captures that cannot be told apart past the %s replay window "+
			"(Stripe keeps idempotency keys for 24h): %w", clip(pi.ID), g.window, order.ErrLookupExpired))
	}
}

// LookupVoid says what became of the void req (see above).
func (g *Gateway) LookupVoid(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	res, err = g.lookupVoid(ctx, req)
	if err != nil {
		res.Outcome = order.OutcomeUnknown
		err = fmt.Errorf("stripe: lookup void %s: %w", req.VoidID, err)
	}
	return res, err
}

func (g *Gateway) lookupVoid(ctx context.Context, req order.VoidRequest) (order.Result, error) {
	if err := checkVoid(req); err != nil {
		return unknown(err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	call := voidCall(req)
	pi, err := g.retrieveHold(ctx, call)
	if err != nil {
		return unknown(err)
	}
	switch {
	case pi.Status == stripego.PaymentIntentStatusCanceled:
		return g.holdAnswer(ctx, call, exchange{pi: pi, sent: 1})
	case pi.Status == stripego.PaymentIntentStatusSucceeded || pi.AmountReceived > 0:
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineAlreadyCaptured}, nil
	case neverAuthorized(pi):
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineNotAuthorized}, nil
	case g.replayable(req.CreatedAt):
		return g.replayed(ctx, call, g.sendVoid(ctx, req))
	default:
		// Still held, and too old for a replay: the void did not happen.
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	}
}

// neverAuthorized reports a PaymentIntent that never held anything and
// never will without a confirm, which no lookup sends.
func neverAuthorized(pi *stripego.PaymentIntent) bool {
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation,
		stripego.PaymentIntentStatusRequiresAction:
		return true
	case stripego.PaymentIntentStatusCanceled, stripego.PaymentIntentStatusProcessing,
		stripego.PaymentIntentStatusRequiresCapture, stripego.PaymentIntentStatusSucceeded:
		return false
	default:
		return false
	}
}

// replayable reports whether a capture or void made at created is young
// enough for Stripe to still hold its key.
func (g *Gateway) replayable(created time.Time) bool {
	return !created.IsZero() && g.now().Sub(created) <= g.window
}

// replayed is a lookup's reading of a replay: only succeeded and declined
// are answers; anything else means Stripe cannot say now.
func (g *Gateway) replayed(ctx context.Context, call holdCall, ex exchange) (order.Result, error) {
	res, err := g.holdAnswer(ctx, call, ex)
	switch res.Outcome {
	case order.OutcomeSucceeded, order.OutcomeDeclined:
		return res, nil
	case order.OutcomeNotSent, order.OutcomeRefused, order.OutcomeRequiresAction, order.OutcomeUnknown, order.OutcomeNotFound:
		if err == nil {
			err = fmt.Errorf("the replay of the %s did not tell its fate", call.op)
		}
		return unknown(fmt.Errorf("replay of the %s: %w", call.op, err))
	default:
		return unknown(fmt.Errorf("replay of the %s: %w", call.op, err))
	}
}

// holdCall is what holdAnswer needs to read an answer about a capture or a
// void.
type holdCall struct {
	op               string // "capture" or "void"
	orderID, ref, pi string
	// attempt is the authorizing attempt's id, when known.
	attempt string
	// currency and amount (Stripe units) of a capture, and its Final.
	currency string
	amount   int64
	final    bool
}

func captureCall(req order.CaptureRequest, amount int64) holdCall {
	return holdCall{op: "capture", orderID: req.OrderID, ref: req.CaptureID, pi: req.ChargeID, attempt: req.ChargeAttemptID,
		currency: req.Amount.Currency, amount: amount, final: req.Final}
}

func voidCall(req order.VoidRequest) holdCall {
	return holdCall{op: "void", orderID: req.OrderID, ref: req.VoidID, pi: req.ChargeID, attempt: req.ChargeAttemptID}
}

// declinedError is a capture Stripe would refuse, refused before sending.
type declinedError struct{ code, reason string }

func (e declinedError) Error() string { return e.reason }

// checkCapture refuses what Stripe would refuse before anything is sent,
// and returns the amount in Stripe's units.
func (g *Gateway) checkCapture(req order.CaptureRequest) (int64, error) {
	switch {
	case req.CaptureID == "" || len(req.CaptureID)+len(captureKey) > 255:
		return 0, errors.New("a capture id short enough for Stripe's 255-character idempotency keys is required")
	case !strings.HasPrefix(req.ChargeID, "pi_"):
		return 0, errors.New("the authorization's PaymentIntent id (pi_...) is required to capture it")
	case req.Amount.AmountMinor <= 0 || req.Amount.Currency == "":
		return 0, errors.New("a positive amount and a currency are required")
	case !req.Final && !g.multicapture:
		return 0, declinedError{code: declineNoMulticapture,
			reason: "a capture that is not final needs Stripe's multicapture (Config.Multicapture); nothing was sent"}
	}
	return stripeAmount(req.Amount)
}

// checkVoid refuses what Stripe would refuse before anything is sent.
func checkVoid(req order.VoidRequest) error {
	switch {
	case req.VoidID == "" || len(req.VoidID)+len(voidKey) > 255:
		return errors.New("a void id short enough for Stripe's 255-character idempotency keys is required")
	case !strings.HasPrefix(req.ChargeID, "pi_"):
		return errors.New("the authorization's PaymentIntent id (pi_...) is required to void it")
	}
	return nil
}

// sendCapture sends the capture req; Capture and LookupCapture's replay
// send exactly the same request.
func (g *Gateway) sendCapture(ctx context.Context, req order.CaptureRequest, amount int64) exchange {
	return g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := &stripego.PaymentIntentCaptureParams{AmountToCapture: stripego.Int64(amount)}
		if !req.Final {
			// Keep the rest of the hold for the captures to come.
			p.FinalCapture = stripego.Bool(false)
		}
		p.AddExpand("latest_charge")
		p.SetIdempotencyKey(req.CaptureID + captureKey)
		p.Context = ctx
		return g.intents.Capture(req.ChargeID, p)
	})
}

// sendVoid sends the void req; Void and LookupVoid's replay send exactly
// the same request.
func (g *Gateway) sendVoid(ctx context.Context, req order.VoidRequest) exchange {
	return g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := &stripego.PaymentIntentCancelParams{}
		p.AddExpand("latest_charge")
		p.SetIdempotencyKey(req.VoidID + voidKey)
		p.Context = ctx
		return g.intents.Cancel(req.ChargeID, p)
	})
}

// retrieveHold reads the PaymentIntent of a capture or void.
func (g *Gateway) retrieveHold(ctx context.Context, call holdCall) (*stripego.PaymentIntent, error) {
	got := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := &stripego.PaymentIntentParams{}
		p.AddExpand("latest_charge")
		p.Context = ctx
		return g.intents.Get(call.pi, p)
	})
	if got.err != nil {
		_, err := g.lookupError(ctx, call.orderID, slog.String(call.op+"_id", call.ref), got.err, "retrieve")
		return nil, err
	}
	if err := call.belongs(got.pi); err != nil {
		return nil, err
	}
	return got.pi, nil
}

// belongs checks that an answer is about the call's PaymentIntent.
func (c holdCall) belongs(pi *stripego.PaymentIntent) error {
	switch {
	case pi == nil || pi.ID == "":
		return errors.New("the answer from Stripe holds no PaymentIntent")
	case pi.ID != c.pi:
		return fmt.Errorf("the answer is about PaymentIntent %s, not %s", clip(pi.ID), clip(c.pi))
	case c.currency != "" && !strings.EqualFold(string(pi.Currency), c.currency):
		return fmt.Errorf("PaymentIntent %s is in %s, not %s", clip(pi.ID), clip(string(pi.Currency)), c.currency)
	}
	if a, ok := pi.Metadata["attempt_id"]; ok && c.attempt != "" && a != c.attempt {
		return fmt.Errorf("PaymentIntent %s belongs to attempt %q, not %q", clip(pi.ID), clip(a), c.attempt)
	}
	return nil
}

// holdAnswer turns what a capture or a void came to into an outcome (see
// the table above).
func (g *Gateway) holdAnswer(ctx context.Context, call holdCall, ex exchange) (order.Result, error) {
	if ex.err != nil {
		return g.holdError(ctx, call, ex)
	}
	pi := ex.pi
	if err := call.belongs(pi); err != nil {
		return unknown(err)
	}
	if call.op == "void" {
		if pi.Status != stripego.PaymentIntentStatusCanceled {
			return unknown(fmt.Errorf("the void of PaymentIntent %s answered it %q", clip(pi.ID), clip(string(pi.Status))))
		}
		return voided(pi)
	}
	h, ok := holdOf(pi)
	switch {
	case !ok, pi.AmountReceived < call.amount:
		return unknown(fmt.Errorf("the capture of PaymentIntent %s answered it %q with %d received",
			clip(pi.ID), clip(string(pi.Status)), pi.AmountReceived))
	case h.State == order.HoldCaptured, h.State == order.HoldOpen && !call.final:
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pi.ID, Hold: h}, nil
	}
	return unknown(fmt.Errorf("the capture of PaymentIntent %s answered it %q", clip(pi.ID), clip(string(pi.Status))))
}

// holdError classifies an error answer to a capture or a void, by the
// rules of classify.
func (g *Gateway) holdError(ctx context.Context, call holdCall, ex exchange) (order.Result, error) {
	declined := func(code string) (order.Result, error) {
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: call.pi, DeclineCode: code}, nil
	}
	var se *stripego.Error
	if !errors.As(ex.err, &se) {
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s not sent: %w", call.op, ex.err)
		}
		return unknown(fmt.Errorf("%s: %w", call.op, noAnswer(ex.err)))
	}
	status, first := se.HTTPStatusCode, ex.sent <= 1
	switch {
	case se.Type == stripego.ErrorTypeIdempotency:
		g.log.LogAttrs(ctx, slog.LevelError, "stripe idempotency_error: one "+call.op+" was sent with two sets of parameters (a bug); its outcome is unknown",
			slog.String(call.op+"_id", call.ref), slog.String("order_id", call.orderID),
			slog.String("request_id", se.RequestID), slog.String("stripe_message", g.redact(se.Msg)))
		return unknown(fmt.Errorf("%s: %s", call.op, g.describe(se)))
	case status == http.StatusConflict || se.Code == stripego.ErrorCodeIdempotencyKeyInUse:
		return unknown(fmt.Errorf("%s: %s; an earlier request with this key is in flight", call.op, g.describe(se)))
	case se.Type == stripego.ErrorTypeCard && first:
		return declined(declineCode(se, "card_declined"))
	case !first || status >= 500:
		return unknown(fmt.Errorf("%s: %s", call.op, g.describe(se)))
	case status == http.StatusTooManyRequests:
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s not executed: %s", call.op, g.describe(se))
	case se.Code == stripego.ErrorCodeChargeExpiredForCapture:
		return declined(declineExpired)
	case se.Code == stripego.ErrorCodeAmountTooLarge:
		return declined(declineAmountTooLarge)
	case se.Code == stripego.ErrorCodeChargeAlreadyCaptured:
		return declined(declineAlreadyCaptured)
	case se.Code == stripego.ErrorCodePaymentIntentUnexpectedState && se.PaymentIntent != nil:
		if err := call.belongs(se.PaymentIntent); err != nil {
			return unknown(err)
		}
		return g.unexpectedHold(call, se.PaymentIntent)
	case call.op == "capture" && status == http.StatusBadRequest && se.Param == "final_capture":
		return declined(declineNoMulticapture)
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
		g.log.LogAttrs(ctx, slog.LevelError, "stripe refused Settle's API key or request: a configuration error; nothing was done",
			slog.String(call.op+"_id", call.ref), slog.String("order_id", call.orderID),
			slog.Int("status", status), slog.String("request_id", se.RequestID))
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s refused, nothing was done: %s", call.op, g.describe(se))
	case status >= 400 && status < 500:
		code := string(se.Code)
		if code == "" {
			code = fmt.Sprint(status)
		}
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: call.pi, DeclineCode: "rejected_" + code},
			fmt.Errorf("%s rejected, nothing was done: %s", call.op, g.describe(se))
	default:
		return unknown(fmt.Errorf("%s: %s", call.op, g.describe(se)))
	}
}

// voided reads a canceled PaymentIntent as a void's answer: the hold is
// released, unless Stripe let it lapse first, or part of it was captured
// (a cancel after a multicapture releases only the rest: no void, the
// hold stands captured).
func voided(pi *stripego.PaymentIntent) (order.Result, error) {
	cur := strings.ToUpper(string(pi.Currency))
	h := &order.Hold{State: order.HoldVoided, AuthorizedMinor: minorAmount(cur, pi.Amount),
		CapturedMinor: minorAmount(cur, pi.AmountReceived)}
	switch {
	case pi.AmountReceived > 0:
		h.State = order.HoldCaptured
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: pi.ID, DeclineCode: declineAlreadyCaptured, Hold: h}, nil
	case pi.CancellationReason == reasonLapsed:
		h.State = order.HoldExpired
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: pi.ID, DeclineCode: declineExpired, Hold: h}, nil
	}
	return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: pi.ID, Hold: h}, nil
}

// unexpectedHold reads the PaymentIntent Stripe refused a capture or a
// void of because of its status.
func (g *Gateway) unexpectedHold(call holdCall, pi *stripego.PaymentIntent) (order.Result, error) {
	declined := func(code string) (order.Result, error) {
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: pi.ID, DeclineCode: code}, nil
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		return declined(declineAlreadyCaptured)
	case stripego.PaymentIntentStatusCanceled:
		switch {
		case pi.AmountReceived > 0:
			// Canceled after captures: what was captured stands.
			return declined(declineAlreadyCaptured)
		case pi.CancellationReason == reasonLapsed:
			return declined(declineExpired)
		case call.op == "void":
			// Released already, by an earlier void: what this one asks for.
			return voided(pi)
		}
		return declined(declineVoided)
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation,
		stripego.PaymentIntentStatusRequiresAction:
		return declined(declineNotAuthorized)
	case stripego.PaymentIntentStatusProcessing, stripego.PaymentIntentStatusRequiresCapture:
		return unknown(fmt.Errorf("the %s of PaymentIntent %s was refused while it is %q", call.op, clip(pi.ID), clip(string(pi.Status))))
	default:
		return unknown(fmt.Errorf("the %s of PaymentIntent %s was refused while it is %q", call.op, clip(pi.ID), clip(string(pi.Status))))
	}
}
