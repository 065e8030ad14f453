package adyen

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

// answer turns the exchange of a /payments or /payments/details call
// (step names it) into an outcome: every rule of the package
// documentation's table of Charge's outcomes lives here. An authorized
// automatic order is captured at once.
func (g *Gateway) answer(ctx context.Context, req order.ChargeRequest, value int64, ex exchange, step string) (order.Result, error) {
	if ex.status == 0 {
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("%s not sent: %w", step, ex.err)
		}
		return unknown(fmt.Errorf("%s: no answer from Adyen: %w", step, ex.err))
	}
	if ex.status != http.StatusOK {
		return g.refusal(ex, step)
	}
	if ex.err != nil {
		return unknown(fmt.Errorf("%s: Adyen answered 200 but the body could not be read: %w", step, ex.err))
	}
	var pr paymentResponse
	if err := json.Unmarshal(ex.body, &pr); err != nil || pr.ResultCode == "" {
		return unknown(fmt.Errorf("%s: Adyen answered 200 with a body that is no payment result", step))
	}
	if err := belongs(req, value, pr); err != nil {
		return unknown(fmt.Errorf("%s: %w", step, err))
	}
	psp := pr.PSPReference
	if psp == "" {
		psp = req.GatewayChargeID
	}
	declined := func(code string) (order.Result, error) {
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: psp, DeclineCode: code}, nil
	}
	switch pr.ResultCode {
	case "Authorised":
		if psp == "" {
			return unknown(fmt.Errorf("%s: Adyen answered Authorised without a pspReference", step))
		}
		if req.Capture == order.CaptureManual {
			return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: psp, Hold: g.openHold(req)}, nil
		}
		if g.pastHorizon(req) && !waitsForShopper(req) {
			// A technical cancel of the attempt may be on its way: the
			// adapter never captures past the horizon (but for an attempt
			// waiting for the shopper, which none ends until it expires);
			// Lookup decides.
			return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
				fmt.Errorf("%s: authorized past the no-show horizon, not captured", step)
		}
		return g.capture(ctx, req, value, psp)
	case "PartiallyAuthorised":
		return g.declinePartial(ctx, req, psp)
	case "Refused":
		return declined(refusalCode(pr.RefusalReasonCode, pr.RefusalReason))
	case "Error":
		// A final state: the payment failed before it was authorized.
		return declined("error")
	case "Cancelled":
		return declined("cancelled")
	case "RedirectShopper", "ChallengeShopper", "IdentifyShopper":
		if !req.CustomerPresent {
			return g.unattended(ctx, req, psp)
		}
		if pr.Action == nil || pr.Action.URL == "" {
			// Nothing the checkout could show: the notification, or the
			// technical cancel past the horizon, will settle it.
			return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
				fmt.Errorf("%s: Adyen answered %s with no action URL to send the shopper to", step, pr.ResultCode)
		}
		return order.Result{Outcome: order.OutcomeRequiresAction, ChargeID: psp,
			NextAction: order.NextAction{RedirectURL: pr.Action.URL}}, nil
	default:
		// Pending, Received and the like: Adyen has the payment and will
		// say by notification what it came to.
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
			fmt.Errorf("%s: Adyen answered %s: the outcome arrives by notification", step, clip(pr.ResultCode))
	}
}

// refusal turns an error answer to a /payments or /payments/details call
// into an outcome.
func (g *Gateway) refusal(ex exchange, step string) (order.Result, error) {
	se := parseServiceError(ex.body)
	switch s := ex.status; {
	case inProgress(s, se):
		return unknown(fmt.Errorf("%s: %s; an earlier request with this key is in flight", step, g.describe(ex.status, se)))
	case s == http.StatusBadRequest, s == http.StatusUnauthorized, s == http.StatusForbidden, s == http.StatusNotFound,
		s == http.StatusUnprocessableEntity:
		// Adyen refused Settle's key, account or request before it
		// processed anything.
		return order.Result{Outcome: order.OutcomeRefused}, fmt.Errorf("%s refused, nothing was processed: %s", step, g.describe(ex.status, se))
	default:
		return unknown(fmt.Errorf("%s: %s", step, g.describe(ex.status, se)))
	}
}

// inProgress reports Adyen's answer to a request whose idempotency key an
// earlier request still being processed holds: 409, or 422 with
// errorCode 704 ("request already processed or in progress").
func inProgress(status int, se serviceError) bool {
	return status == http.StatusConflict || se.ErrorCode == "704"
}

func parseServiceError(body []byte) serviceError {
	var se serviceError
	_ = json.Unmarshal(body, &se)
	return se
}

// describe says what Adyen answered, for an error message: status, error
// type and code, and its message clipped and scrubbed of the API key.
func (g *Gateway) describe(status int, se serviceError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Adyen answered %d", status)
	if se.ErrorType != "" {
		fmt.Fprintf(&b, " %s", clip(se.ErrorType))
	}
	if se.ErrorCode != "" {
		fmt.Fprintf(&b, " (errorCode %s)", clip(se.ErrorCode))
	}
	if se.PSPReference != "" {
		fmt.Fprintf(&b, " to request %s", clip(se.PSPReference))
	}
	if se.Message != "" {
		fmt.Fprintf(&b, ": %s", clipTo(strings.ReplaceAll(se.Message, g.apiKey, "[redacted]"), 200))
	}
	return b.String()
}

