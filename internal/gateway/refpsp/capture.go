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

// Authorizations, captures and voids
//
// A charge with "capture": false authorizes: it is answered as a charge
// is, with status "authorized" in place of "succeeded", and the
// authorization's fields:
//
//	{"id": "...", "reference": "<attempt id>", "status": "authorized", "amount": 1250, "currency": "GBP",
//	 "amount_captured": 0, "amount_capturable": 1250, "capture_before": "<RFC 3339 time>"}
//
// A lookup of the charge (GET /v1/charges?reference=) shows it as it
// stands: "authorized" while some can still be captured (after captures
// that were not final too), "captured" once a final capture or one of all
// that was held closed it (or it lapsed with something captured),
// "voided", or "expired" (lapsed at capture_before with nothing
// captured). Past capture_before nothing more can be captured or voided.
//
// A capture of some or all of an authorization:
//
//	POST /v1/captures
//	Idempotency-Key: <capture id>    (gateways may ignore it)
//
//	{"reference": "<capture id>", "charge_reference": "<attempt id>", "amount": 500, "currency": "GBP", "final": true}
//
// and a void, which releases an authorization nothing was captured of:
//
//	POST /v1/voids
//	Idempotency-Key: <void id>
//
//	{"reference": "<void id>", "charge_reference": "<attempt id>"}
//
// are answered with one of:
//
//	201  {"id": "...", "reference": "...", "charge_reference": "...", "status": "succeeded", ...,
//	      "charge": <the authorization as it now stands>}
//	402  the same shape with "status": "failed" and a "failure_code": authorization_expired,
//	     already_captured, authorization_voided, amount_too_large, not_capturable,
//	     capture_declined; nothing moved
//	404  no charge with that charge_reference; nothing moved
//	409  (a gateway that deduplicates) the reference was used with other parameters
//	429  rate limited, nothing moved
//	4xx  (any other) rejected, nothing moved
//	5xx  unknown: the capture or void may or may not have happened
//
// A capture's rules: what was captured plus this capture is at most the
// amount authorized; a final capture releases the rest; nothing is
// captured after a void or past capture_before, and nothing is voided
// once something is captured. Lookups by reference:
//
//	GET /v1/captures?reference=<capture id>
//	GET /v1/voids?reference=<void id>
//
// answer 200 with the object (its "charge" as the authorization now
// stands), or 404 when there is no such capture or void. A refused capture
// or void is kept, and found failed, like a declined charge.
//
// The outcomes follow the charge's: 201 and 402 are succeeded and
// declined (the failure code as the decline code) only with an object that
// matches the request; 409 and 5xx are unknown, for a lookup to settle;
// other 4xx are declined "rejected_<status>".

var _ order.Capturer = (*Client)(nil)

// Capture asks the gateway to capture req.Amount of the authorization with
// reference req.ChargeAttemptID, with req.CaptureID as the reference and
// idempotency key. Like Charge, it sends the request at most once. A
// succeeded capture's Result carries the gateway's capture id as ChargeID
// and the authorization as it then stands as Hold.
func (c *Client) Capture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	if req.CaptureID == "" || req.ChargeAttemptID == "" {
		return order.Result{Outcome: order.OutcomeNotSent}, errors.New("refpsp: capture: capture id and charge reference are required")
	}
	ex, err := c.post(ctx, c.capturesURL, req.CaptureID, CaptureBody{
		Reference: req.CaptureID, ChargeReference: req.ChargeAttemptID,
		Amount: req.Amount.AmountMinor, Currency: req.Amount.Currency, Final: req.Final,
	})
	if err == nil {
		res, err = classifyWrite(ex, "capture", func(body []byte) (order.Result, error) { return captureResult(body, req) })
	}
	if err != nil {
		err = fmt.Errorf("refpsp: capture %s: %w", req.CaptureID, err)
	}
	return res, err
}

// LookupCapture asks the gateway about the capture with reference
// req.CaptureID: OutcomeSucceeded (with the authorization as it now
// stands), OutcomeDeclined (refused), OutcomeNotFound, or an error when
// the gateway cannot say.
func (c *Client) LookupCapture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	if req.CaptureID == "" {
		return order.Result{Outcome: order.OutcomeUnknown}, errors.New("refpsp: lookup capture: capture id is required")
	}
	res, err = c.get(ctx, c.capturesURL, req.CaptureID, func(body []byte) (order.Result, error) { return captureResult(body, req) })
	if err != nil {
		err = fmt.Errorf("refpsp: lookup capture %s: %w", req.CaptureID, err)
	}
	return res, err
}

// Void asks the gateway to release the authorization with reference
// req.ChargeAttemptID, with req.VoidID as the reference and idempotency
// key. Like Charge, it sends the request at most once. A succeeded void's
// Result carries the gateway's void id as ChargeID and the authorization
// as Hold.
func (c *Client) Void(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	if req.VoidID == "" || req.ChargeAttemptID == "" {
		return order.Result{Outcome: order.OutcomeNotSent}, errors.New("refpsp: void: void id and charge reference are required")
	}
	ex, err := c.post(ctx, c.voidsURL, req.VoidID, VoidBody{Reference: req.VoidID, ChargeReference: req.ChargeAttemptID})
	if err == nil {
		res, err = classifyWrite(ex, "void", func(body []byte) (order.Result, error) { return voidResult(body, req) })
	}
	if err != nil {
		err = fmt.Errorf("refpsp: void %s: %w", req.VoidID, err)
	}
	return res, err
}

