package adyen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Modifications
//
// Captures, voids and refunds are modifications of a payment, by its
// pspReference (the charge's ChargeID), each under the idempotency key and
// with the reference of Settle's own record:
//
//	POST /payments/<psp>/captures   Idempotency-Key: <capture id>
//	  merchantAccount  amount  reference=<capture id>
//	POST /payments/<psp>/cancels    Idempotency-Key: <void id>
//	  merchantAccount  reference=<void id>
//	POST /payments/<psp>/refunds    Idempotency-Key: <refund id>
//	  merchantAccount  amount  reference=<refund id>
//
// Adyen answers each "received" and reports its outcome later, by a
// notification whose merchantReference is that reference: CAPTURE or
// CAPTURE_FAILED, CANCELLATION, REFUND or REFUND_FAILED.
//
//	Adyen's answer                                     outcome
//	201 received, about the payment                    unknown, ChargeID the modification's pspReference:
//	                                                   the notification will say
//	422 (but errorCode 704)                            declined "rejected_<errorCode>": Adyen did nothing
//	400, 401, 403, 404                                 not_sent: Adyen refused Settle's request or key
//	409, 422 errorCode 704, 429, 5xx, no answer        unknown
//	no connection ever obtained                        not_sent
//
// A capture is single: Adyen releases what is left of the authorization
// once a partial capture succeeds (its default; multiple partial captures
// are an account feature Settle does not use). A capture with Final
// false is therefore declined "multicapture_unsupported" before anything
// is sent, and a final one for less than the hold releases the rest.
//
// LookupCapture, LookupVoid and LookupRefund answer from the notifications
// recorded about the capture's, the void's or the refund's id: a success
// is succeeded (ChargeID its pspReference), a failure declined (its
// reason), REFUND_FAILED after a REFUND declined; with none yet, an error.
// They never report not found: silence proves nothing, since a
// modification Adyen received may be reported any time later.

// declineNoMulticapture is the decline code of a capture that is not
// final: Adyen releases the rest of the hold after the first capture.
const declineNoMulticapture = "multicapture_unsupported"

// modificationRequest is the body of a capture, a cancel or a refund;
// standaloneCancel the technical cancel's.
type (
	modificationRequest struct {
		MerchantAccount string  `json:"merchantAccount"`
		Amount          *amount `json:"amount,omitempty"`
		Reference       string  `json:"reference"`
	}
	standaloneCancel struct {
		MerchantAccount  string `json:"merchantAccount"`
		PaymentReference string `json:"paymentReference"`
		Reference        string `json:"reference"`
	}
	modificationResponse struct {
		PSPReference        string  `json:"pspReference"`
		PaymentPSPReference string  `json:"paymentPspReference"`
		PaymentReference    string  `json:"paymentReference"`
		Reference           string  `json:"reference"`
		Status              string  `json:"status"`
		Amount              *amount `json:"amount"`
	}
)

// modification is one modification call: what it is (op), Settle's
// reference, and the payment it modifies.
type modification struct {
	op, ref, psp string
	value        *amount
}

// send posts the modification under its reference as key, and reads
// Adyen's answer: the modification's pspReference once received, or
// the outcome the answer already proves.
func (g *Gateway) send(ctx context.Context, path string, m modification) (order.Result, error) {
	ex, err := g.post(ctx, path, m.ref, modificationRequest{MerchantAccount: g.merchant, Amount: m.value, Reference: m.ref})
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, err
	}
	return g.received(ex, m)
}

