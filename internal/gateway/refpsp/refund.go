package refpsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Refunds
//
// A refund of an earlier charge:
//
//	POST /v1/refunds
//	Authorization: Bearer <key>
//	Idempotency-Key: <refund id>    (gateways may ignore it)
//
//	{"reference": "<refund id>", "charge_reference": "<attempt id>", "amount": <int64>, "currency": "GBP"}
//
// is answered with one of:
//
//	201  {"id": "<gateway refund id>", "reference": "...", "charge_reference": "...",
//	      "status": "succeeded" | "pending" | "failed", "amount": ..., "currency": "...", "failure_code": "..."}
//	402  the same shape with "status": "failed": the gateway refused the refund
//	429  rate limited, nothing refunded
//	4xx  (any other) rejected, nothing refunded
//	5xx  unknown: the refund may or may not have happened
//
// A "pending" refund is one the gateway will decide later (it may yet
// fail); Settle keeps it REFUNDING and asks again. A lookup by reference:
//
//	GET /v1/refunds?reference=<refund id>
//
// answers 200 with the refund object, or 404 when there is no such refund.

var _ order.Refunder = (*Client)(nil)

// Refund asks the gateway to refund req.Amount of the charge with
// reference req.ChargeAttemptID, with req.RefundID as the reference and
// idempotency key. Like Charge, it sends the request at most once.
func (c *Client) Refund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	if req.RefundID == "" || req.ChargeAttemptID == "" {
		return order.Result{Outcome: order.OutcomeNotSent}, errors.New("refpsp: refund: refund id and charge reference are required")
	}
	ex, err := c.post(ctx, c.refundsURL, req.RefundID, RefundBody{
		Reference: req.RefundID, ChargeReference: req.ChargeAttemptID,
		Amount: req.Amount.AmountMinor, Currency: req.Amount.Currency,
	})
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("refpsp: refund %s: %w", req.RefundID, err)
	}
	res, err = classifyRefund(req, ex)
	if err != nil {
		err = fmt.Errorf("refpsp: refund %s: %w", req.RefundID, err)
	}
	return res, err
}

// LookupRefund asks the gateway about the refund with reference
// req.RefundID: OutcomeSucceeded, OutcomeDeclined (it failed),
// OutcomeNotFound, or an error when the gateway cannot say yet (pending).
func (c *Client) LookupRefund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	if req.RefundID == "" {
		return order.Result{Outcome: order.OutcomeUnknown}, errors.New("refpsp: lookup refund: refund id is required")
	}
	res, err = c.get(ctx, c.refundsURL, req.RefundID, func(body []byte) (order.Result, error) {
		rf, err := parseRefund(body, req)
		if err != nil {
			return order.Result{}, err
		}
		return rf.result()
	})
	if err != nil {
		err = fmt.Errorf("refpsp: lookup refund %s: %w", req.RefundID, err)
	}
	return res, err
}

// classifyRefund turns the exchange of a POST /v1/refunds into an outcome,
// by the rules of classifyCharge.
func classifyRefund(req order.RefundRequest, ex exchange) (order.Result, error) {
	if ex.status == 0 {
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("not sent: %w", ex.err)
		}
		return unknown(fmt.Errorf("no answer: %w", ex.err))
	}
	switch s := ex.status; {
	case s == http.StatusCreated || s == http.StatusPaymentRequired:
		if ex.err != nil {
			return unknown(fmt.Errorf("gateway answered %d but the body could not be read: %w", s, ex.err))
		}
		rf, err := parseRefund(ex.body, req)
		if err != nil {
			return unknown(fmt.Errorf("gateway answered %d: %w", s, err))
		}
		if s == http.StatusPaymentRequired && rf.Status != RefundFailed {
			return unknown(fmt.Errorf("gateway answered 402 with a refund whose status is %q", clip(rf.Status)))
		}
		return rf.result()
	case s == http.StatusTooManyRequests:
		return order.Result{Outcome: order.OutcomeNotSent},
			errors.New("gateway rate limited the refund (429); nothing was refunded")
	case s >= 500:
		return unknown(fmt.Errorf("gateway answered %d", s))
	case s >= 400:
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: fmt.Sprintf("rejected_%d", s)},
			fmt.Errorf("gateway rejected the refund (%d); nothing was refunded", s)
	default:
		return unknown(fmt.Errorf("gateway answered unexpected status %d", s))
	}
}

// parseRefund decodes a refund object and checks that it is the one req
// asked about.
func parseRefund(body []byte, req order.RefundRequest) (RefundObject, error) {
	var rf RefundObject
	if err := json.Unmarshal(body, &rf); err != nil {
		return RefundObject{}, fmt.Errorf("malformed refund: %w", err)
	}
	switch rf.Status {
	case RefundSucceeded, RefundPending, RefundFailed:
	default:
		return RefundObject{}, fmt.Errorf("refund has unknown status %q", clip(rf.Status))
	}
	if rf.Status == RefundSucceeded && rf.ID == "" {
		return RefundObject{}, errors.New("succeeded refund has no id")
	}
	if rf.Reference != req.RefundID {
		return RefundObject{}, fmt.Errorf("refund reference %q is not ours", clip(rf.Reference))
	}
	if rf.Amount != req.Amount.AmountMinor || !strings.EqualFold(rf.Currency, req.Amount.Currency) {
		return RefundObject{}, fmt.Errorf("refund is for %d %s, not %d %s",
			rf.Amount, clip(rf.Currency), req.Amount.AmountMinor, req.Amount.Currency)
	}
	return rf, nil
}

// result is the outcome rf stands for; a pending refund is not an outcome
// yet.
func (rf RefundObject) result() (order.Result, error) {
	switch rf.Status {
	case RefundSucceeded:
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: rf.ID}, nil
	case RefundFailed:
		code := rf.FailureCode
		if code == "" {
			code = "unspecified"
		}
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: rf.ID, DeclineCode: clip(code)}, nil
	}
	return unknown(errors.New("refund is pending at the gateway"))
}
