package stripetest

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Authorizations
//
// A PaymentIntent created with capture_method=manual is authorized by its
// confirm: it goes to requires_capture, holding its amount
// (amount_capturable) until its charge's
// payment_method_details.card.capture_before, Options.AuthorizationExpiry
// after the confirm. Then, as at Stripe, the hold lapses: the intent is
// canceled with cancellation_reason "automatic" (the fake does it when the
// intent is next read or written, or at once with Expire).
//
//	POST /v1/payment_intents/{id}/capture   amount_to_capture (default: all that is capturable),
//	                                        final_capture (default true)
//	POST /v1/payment_intents/{id}/cancel    releases the hold: canceled, with the
//	                                        cancellation_reason sent (none: null)
//
// A capture takes amount_to_capture of the hold (amount_received grows);
// a final one releases the rest and the intent succeeds. final_capture=false
// keeps the rest capturable, only on an intent created with
// payment_method_options[card][request_multicapture]=if_available (the
// fake's every card supports it then; otherwise 400 invalid_request_error
// about final_capture); the intent succeeds once nothing is left. The
// refusals, each saved with its key as Stripe saves a 400:
//
//	more than amount_capturable                  400 amount_too_large
//	a hold past its capture_before               400 charge_expired_for_capture (the intent is
//	                                             then canceled, reason automatic)
//	an intent not in requires_capture            400 payment_intent_unexpected_state, with the
//	  (succeeded, canceled, never confirmed)     intent
//
// expand[]=latest_charge, on any PaymentIntent request, answers its charge
// as an object: amount_captured, captured, refunded (a released hold),
// and payment_method_details.card (capture_before, multicapture.status).
//
// Two payment methods authorize as pm_card_visa and fault their hold's
// captures and cancels:
//
//	pm_card_settle_hold_timeout  executed, then the answer is held for Options.Hold
//	pm_card_settle_hold_500      executed, then 500 api_error (saved, as Stripe saves it)

// The payment methods whose authorizations' captures and cancels fault.
const (
	TokenHoldTimeout = "pm_card_settle_hold_timeout"
	TokenHold500     = "pm_card_settle_hold_500"
)

const defaultAuthorizationExpiry = 7 * 24 * time.Hour

// Capture is one capture the fake executed.
type Capture struct {
	// IdempotencyKey is the capture request's key.
	IdempotencyKey string
	PaymentIntent  string
	Amount         int64
	Final          bool
	Created        time.Time
}

// Captures returns every capture executed so far, in order (replays and
// refused captures not included).
func (s *Server) Captures() []Capture {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Capture(nil), s.captures...)
}

// authorizeLocked is a confirm (or a completed challenge, or the end of
// processing) that went through: an automatic intent succeeds, a manual
// one holds its amount.
func (s *Server) authorizeLocked(pi *PaymentIntent) {
	if pi.CaptureMethod != "manual" {
		pi.Status, pi.AmountReceived = "succeeded", pi.Amount
		return
	}
	pi.Status, pi.AmountCapturable = "requires_capture", pi.Amount
	pi.CaptureBefore = time.Now().Add(s.opts.AuthorizationExpiry).UTC()
}

// lapseLocked cancels an authorization past its capture_before, as
// Stripe does, and reports whether it did.
func (s *Server) lapseLocked(pi *PaymentIntent) bool {
	if pi.Status != "requires_capture" || time.Now().Before(pi.CaptureBefore) {
		return false
	}
	pi.Status, pi.CancellationReason, pi.AmountCapturable = "canceled", "automatic", 0
	noteLocked(pi)
	return true
}

// Expire lets the authorization of a requires_capture intent lapse now.
// It reports false when the intent holds nothing to lapse.
func (s *Server) Expire(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[id]
	if !ok || pi.Status != "requires_capture" {
		return false
	}
	pi.CaptureBefore = time.Now().UTC()
	return s.lapseLocked(pi)
}