// received turns a modification's exchange into an outcome (the table
// above).
func (g *Gateway) received(ex exchange, m modification) (order.Result, error) {
	if ex.status == 0 {
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("not sent: %w", ex.err)
		}
		return unknown(fmt.Errorf("no answer from Adyen: %w", ex.err))
	}
	if ex.status == http.StatusCreated || ex.status == http.StatusOK {
		if ex.err != nil {
			return unknown(fmt.Errorf("answered %d but the body could not be read: %w", ex.status, ex.err))
		}
		var mr modificationResponse
		switch err := json.Unmarshal(ex.body, &mr); {
		case err != nil || mr.Status != "received" || mr.PSPReference == "":
			return unknown(fmt.Errorf("answered %d with a body that is no received modification", ex.status))
		case (mr.PaymentPSPReference != "" && mr.PaymentPSPReference != m.psp) || (mr.Reference != "" && mr.Reference != m.ref) ||
			(m.value != nil && mr.Amount != nil && *mr.Amount != *m.value):
			return unknown(fmt.Errorf("the answer to the %s is about another payment, reference or amount", m.op))
		}
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: mr.PSPReference},
			fmt.Errorf("the %s was received (%s): its outcome arrives by notification", m.op, clip(mr.PSPReference))
	}
	se := parseServiceError(ex.body)
	switch s := ex.status; {
	case inProgress(s, se):
		return unknown(fmt.Errorf("%s; an earlier request with this key is in flight", g.describe(s, se)))
	case s == http.StatusUnprocessableEntity:
		code := declineCode(se.ErrorCode)
		if code == "" {
			code = "422"
		}
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_" + code},
			fmt.Errorf("%s refused, nothing was done: %s", m.op, g.describe(s, se))
	case s == http.StatusBadRequest, s == http.StatusUnauthorized, s == http.StatusForbidden, s == http.StatusNotFound:
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s refused, nothing was done: %s", m.op, g.describe(s, se))
	default:
		return unknown(errors.New(g.describe(s, se)))
	}
}

// capture captures the whole of an automatic order's authorization psp
// at once: "received" is a success, since Adyen takes an authorized
// amount it received a capture of. Anything else leaves the attempt
// unknown, with psp as its ChargeID for the next Lookup, which replays
// the capture under the same key.
func (g *Gateway) capture(ctx context.Context, req order.ChargeRequest, value int64, psp string) (order.Result, error) {
	ref := req.AttemptID + captureSuffix
	res, err := g.send(ctx, "/payments/"+psp+"/captures", modification{op: "capture", ref: ref, psp: psp,
		value: &amount{Currency: req.Amount.Currency, Value: value}})
	if res.Outcome == order.OutcomeUnknown && res.ChargeID != "" {
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: psp}, nil
	}
	return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
		fmt.Errorf("authorized, but the capture did not go through (the amount is held; Lookup replays it): %w", err)
}

// declinePartial ends an authorization for less than the amount: Settle
// never asks for one and never captures it. The part held is released by
// a cancel; if that cannot be sent, the hold lapses, and nothing was
// taken either way.
func (g *Gateway) declinePartial(ctx context.Context, req order.ChargeRequest, psp string) (order.Result, error) {
	if psp != "" {
		ref := req.AttemptID + releaseSuffix
		//nolint:errcheck // Best effort: an uncaptured hold lapses by itself.
		g.send(ctx, "/payments/"+psp+"/cancels", modification{op: "release", ref: ref, psp: psp})
	}
	return order.Result{Outcome: order.OutcomeDeclined, ChargeID: psp, DeclineCode: "partially_authorised"}, nil
}

// unattended ends a merchant-initiated payment that Adyen answered with a
// shopper action: nobody is there to take it. Once Adyen received the
// technical cancel it is declined order.DeclineAuthenticationRequired:
// nothing was captured, Settle never captures a declined attempt, and
// an authorization that somehow happened lapses. When the cancel was not
// received the attempt stays unknown, marked with the same code
// (order.Attempt.AwaitsNobody), so that the reconciler's first lookup
// sends it again.
func (g *Gateway) unattended(ctx context.Context, req order.ChargeRequest, psp string) (order.Result, error) {
	if err := g.technicalCancel(ctx, req); err != nil {
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp, DeclineCode: order.DeclineAuthenticationRequired},
			fmt.Errorf("a merchant-initiated payment asks for a shopper action, and its technical cancel: %w", err)
	}
	return order.Result{Outcome: order.OutcomeDeclined, ChargeID: psp, DeclineCode: order.DeclineAuthenticationRequired}, nil
}

