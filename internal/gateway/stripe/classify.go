package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// classify turns an error answer to one of Charge's steps (step is "create"
// or "confirm") into an outcome. Every rule of the package documentation's
// table of Charge's outcomes lives here or in confirmedOutcome. The error
// explains every outcome but a success or a decline (a rejection is
// explained too), and quotes Stripe only through describe.
func (g *Gateway) classify(ctx context.Context, req order.ChargeRequest, amount int64, ex exchange, step string) (order.Result, error) {
	var se *stripego.Error
	if !errors.As(ex.err, &se) {
		// No answer from Stripe, or one that could not be decoded.
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s not sent: %w", step, ex.err)
		}
		return unknown(fmt.Errorf("%s: %w", step, noAnswer(ex.err)))
	}

	status, first := se.HTTPStatusCode, ex.sent <= 1
	switch {
	case se.Type == stripego.ErrorTypeIdempotency:
		// The same key with other parameters: Settle built two different
		// requests for one step of an attempt. That is a bug, and the
		// first request's fate stays unknown until someone looks.
		g.log.LogAttrs(ctx, slog.LevelError, "stripe idempotency_error: one attempt was sent with two sets of parameters (a bug); its outcome is unknown",
			slog.String("attempt_id", req.AttemptID), slog.String("order_id", req.OrderID), slog.String("step", step),
			slog.String("request_id", se.RequestID), slog.String("stripe_message", g.redact(se.Msg)))
		return unknown(fmt.Errorf("%s: %s", step, g.describe(se)))
	case status == http.StatusConflict || se.Code == stripego.ErrorCodeIdempotencyKeyInUse:
		// An earlier request with this key is still being processed.
		return unknown(fmt.Errorf("%s: %s; an earlier request with this key is in flight", step, g.describe(se)))
	case se.Type == stripego.ErrorTypeCard:
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineCode(se, "card_declined")}, nil
	case !first || status >= 500:
		// After a retry, an earlier try may have executed, and a refusal of
		// a later one proves nothing; a 5xx is saved with the key.
		return unknown(fmt.Errorf("%s: %s", step, g.describe(se)))
	case status == http.StatusTooManyRequests:
		// Stripe refused the only request sent before executing it, and
		// saved nothing with its key.
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s not executed: %s", step, g.describe(se))
	case se.Code == stripego.ErrorCodePaymentIntentUnexpectedState && se.PaymentIntent != nil:
		// The PaymentIntent was not in a state to confirm: say what it is.
		if err := belongs(req, amount, se.PaymentIntent); err != nil {
			return unknown(err)
		}
		return g.confirmedOutcome(ctx, req, amount, se.PaymentIntent)
	case refusesSettle(se):
		g.log.LogAttrs(ctx, slog.LevelError, "stripe refused Settle's API key or request: a configuration error, not a decline; nothing was charged",
			slog.String("attempt_id", req.AttemptID), slog.String("order_id", req.OrderID), slog.String("step", step),
			slog.Int("status", status), slog.String("request_id", se.RequestID))
		return order.Result{Outcome: order.OutcomeRefused}, fmt.Errorf("%s refused, nothing was charged: %s", step, g.describe(se))
	case status >= 400 && status < 500:
		// Stripe refused the only request sent before it executed, for
		// something about the order (its payment method, its amount):
		// nothing was charged.
		code := string(se.Code)
		if code == "" {
			code = strconv.Itoa(status)
		}
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_" + code},
			fmt.Errorf("%s rejected, nothing was charged: %s", step, g.describe(se))
	default:
		return unknown(fmt.Errorf("%s: %s", step, g.describe(se)))
	}
}

// refusesSettle reports a refusal that is Settle's fault, not the order's:
// its key is wrong or lacks a permission (401, 403), its base URL is wrong
// (404 for an endpoint), or it sent a parameter Stripe does not accept.
func refusesSettle(se *stripego.Error) bool {
	switch se.HTTPStatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		code := string(se.Code)
		return se.Type == stripego.ErrorTypeInvalidRequest && (code == "" || strings.HasPrefix(code, "parameter_") || code == "parameters_exclusive")
	}
	return false
}

// lookupError turns an error answer to one of Lookup's requests into an
// unknown outcome: whatever it says, Lookup cannot tell what the attempt
// came to. A refusal of Settle's key is logged at ERROR: until it is
// fixed, no lookup can settle anything.
// ref names what was looked up (the attempt, the capture or the void) in
// those log lines.
func (g *Gateway) lookupError(ctx context.Context, orderID string, ref slog.Attr, err error, what string) (order.Result, error) {
	var se *stripego.Error
	if !errors.As(err, &se) {
		return unknown(fmt.Errorf("%s: %w", what, noAnswer(err)))
	}
	if se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden {
		g.log.LogAttrs(ctx, slog.LevelError, "stripe refused Settle's API key: lookups cannot settle anything until it is fixed",
			ref, slog.String("order_id", orderID), slog.String("step", what),
			slog.Int("status", se.HTTPStatusCode), slog.String("request_id", se.RequestID))
	}
	if se.Type == stripego.ErrorTypeIdempotency {
		g.log.LogAttrs(ctx, slog.LevelError, "stripe idempotency_error: a replay was built with other parameters than the first request (a bug)",
			ref, slog.String("order_id", orderID), slog.String("step", what),
			slog.String("request_id", se.RequestID), slog.String("stripe_message", g.redact(se.Msg)))
	}
	return unknown(fmt.Errorf("%s: %s", what, g.describe(se)))
}

// noAnswer describes an error that holds no answer from Stripe.
func noAnswer(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("no answer from Stripe: %w", uerr)
	}
	// stripe-go quotes up to 500 bytes of an undecodable body, which can
	// hold a client secret; say no more than that it happened.
	return errors.New("the answer from Stripe could not be decoded")
}