// capture captures part or all of an authorization.
func (s *Server) capture(r *http.Request, form url.Values) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.byID[r.PathValue("id")]
	if !ok {
		return answer{status: http.StatusNotFound, body: errorBody(noSuchIntent(r.PathValue("id")))}
	}
	if s.lapseLocked(pi) {
		return answer{status: http.StatusBadRequest, save: true, body: errorBody(apiError{Type: "invalid_request_error",
			Code: "charge_expired_for_capture", Charge: pi.LatestCharge,
			Message: "The charge cannot be captured as the authorization has expired."})}
	}
	if pi.Status != "requires_capture" {
		return s.unexpectedState(pi, "capture")
	}
	amount := pi.AmountCapturable
	if v := form.Get("amount_to_capture"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount_to_capture",
				Message: "Invalid positive integer"})
		}
		amount = n
	}
	final := form.Get("final_capture") != "false"
	switch {
	case form.Has("final_capture") && form.Get("final_capture") != "true" && form.Get("final_capture") != "false":
		return rejected(apiError{Type: "invalid_request_error", Code: "parameter_invalid_boolean", Param: "final_capture",
			Message: "Invalid boolean: " + form.Get("final_capture")})
	case !final && !pi.Multicapture:
		return answer{status: http.StatusBadRequest, save: true, body: errorBody(apiError{Type: "invalid_request_error",
			Param: "final_capture", Message: "final_capture=false can only be used when multicapture is available for this PaymentIntent."})}
	case amount > pi.AmountCapturable:
		return answer{status: http.StatusBadRequest, save: true, body: errorBody(apiError{Type: "invalid_request_error",
			Code: "amount_too_large", Param: "amount_to_capture",
			Message: fmt.Sprintf("The amount to capture (%d) is greater than the amount capturable (%d).", amount, pi.AmountCapturable)})}
	}
	pi.AmountReceived += amount
	pi.AmountCapturable -= amount
	pi.Captures++
	s.captures = append(s.captures, Capture{IdempotencyKey: r.Header.Get("Idempotency-Key"), PaymentIntent: pi.ID,
		Amount: amount, Final: final, Created: time.Now().UTC()})
	if final || pi.AmountCapturable == 0 {
		pi.Status, pi.AmountCapturable = "succeeded", 0
	}
	noteLocked(pi)
	return holdFault(pi, answer{status: http.StatusOK, body: intentJSON(*pi, expandsCharge(form)), save: true})
}

// holdFault is the fault of an executed capture or cancel of pi's hold,
// chosen by its payment method.
func holdFault(pi *PaymentIntent, a answer) answer {
	switch pi.PaymentMethod {
	case TokenHoldTimeout:
		a.hold = true
	case TokenHold500:
		a.status = http.StatusInternalServerError
		a.body = errorBody(apiError{Type: "api_error", Message: "An unknown error occurred"})
	}
	return a
}

// expandsCharge reports whether a request asks for the latest charge as
// an object (expand[]=latest_charge, stripe-go's expand[0]=latest_charge).
func expandsCharge(form url.Values) bool {
	for name, v := range form {
		if strings.HasPrefix(name, "expand[") && len(v) > 0 && v[0] == "latest_charge" {
			return true
		}
	}
	return false
}

// chargeMap is a PaymentIntent's latest charge as Stripe's API shows it.
func chargeMap(pi PaymentIntent) map[string]any {
	card := map[string]any{"brand": "visa", "last4": "4242", "amount_authorized": pi.Amount, "capture_before": nil}
	status := "succeeded"
	if pi.Status == "requires_payment_method" {
		status = "failed"
	}
	captured := pi.Status == "succeeded"
	if pi.CaptureMethod == "manual" {
		card["capture_before"] = pi.CaptureBefore.Unix()
		multi := "unavailable"
		if pi.Multicapture {
			multi = "available"
		}
		card["multicapture"] = map[string]any{"status": multi}
		captured = pi.AmountReceived > 0
	}
	return map[string]any{
		"id": pi.LatestCharge, "object": "charge", "amount": pi.Amount, "currency": pi.Currency,
		"amount_captured": pi.AmountReceived, "captured": captured, "status": status,
		"refunded": pi.Status == "canceled" && pi.AmountReceived == 0, "payment_intent": pi.ID, "metadata": pi.Metadata,
		"payment_method_details": map[string]any{"type": "card", "card": card},
	}
}