// technicalCancel asks Adyen to cancel the payment of the attempt by its
// reference (POST /cancels), under its own key: whatever of it Adyen has,
// or gets, it does not take. Its outcome is the TECHNICAL_CANCEL
// notification; the error says why the request was not received.
func (g *Gateway) technicalCancel(ctx context.Context, req order.ChargeRequest) error {
	ref := req.AttemptID + cancelSuffix
	ex, err := g.post(ctx, "/cancels", ref, standaloneCancel{MerchantAccount: g.merchant, PaymentReference: req.AttemptID, Reference: ref})
	if err != nil {
		return err
	}
	if ex.status == http.StatusCreated || ex.status == http.StatusOK {
		var mr modificationResponse
		if json.Unmarshal(ex.body, &mr) == nil && mr.Status == "received" &&
			(mr.PaymentReference == "" || mr.PaymentReference == req.AttemptID) {
			return nil
		}
		return fmt.Errorf("answered %d with a body that is no received technical cancel", ex.status)
	}
	if ex.status == 0 {
		return fmt.Errorf("no answer from Adyen: %w", ex.err)
	}
	return errors.New(g.describe(ex.status, parseServiceError(ex.body)))
}

// Capture asks Adyen to capture req.Amount of the authorization
// req.ChargeID (see Modifications): unknown once received, for
// LookupCapture to settle.
func (g *Gateway) Capture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	value, err := checkModification(req.CaptureID, req.ChargeID, &req.Amount)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: capture %s: %w", req.CaptureID, err)
	}
	if !req.Final {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: declineNoMulticapture},
			fmt.Errorf("adyen: capture %s: Adyen releases the rest of a hold after its first capture: every capture must be final", req.CaptureID)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.send(ctx, "/payments/"+req.ChargeID+"/captures", modification{op: "capture", ref: req.CaptureID, psp: req.ChargeID,
		value: &amount{Currency: req.Amount.Currency, Value: value}})
	if err != nil {
		err = fmt.Errorf("adyen: capture %s: %w", req.CaptureID, err)
	}
	return res, err
}

// LookupCapture answers from the notifications about the capture (see
// Modifications); a success carries the hold as it then stands: captured,
// the rest released.
func (g *Gateway) LookupCapture(ctx context.Context, req order.CaptureRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupCapture, OrderID: req.OrderID, AttemptID: req.CaptureID})
	defer func() { done(res, err) }()
	res, err = g.lookupModification(ctx, req.CaptureID, EventCapture, EventCaptureFailed)
	if err != nil {
		return res, fmt.Errorf("adyen: lookup capture %s: %w", req.CaptureID, err)
	}
	if res.Outcome == order.OutcomeSucceeded {
		res.Hold = &order.Hold{State: order.HoldCaptured, AuthorizedMinor: g.authorizedMinor(ctx, req.ChargeAttemptID, req.Amount),
			CapturedMinor: req.Amount.AmountMinor}
	}
	return res, nil
}

// Void asks Adyen to cancel the authorization req.ChargeID (see
// Modifications): unknown once received, for LookupVoid to settle.
func (g *Gateway) Void(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	if _, err := checkModification(req.VoidID, req.ChargeID, nil); err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: void %s: %w", req.VoidID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.send(ctx, "/payments/"+req.ChargeID+"/cancels", modification{op: "cancel", ref: req.VoidID, psp: req.ChargeID})
	if err != nil {
		err = fmt.Errorf("adyen: void %s: %w", req.VoidID, err)
	}
	return res, err
}

// LookupVoid answers from the notifications about the void (see
// Modifications); a success carries the hold, voided.
func (g *Gateway) LookupVoid(ctx context.Context, req order.VoidRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupVoid, OrderID: req.OrderID, AttemptID: req.VoidID})
	defer func() { done(res, err) }()
	res, err = g.lookupModification(ctx, req.VoidID, EventCancellation, "")
	if err != nil {
		return res, fmt.Errorf("adyen: lookup void %s: %w", req.VoidID, err)
	}
	if res.Outcome == order.OutcomeSucceeded {
		res.Hold = &order.Hold{State: order.HoldVoided, AuthorizedMinor: g.authorizedMinor(ctx, req.ChargeAttemptID, order.Money{})}
	}
	return res, nil
}

