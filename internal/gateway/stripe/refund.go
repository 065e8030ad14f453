package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/refund"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Refunds
//
// Refund creates a Stripe Refund of the order's PaymentIntent (the charge's
// ChargeID, pi_...), with the refund id as idempotency key and in metadata:
//
//	POST /v1/refunds
//	Idempotency-Key: <refund id>
//
//	payment_intent=<pi_...>  amount=<minor units>
//	metadata[refund_id]  metadata[order_id]
//
//	Stripe's answer                                   Refund
//	200, Refund succeeded                             succeeded (ChargeID is the re_... id)
//	200, pending or requires_action                   unknown: the reconciler looks it up
//	200, failed or canceled                           declined (failure_reason)
//	400 idempotency_error, 409, 429, 5xx, no answer   unknown
//	other 4xx, when that was the only request sent    declined "rejected_<code>" (such as
//	                                                  charge_already_refunded)
//	no connection ever obtained                       not_sent
//
// LookupRefund lists the PaymentIntent's refunds (a plain list, which is
// consistent, unlike the Search API) and matches metadata[refund_id]: it
// can therefore report not found, which the reconciler trusts only past its
// no-show horizon, as for refpsp. A refund that Stripe fails after first
// reporting it pending is settled by the reconciler's next lookup.

var _ order.Refunder = (*Gateway)(nil)

// refunds is the Refunds API client, on the PaymentIntents' backend.
func (g *Gateway) refunds() refund.Client {
	return refund.Client{B: g.intents.B, Key: g.intents.Key}
}

// Refund refunds req.Amount of the PaymentIntent req.ChargeID, with
// req.RefundID as the idempotency key. It always reports an outcome; a
// non-nil error explains an unknown or not-sent outcome or a rejection.
func (g *Gateway) Refund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	amount, err := checkRefund(req)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("stripe: refund %s: %w", req.RefundID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var (
		connected atomic.Bool
		sent      atomic.Int32
	)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { connected.Store(true) },
		WroteHeaders: func() { connected.Store(true); sent.Add(1) },
	})
	p := &stripego.RefundParams{
		PaymentIntent: stripego.String(req.ChargeID),
		Amount:        stripego.Int64(amount),
		Metadata:      map[string]string{"refund_id": req.RefundID, "order_id": req.OrderID},
	}
	p.SetIdempotencyKey(req.RefundID)
	p.Context = ctx
	r, err := g.refunds().New(p)
	res, err = g.classifyRefund(ctx, req, r, err, connected.Load(), int(sent.Load()))
	if err != nil {
		err = fmt.Errorf("stripe: refund %s: %w", req.RefundID, err)
	}
	return res, err
}