// LookupVoid asks the gateway about the void with reference req.VoidID:
// OutcomeSucceeded, OutcomeDeclined (refused), OutcomeNotFound, or an
// error when the gateway cannot say.
func (c *Client) LookupVoid(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	if req.VoidID == "" {
		return order.Result{Outcome: order.OutcomeUnknown}, errors.New("refpsp: lookup void: void id is required")
	}
	res, err = c.get(ctx, c.voidsURL, req.VoidID, func(body []byte) (order.Result, error) { return voidResult(body, req) })
	if err != nil {
		err = fmt.Errorf("refpsp: lookup void %s: %w", req.VoidID, err)
	}
	return res, err
}

// classifyWrite turns the exchange of a POST /v1/captures or /v1/voids
// (what) into an outcome, by the rules of classifyCharge; read parses the
// body of a 201 or a 402, and checks that it is the object asked for.
func classifyWrite(ex exchange, what string, read func([]byte) (order.Result, error)) (order.Result, error) {
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
		res, err := read(ex.body)
		if err != nil {
			return unknown(fmt.Errorf("gateway answered %d: %w", s, err))
		}
		if (s == http.StatusCreated) != (res.Outcome == order.OutcomeSucceeded) {
			return unknown(fmt.Errorf("gateway answered %d with a %s that %s", s, what, res.Outcome))
		}
		return res, nil
	case s == http.StatusConflict:
		// The reference names an earlier one made with other parameters,
		// which may have moved money: only a lookup can say.
		return unknown(fmt.Errorf("gateway answered 409: the %s reference was used with other parameters", what))
	case s == http.StatusTooManyRequests:
		return order.Result{Outcome: order.OutcomeNotSent},
			fmt.Errorf("gateway rate limited the %s (429); nothing moved", what)
	case s >= 500:
		return unknown(fmt.Errorf("gateway answered %d", s))
	case s >= 400:
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: fmt.Sprintf("rejected_%d", s)},
			fmt.Errorf("gateway rejected the %s (%d); nothing moved", what, s)
	default:
		return unknown(fmt.Errorf("gateway answered unexpected status %d", s))
	}
}

// captureResult decodes a capture object, checks that it is the capture
// req asked for, and returns the outcome it stands for.
func captureResult(body []byte, req order.CaptureRequest) (order.Result, error) {
	var cp CaptureObject
	if err := json.Unmarshal(body, &cp); err != nil {
		return order.Result{}, fmt.Errorf("malformed capture: %w", err)
	}
	switch {
	case cp.Reference != req.CaptureID:
		return order.Result{}, fmt.Errorf("capture reference %q is not ours", clip(cp.Reference))
	case cp.ChargeReference != req.ChargeAttemptID:
		return order.Result{}, fmt.Errorf("capture is of charge %q, not ours", clip(cp.ChargeReference))
	case cp.Amount != req.Amount.AmountMinor || !strings.EqualFold(cp.Currency, req.Amount.Currency):
		return order.Result{}, fmt.Errorf("capture is for %d %s, not %d %s",
			cp.Amount, clip(cp.Currency), req.Amount.AmountMinor, req.Amount.Currency)
	case cp.Final != req.Final:
		return order.Result{}, fmt.Errorf("capture's final is %t, not %t", cp.Final, req.Final)
	}
	return opResult("capture", cp.ID, cp.Status, cp.FailureCode, cp.Charge, req.ChargeAttemptID)
}

// voidResult decodes a void object, checks that it is the void req asked
// for, and returns the outcome it stands for.
func voidResult(body []byte, req order.VoidRequest) (order.Result, error) {
	var v VoidObject
	if err := json.Unmarshal(body, &v); err != nil {
		return order.Result{}, fmt.Errorf("malformed void: %w", err)
	}
	switch {
	case v.Reference != req.VoidID:
		return order.Result{}, fmt.Errorf("void reference %q is not ours", clip(v.Reference))
	case v.ChargeReference != req.ChargeAttemptID:
		return order.Result{}, fmt.Errorf("void is of charge %q, not ours", clip(v.ChargeReference))
	}
	return opResult("void", v.ID, v.Status, v.FailureCode, v.Charge, req.ChargeAttemptID)
}

// opResult is the outcome of a capture or a void (what) with id, status
// and failure code, about the authorization ch, which must be the one with
// reference chargeRef. A succeeded one carries the authorization as Hold.
func opResult(what, id, status, failureCode string, ch ChargeObject, chargeRef string) (order.Result, error) {
	switch status {
	case OpSucceeded:
		if id == "" {
			return order.Result{}, fmt.Errorf("succeeded %s has no id", what)
		}
		h := ch.hold()
		if h == nil || ch.Reference != chargeRef {
			return order.Result{}, fmt.Errorf("succeeded %s carries no authorization of charge %s", what, chargeRef)
		}
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: id, Hold: h}, nil
	case OpFailed:
		if failureCode == "" {
			failureCode = "unspecified"
		}
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: id, DeclineCode: clip(failureCode)}, nil
	}
	return order.Result{}, fmt.Errorf("%s has unknown status %q", what, clip(status))
}