// Refund asks Adyen to refund req.Amount of the payment req.ChargeID (see
// Modifications): unknown once received, for LookupRefund to settle.
func (g *Gateway) Refund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	value, err := checkModification(req.RefundID, req.ChargeID, &req.Amount)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: refund %s: %w", req.RefundID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.send(ctx, "/payments/"+req.ChargeID+"/refunds", modification{op: "refund", ref: req.RefundID, psp: req.ChargeID,
		value: &amount{Currency: req.Amount.Currency, Value: value}})
	if err != nil {
		err = fmt.Errorf("adyen: refund %s: %w", req.RefundID, err)
	}
	return res, err
}

// LookupRefund answers from the notifications about the refund (see
// Modifications).
func (g *Gateway) LookupRefund(ctx context.Context, req order.RefundRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookupRefund, OrderID: req.OrderID, AttemptID: req.RefundID})
	defer func() { done(res, err) }()
	res, err = g.lookupModification(ctx, req.RefundID, EventRefund, EventRefundFailed)
	if err != nil {
		err = fmt.Errorf("adyen: lookup refund %s: %w", req.RefundID, err)
	}
	return res, err
}

// lookupModification reads the notifications about the modification ref:
// succeeded by a success of code, declined by its failure or by failed
// (a later failure wins: REFUND_FAILED after REFUND), or an error.
func (g *Gateway) lookupModification(ctx context.Context, ref, code, failed string) (order.Result, error) {
	if ref == "" {
		return unknown(errors.New("its id is required"))
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	evs, err := g.events.GatewayEventsAbout(ctx, g.name, ref)
	if err != nil {
		return unknown(fmt.Errorf("read its notifications: %w", err))
	}
	var ok, fail *order.GatewayEvent
	for i := range evs {
		switch e := &evs[i]; {
		case e.Type == code && e.Outcome == order.OutcomeSucceeded:
			ok = e
		case e.Type == code || (failed != "" && e.Type == failed):
			fail = e
		}
	}
	switch {
	case fail != nil && (ok == nil || fail.Type == failed):
		dc := fail.DeclineCode
		if dc == "" {
			dc = declineCode(fail.Type)
		}
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: fail.ObjectID, DeclineCode: dc}, nil
	case ok != nil:
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: ok.ObjectID}, nil
	}
	return unknown(errNoNotification)
}

// authorizedMinor is the amount the attempt's AUTHORISATION held, or
// fallback's when none was recorded (or it cannot be read).
func (g *Gateway) authorizedMinor(ctx context.Context, attemptID string, fallback order.Money) int64 {
	if attemptID == "" {
		return fallback.AmountMinor
	}
	evs, err := g.events.GatewayEventsAbout(ctx, g.name, attemptID)
	if err != nil {
		return fallback.AmountMinor
	}
	for _, e := range evs {
		if e.Type == EventAuthorisation && e.Outcome == order.OutcomeSucceeded {
			return e.Amount.AmountMinor
		}
	}
	return fallback.AmountMinor
}

// checkModification refuses a capture, a void or a refund that cannot be
// sent: no id, no payment, or an amount Adyen cannot carry (m nil for a
// void); it returns the amount in Adyen's units.
func checkModification(id, psp string, m *order.Money) (int64, error) {
	switch {
	case id == "" || len(id) > maxKeyLen:
		return 0, fmt.Errorf("an id of at most %d characters is required", maxKeyLen)
	case psp == "" || !pathSafe(psp):
		return 0, errors.New("the payment's pspReference (the charge's ChargeID) is required")
	case m == nil:
		return 0, nil
	case m.AmountMinor <= 0 || m.Currency == "":
		return 0, errors.New("a positive amount and a currency are required")
	}
	return adyenValue(*m)
}

// pathSafe reports whether a pspReference can stand in a path as it is
// (Adyen's are 16 letters and digits).
func pathSafe(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