// LookupRefund finds the refund with metadata[refund_id] = req.RefundID
// among the PaymentIntent's refunds: OutcomeSucceeded, OutcomeDeclined (it
// failed), OutcomeNotFound, or an error when Stripe cannot say now (a
// pending refund included).
func (g *Gateway) LookupRefund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	unknownRes := order.Result{Outcome: order.OutcomeUnknown}
	if _, err := checkRefund(req); err != nil {
		return unknownRes, fmt.Errorf("stripe: lookup refund %s: %w", req.RefundID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	lp := &stripego.RefundListParams{PaymentIntent: stripego.String(req.ChargeID)}
	lp.Context = ctx
	lp.Limit = stripego.Int64(100)
	it := g.refunds().List(lp)
	for it.Next() {
		r := it.Refund()
		if r.Metadata["refund_id"] != req.RefundID {
			continue
		}
		res, err := fromRefund(req, r)
		if err != nil {
			return unknownRes, fmt.Errorf("stripe: lookup refund %s: %w", req.RefundID, err)
		}
		return res, nil
	}
	if err := it.Err(); err != nil {
		var se *stripego.Error
		if errors.As(err, &se) {
			return unknownRes, fmt.Errorf("stripe: lookup refund %s: %s", req.RefundID, g.describe(se))
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return unknownRes, fmt.Errorf("stripe: lookup refund %s: no answer from Stripe: %w", req.RefundID, uerr)
		}
		return unknownRes, fmt.Errorf("stripe: lookup refund %s: the answer from Stripe could not be decoded", req.RefundID)
	}
	return order.Result{Outcome: order.OutcomeNotFound}, nil
}

// checkRefund refuses what Stripe would refuse before anything is sent,
// and returns the amount in Stripe's units (as a charge's: ISK and MGA
// differ from ISO 4217).
func checkRefund(req order.RefundRequest) (int64, error) {
	switch {
	case req.RefundID == "" || len(req.RefundID) > 255:
		return 0, errors.New("a refund id of at most 255 characters is required")
	case !strings.HasPrefix(req.ChargeID, "pi_"):
		return 0, errors.New("the charge's PaymentIntent id (pi_...) is required to refund it")
	case req.Amount.AmountMinor <= 0 || req.Amount.Currency == "":
		return 0, errors.New("a positive amount and a currency are required")
	}
	return stripeAmount(req.Amount)
}

// classifyRefund turns what a refund call came to into an outcome, by the
// rules of classify.
func (g *Gateway) classifyRefund(ctx context.Context, req order.RefundRequest, r *stripego.Refund, err error,
	connected bool, sent int) (order.Result, error) {
	if err == nil {
		return fromRefund(req, r)
	}
	var se *stripego.Error
	if !errors.As(err, &se) {
		if !connected && gateway.IsDialError(err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("not sent: %w", err)
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return unknown(fmt.Errorf("no answer from Stripe: %w", uerr))
		}
		return unknown(errors.New("the answer from Stripe could not be decoded"))
	}
	status := se.HTTPStatusCode
	switch {
	case se.Type == stripego.ErrorTypeIdempotency:
		g.log.LogAttrs(ctx, slog.LevelError, "stripe idempotency_error: one refund was sent with two sets of parameters (a bug); its outcome is unknown",
			slog.String("refund_id", req.RefundID), slog.String("order_id", req.OrderID),
			slog.String("request_id", se.RequestID), slog.String("stripe_message", g.redact(se.Msg)))
		return unknown(errors.New(g.describe(se)))
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		return unknown(errors.New(g.describe(se)))
	case status >= 400 && status < 500 && sent <= 1:
		code := string(se.Code)
		if code == "" {
			code = strconv.Itoa(status)
		}
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_" + code},
			fmt.Errorf("%s; nothing was refunded", g.describe(se))
	default:
		return unknown(errors.New(g.describe(se)))
	}
}

// fromRefund reads the outcome off a Refund Stripe answered with.
func fromRefund(req order.RefundRequest, r *stripego.Refund) (order.Result, error) {
	if r == nil || r.ID == "" {
		return unknown(errors.New("the answer from Stripe holds no Refund"))
	}
	// Stripe's units, as the refund was sent (checkRefund accepted them).
	if want, err := stripeAmount(req.Amount); err != nil || r.Amount != want || !strings.EqualFold(string(r.Currency), req.Amount.Currency) {
		return unknown(fmt.Errorf("Refund %s is for %d %s in Stripe's units, not %d %s in ISO 4217's",
			clip(r.ID), r.Amount, clip(string(r.Currency)), req.Amount.AmountMinor, req.Amount.Currency))
	}
	if id, ok := r.Metadata["refund_id"]; ok && id != req.RefundID {
		return unknown(fmt.Errorf("Refund %s belongs to refund %q", clip(r.ID), clip(id)))
	}
	switch r.Status {
	case stripego.RefundStatusSucceeded:
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: r.ID}, nil
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		code := string(r.FailureReason)
		if code == "" {
			code = string(r.Status)
		}
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: r.ID, DeclineCode: clip(code)}, nil
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		// Not decided yet: in flight, asked again later.
		return unknown(fmt.Errorf("Refund %s is %q", clip(r.ID), clip(string(r.Status))))
	default:
		return unknown(fmt.Errorf("Refund %s is %q, a status Settle does not know", clip(r.ID), clip(string(r.Status))))
	}
}
