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

// classify turns what a create call came to into an outcome. Every rule of
// the package documentation's table lives here; replay says whether the call
// was a Lookup. The error explains every outcome but a success or a decline
// (a rejection is explained too), and quotes Stripe only through describe.
func (g *Gateway) classify(ctx context.Context, req order.ChargeRequest, ex exchange, replay bool) (order.Result, error) {
	if ex.err == nil {
		return fromIntent(req, ex.pi)
	}

	var se *stripego.Error
	if !errors.As(ex.err, &se) {
		// No answer from Stripe, or one that could not be decoded.
		if !replay && !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("not sent: %w", ex.err)
		}
		var uerr *url.Error
		if errors.As(ex.err, &uerr) {
			return unknown(fmt.Errorf("no answer from Stripe: %w", uerr))
		}
		// stripe-go quotes up to 500 bytes of an undecodable body, which
		// can hold a client secret; say no more than that it happened.
		return unknown(errors.New("the answer from Stripe could not be decoded"))
	}

	status := se.HTTPStatusCode
	switch {
	case se.Type == stripego.ErrorTypeIdempotency:
		// The same key with other parameters: Settle built two different
		// requests for one attempt. That is a bug, and the first request's
		// fate stays unknown until someone looks.
		g.log.LogAttrs(ctx, slog.LevelError, "stripe idempotency_error: one attempt was sent with two sets of parameters (a bug); its outcome is unknown",
			slog.String("attempt_id", req.AttemptID), slog.String("order_id", req.OrderID),
			slog.Bool("lookup", replay), slog.String("request_id", se.RequestID),
			slog.String("stripe_message", g.redact(se.Msg)))
		return unknown(errors.New(g.describe(se)))
	case status == http.StatusConflict || se.Code == stripego.ErrorCodeIdempotencyKeyInUse:
		// An earlier request with this key is still being processed.
		return unknown(fmt.Errorf("%s; an earlier request with this key is in flight", g.describe(se)))
	case se.Type == stripego.ErrorTypeCard:
		res := order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineCode(se, "card_declined")}
		if se.PaymentIntent != nil {
			res.ChargeID = se.PaymentIntent.ID
		}
		return res, nil
	case status == http.StatusTooManyRequests || status >= 500:
		return unknown(errors.New(g.describe(se)))
	case status >= 400 && status < 500 && !replay && ex.sent <= 1:
		// Stripe refused the only request sent with this key before it
		// executed: nothing was charged. After a retry, an earlier try may
		// have executed, and a rejection of a later one proves nothing.
		code := string(se.Code)
		if code == "" {
			code = strconv.Itoa(status)
		}
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_" + code},
			fmt.Errorf("%s; nothing was charged", g.describe(se))
	default:
		return unknown(errors.New(g.describe(se)))
	}
}

// fromIntent reads the outcome off the PaymentIntent Stripe answered with.
func fromIntent(req order.ChargeRequest, pi *stripego.PaymentIntent) (order.Result, error) {
	if pi == nil || pi.ID == "" {
		return unknown(errors.New("the answer from Stripe holds no PaymentIntent"))
	}
	// An answer about another payment is not an answer about this attempt.
	// (stripe-mock does not echo metadata, so a missing attempt_id is let by.)
	if pi.Amount != req.Amount.AmountMinor || !strings.EqualFold(string(pi.Currency), req.Amount.Currency) {
		return unknown(fmt.Errorf("PaymentIntent %s is for %d %s, not %d %s",
			clip(pi.ID), pi.Amount, clip(string(pi.Currency)), req.Amount.AmountMinor, req.Amount.Currency))
	}
	if a, ok := pi.Metadata["attempt_id"]; ok && a != req.AttemptID {
		return unknown(fmt.Errorf("PaymentIntent %s belongs to attempt %q", clip(pi.ID), clip(a)))
	}
	res := order.Result{Outcome: order.OutcomeDeclined, ChargeID: pi.ID}
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		res.Outcome = order.OutcomeSucceeded
	case stripego.PaymentIntentStatusRequiresAction:
		// 3-D Secure or a redirect, with no customer to complete it.
		res.DeclineCode = "requires_action"
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		res.DeclineCode = "requires_payment_method"
		if pi.LastPaymentError != nil {
			res.DeclineCode = declineCode(pi.LastPaymentError, res.DeclineCode)
		}
	case stripego.PaymentIntentStatusCanceled:
		res.DeclineCode = "canceled"
	default:
		// processing, requires_capture, requires_confirmation: money may
		// yet move, and a replay will keep saying the same.
		return unknown(fmt.Errorf("PaymentIntent %s is %q", clip(pi.ID), clip(string(pi.Status))))
	}
	return res, nil
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

// redact clips s and removes the secret key from it: servers quote what
// they were sent (stripe-mock quotes a rejected Authorization header whole).
func (g *Gateway) redact(s string) string {
	return clipTo(strings.ReplaceAll(s, g.key, "[redacted]"), 200)
}

// clip shortens a string from a response for an error message.
func clip(s string) string { return clipTo(s, 64) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