// belongs checks that a payment result is about the attempt: an answer
// about another payment is not an answer about this one.
func belongs(req order.ChargeRequest, value int64, pr paymentResponse) error {
	if pr.MerchantReference != "" && pr.MerchantReference != req.AttemptID {
		return fmt.Errorf("the answer is about payment %q, not the attempt", clip(pr.MerchantReference))
	}
	if a := pr.Amount; a != nil && pr.ResultCode != "PartiallyAuthorised" && (a.Value != value || a.Currency != req.Amount.Currency) {
		return fmt.Errorf("the answer is for %d %s in Adyen's units, not %d %s", a.Value, clip(a.Currency), value, req.Amount.Currency)
	}
	return nil
}

// refusals are Adyen's refusal reasons by refusalReasonCode. A decline
// code is the reason in snake case (declineCode), so that a /payments
// answer (which has the code) and an AUTHORISATION notification (which
// has the reason) give the same one; 38's is
// order.DeclineAuthenticationRequired.
var refusals = map[string]string{
	"2": "Refused", "3": "Referral", "4": "Acquirer Error", "5": "Blocked Card", "6": "Expired Card",
	"7": "Invalid Amount", "8": "Invalid Card Number", "9": "Issuer Unavailable", "10": "Not supported",
	"11": "3D Not Authenticated", "12": "Not enough balance", "14": "Acquirer Fraud", "15": "Cancelled",
	"16": "Shopper Cancelled", "17": "Invalid Pin", "18": "Pin tries exceeded", "19": "Pin validation not possible",
	"20": "FRAUD", "21": "Not Submitted", "22": "FRAUD-CANCELLED", "23": "Transaction Not Permitted",
	"24": "CVC Declined", "25": "Restricted Card", "26": "Revocation Of Auth", "27": "Declined Non Generic",
	"28": "Withdrawal amount exceeded", "29": "Withdrawal count exceeded", "31": "Issuer Suspected Fraud",
	"38": "Authentication required",
}

// refusalCode is the decline code of a refusal: from its code when Adyen
// gave a known one, else from its reason, else "refused".
func refusalCode(code, reason string) string {
	if r, ok := refusals[code]; ok {
		return declineCode(r)
	}
	if c := declineCode(reason); c != "" {
		return c
	}
	if code != "" && code != "0" {
		return "refused_" + declineCode(code)
	}
	return "refused"
}

// declineCode is s in snake case: lower-case letters and digits, other
// runs as one underscore, at most 64 characters.
func declineCode(s string) string {
	var b strings.Builder
	sep := false
	for _, c := range strings.ToLower(s) {
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(c)
			sep = false
			continue
		}
		sep = true
	}
	return clipTo(b.String(), 64)
}

// verdict is what the notifications recorded about an attempt say.
type verdict struct {
	// psp is the payment's pspReference, when a notification named it.
	psp string
	// techCanceled: a TECHNICAL_CANCEL succeeded.
	techCanceled bool
	// authorized: an AUTHORISATION succeeded for the whole amount;
	// partial: for less. declined is the decline code of a failed one,
	// when none succeeded.
	authorized, partial bool
	declined            string
	// expired: the hold lapsed (EXPIRE).
	expired bool
	// captured: the automatic capture succeeded (CAPTURE about the
	// attempt); captureFailed: it failed.
	captured, captureFailed bool
}

// judgeAttempt reads the notifications recorded about an attempt for
// amount m (the rows of the package documentation's Lookup table).
func judgeAttempt(evs []order.GatewayEvent, m order.Money) verdict {
	var (
		v                             verdict
		refusedCapture, failedCapture bool
	)
	for _, e := range evs {
		ok := e.Outcome == order.OutcomeSucceeded
		switch e.Type {
		case EventTechnicalCancel:
			v.techCanceled = v.techCanceled || ok
		case EventAuthorisation:
			switch {
			case ok && e.Amount.Currency == m.Currency && e.Amount.AmountMinor < m.AmountMinor:
				v.partial, v.psp = true, e.ObjectID
			case ok:
				v.authorized, v.psp = true, e.ObjectID
			case v.declined == "":
				v.declined = e.DeclineCode
				if v.declined == "" {
					v.declined = "refused"
				}
				if v.psp == "" {
					v.psp = e.ObjectID
				}
			}
		case EventExpire:
			v.expired = v.expired || ok
			if ok && v.psp == "" {
				v.psp = e.ObjectID
			}
		case EventCapture:
			if ok {
				v.captured = true
				if v.psp == "" {
					v.psp = e.ChargeID
				}
			} else {
				refusedCapture = true
			}
		case EventCaptureFailed:
			// The capture failed after Adyen first reported it done.
			failedCapture = true
		}
	}
	if v.authorized {
		v.partial, v.declined = false, ""
	}
	if v.partial {
		v.declined = ""
	}
	// A capture refused and then made (a replay under the same key) took
	// the money; one reported made and then CAPTURE_FAILED did not.
	v.captureFailed = failedCapture || (refusedCapture && !v.captured)
	v.captured = v.captured && !failedCapture
	return v
}

func unknown(err error) (order.Result, error) {
	return order.Result{Outcome: order.OutcomeUnknown}, err
}

// clip shortens a string from an answer for an error message.
func clip(s string) string { return clipTo(s, 64) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// errNoNotification is the error of a modification's lookup before its
// notification arrived.
var errNoNotification = errors.New("no notification about it yet: Adyen reports a modification's outcome only by notification")