// belongs checks that pi is the attempt's PaymentIntent: an answer about
// another payment is not an answer about this attempt. (stripe-mock does
// not echo metadata, so a missing attempt_id is let by.)
func belongs(req order.ChargeRequest, amount int64, pi *stripego.PaymentIntent) error {
	if pi == nil || pi.ID == "" {
		return errors.New("the answer from Stripe holds no PaymentIntent")
	}
	if pi.Amount != amount || !strings.EqualFold(string(pi.Currency), req.Amount.Currency) {
		return fmt.Errorf("PaymentIntent %s is for %d %s, not %d %s",
			clip(pi.ID), pi.Amount, clip(string(pi.Currency)), amount, req.Amount.Currency)
	}
	if a, ok := pi.Metadata["attempt_id"]; ok && a != req.AttemptID {
		return fmt.Errorf("PaymentIntent %s belongs to attempt %q", clip(pi.ID), clip(a))
	}
	return nil
}

// confirmedOutcome reads the outcome off the PaymentIntent a confirm
// answered with. An off-session PaymentIntent that waits for the customer
// is canceled first (see cancelUnattended).
func (g *Gateway) confirmedOutcome(ctx context.Context, req order.ChargeRequest, amount int64, pi *stripego.PaymentIntent) (order.Result, error) {
	if req.Capture == order.CaptureManual {
		if res, ok := g.authorized(pi); ok {
			return res, nil
		}
	}
	res := order.Result{Outcome: order.OutcomeDeclined}
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		res.Outcome = order.OutcomeSucceeded
	case stripego.PaymentIntentStatusRequiresAction:
		if req.CustomerPresent {
			// 3-D Secure: the checkout shows the customer the challenge.
			return order.Result{Outcome: order.OutcomeRequiresAction, NextAction: nextAction(pi)}, nil
		}
		return g.cancelUnattended(ctx, req, amount, pi)
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		res.DeclineCode = "requires_payment_method"
		if pi.LastPaymentError != nil {
			res.DeclineCode = declineCode(pi.LastPaymentError, res.DeclineCode)
		}
	case stripego.PaymentIntentStatusCanceled:
		res.DeclineCode = "canceled"
	default:
		// processing, requires_capture, requires_confirmation: money may
		// yet move. The reconciler reads it again later.
		return unknown(fmt.Errorf("PaymentIntent %s is %q", clip(pi.ID), clip(string(pi.Status))))
	}
	return res, nil
}

// cancelUnattended ends an off-session charge that Stripe answered with
// requires_action: a challenge with no customer there to take it. It is a
// decline, reported with the code Stripe itself gives such a charge
// (authentication_required), but only once the PaymentIntent is canceled:
// left open, a later confirm (Stripe.js with its client secret, another
// integration) could still charge a payment that Settle reported declined
// and the merchant may have retried. When the cancel's outcome is unknown,
// so is the attempt's, marked with the same code (order.Attempt's
// AwaitsNobody), so that the reconciler cancels the PaymentIntent by its
// recorded id at its first check rather than wait for a customer who is not
// there.
func (g *Gateway) cancelUnattended(ctx context.Context, req order.ChargeRequest, amount int64, pi *stripego.PaymentIntent) (order.Result, error) {
	res, err := g.cancel(ctx, req, amount, pi, order.DeclineAuthenticationRequired)
	if res.Outcome == order.OutcomeUnknown {
		res.DeclineCode = order.DeclineAuthenticationRequired
		err = fmt.Errorf("off-session PaymentIntent %s requires an action and could not be canceled: %w", clip(pi.ID), err)
	}
	return res, err
}

// declineCode is the most specific reason Stripe gave, or fallback.
func declineCode(se *stripego.Error, fallback string) string {
	switch {
	case se.DeclineCode != "":
		return string(se.DeclineCode)
	case se.Code != "":
		return string(se.Code)
	}
	return fallback
}

func unknown(err error) (order.Result, error) {
	return order.Result{Outcome: order.OutcomeUnknown}, err
}

// describe says what Stripe answered, for an error message: status, type,
// code, request id, and its message clipped and scrubbed of the key.
func (g *Gateway) describe(se *stripego.Error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stripe answered %d %s", se.HTTPStatusCode, clip(string(se.Type)))
	if se.Code != "" {
		fmt.Fprintf(&b, " (%s", clip(string(se.Code)))
		if se.DeclineCode != "" {
			fmt.Fprintf(&b, ", %s", clip(string(se.DeclineCode)))
		}
		b.WriteString(")")
	}
	if se.RequestID != "" {
		fmt.Fprintf(&b, " to request %s", clip(se.RequestID))
	}
	if se.Msg != "" {
		fmt.Fprintf(&b, ": %s", g.redact(se.Msg))
	}
	return b.String()
}

// redact clips s and removes the secret key and any Customer id from it:
// servers quote what they were sent (stripe-mock quotes a rejected
// Authorization header whole, Stripe a Customer it does not know).
func (g *Gateway) redact(s string) string {
	return clipTo(scrub(s, g.key), 200)
}

// clip shortens a string from a response for an error message.
func clip(s string) string { return clipTo(s, 64) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// nextAction is what the customer must do for a requires_action intent: the
// page to redirect to, when Stripe gave one, and the client secret that
// Stripe.js takes instead.
func nextAction(pi *stripego.PaymentIntent) order.NextAction {
	na := order.NextAction{ClientSecret: pi.ClientSecret}
	if pi.NextAction != nil && pi.NextAction.RedirectToURL != nil {
		na.RedirectURL = pi.NextAction.RedirectToURL.URL
	}
	return na
}
