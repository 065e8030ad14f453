package refpsp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// exchange is what one HTTP call came to, as far as the client could see.
type exchange struct {
	// connected is true once the transport obtained a connection for the
	// request; from then on some of the request may have reached the gateway.
	connected bool
	// status is the response's status code, or 0 when there was no response.
	status int
	// body is the response body, read up to maxBody.
	body []byte
	// err is why there was no response (status 0), or why its body could
	// not be read in full.
	err error
}

// classifyCharge turns the exchange of a POST /v1/charges into an outcome.
// Every rule about what a charge's answer means lives here. The error
// explains every outcome but a success or a 402 decline. It quotes no more
// of the response body than a clipped field or two: a gateway may fill its
// answers with what it was sent, payment method token included.
func classifyCharge(req order.ChargeRequest, ex exchange) (order.Result, error) {
	if ex.status == 0 {
		if !ex.connected && gateway.IsDialError(ex.err) {
			return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("not sent: %w", ex.err)
		}
		return unknown(fmt.Errorf("no answer: %w", ex.err))
	}

	switch s := ex.status; {
	case s == http.StatusCreated || s == http.StatusPaymentRequired || s == http.StatusAccepted:
		if ex.err != nil {
			return unknown(fmt.Errorf("gateway answered %d but the body could not be read: %w", s, ex.err))
		}
		ch, err := parseCharge(ex.body)
		if err != nil {
			return unknown(fmt.Errorf("gateway answered %d: %w", s, err))
		}
		if err := ch.matches(req); err != nil {
			return unknown(fmt.Errorf("gateway answered %d: %w", s, err))
		}
		if !answerFits(s, ch.Status) {
			return unknown(fmt.Errorf("gateway answered %d with a charge whose status is %q", s, clip(ch.Status)))
		}
		return ch.result(req), nil
	case s == http.StatusTooManyRequests:
		return order.Result{Outcome: order.OutcomeNotSent},
			errors.New("gateway rate limited the charge (429); nothing was charged")
	case s >= 500:
		return unknown(fmt.Errorf("gateway answered %d", s))
	case s >= 400:
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: fmt.Sprintf("rejected_%d", s)},
			fmt.Errorf("gateway rejected the charge (%d); nothing was charged", s)
	default:
		// 200, 3xx and the like are not in the protocol for a charge.
		return unknown(fmt.Errorf("gateway answered unexpected status %d", s))
	}
}

// classifyLookup turns the exchange of a GET /v1/charges?reference= into an
// outcome, or an error when the answer does not say.
func classifyLookup(req order.ChargeRequest, ex exchange) (order.Result, error) {
	if ex.status == 0 {
		return unknown(fmt.Errorf("no answer: %w", ex.err))
	}
	switch ex.status {
	case http.StatusOK:
		if ex.err != nil {
			return unknown(fmt.Errorf("gateway answered 200 but the body could not be read: %w", ex.err))
		}
		ch, err := parseCharge(ex.body)
		if err != nil {
			return unknown(fmt.Errorf("gateway answered 200: %w", err))
		}
		if err := ch.matches(req); err != nil {
			return unknown(fmt.Errorf("gateway answered 200: %w", err))
		}
		return ch.result(req), nil
	case http.StatusNotFound:
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	default:
		return unknown(fmt.Errorf("gateway answered %d", ex.status))
	}
}

func unknown(err error) (order.Result, error) {
	return order.Result{Outcome: order.OutcomeUnknown}, err
}

// parseCharge decodes a charge object and checks that it is one: it has a
// reference, a known status, and an id when it succeeded. Unknown fields are
// ignored so that the gateway can add some.
func parseCharge(body []byte) (ChargeObject, error) {
	var ch ChargeObject
	if err := json.Unmarshal(body, &ch); err != nil {
		return ChargeObject{}, fmt.Errorf("malformed charge: %w", err)
	}
	if ch.Reference == "" {
		return ChargeObject{}, errors.New("charge has no reference")
	}
	switch ch.Status {
	case StatusSucceeded, StatusAuthorized, StatusCaptured, StatusVoided, StatusExpired:
		if ch.ID == "" {
			return ChargeObject{}, fmt.Errorf("%s charge has no id", ch.Status)
		}
	case StatusDeclined, StatusRequiresAction:
	default:
		return ChargeObject{}, fmt.Errorf("charge has unknown status %q", clip(ch.Status))
	}
	return ch, nil
}

// matches checks that ch is the charge req asked for. An answer about another
// reference or another amount is not an answer about this attempt.
func (ch ChargeObject) matches(req order.ChargeRequest) error {
	if ch.Reference != req.AttemptID {
		return fmt.Errorf("charge reference %q is not ours", clip(ch.Reference))
	}
	if ch.Amount != req.Amount.AmountMinor || !strings.EqualFold(ch.Currency, req.Amount.Currency) {
		return fmt.Errorf("charge is for %d %s, not %d %s",
			ch.Amount, clip(ch.Currency), req.Amount.AmountMinor, req.Amount.Currency)
	}
	if ch.hold() != nil && req.Capture != order.CaptureManual {
		// Money held, not taken: reporting it as a charge would mark an
		// order paid that is not. Only a person can untangle it.
		return fmt.Errorf("charge is an authorization (%s), but the order captures at once", ch.Status)
	}
	return nil
}

// answerFits reports whether a charge's status is one the HTTP status of
// the answer to POST /v1/charges can carry: 201 a charge made (at once,
// or an authorization in whatever state it now is, when a repeated
// reference is answered with it), 402 a decline, 202 a charge waiting for
// the customer.
func answerFits(code int, status string) bool {
	switch code {
	case http.StatusPaymentRequired:
		return status == StatusDeclined
	case http.StatusAccepted:
		return status == StatusRequiresAction
	}
	switch status {
	case StatusSucceeded, StatusAuthorized, StatusCaptured, StatusVoided, StatusExpired:
		return true
	}
	return false
}

// hold is the authorization ch is, or nil when it is none.
func (ch ChargeObject) hold() *order.Hold {
	h := &order.Hold{AuthorizedMinor: ch.Amount, CapturedMinor: ch.AmountCaptured, CaptureBefore: ch.CaptureBefore}
	switch ch.Status {
	case StatusAuthorized:
		h.State = order.HoldOpen
	case StatusCaptured:
		h.State = order.HoldCaptured
	case StatusVoided:
		h.State = order.HoldVoided
	case StatusExpired:
		h.State = order.HoldExpired
	default:
		return nil
	}
	return h
}

// result is the outcome ch stands for, as an answer to req. parseCharge
// has checked its status, and matches that it fits req's capture mode.
func (ch ChargeObject) result(req order.ChargeRequest) order.Result {
	if h := ch.hold(); h != nil {
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: ch.ID, Hold: h}
	}
	switch ch.Status {
	case StatusSucceeded:
		res := order.Result{Outcome: order.OutcomeSucceeded, ChargeID: ch.ID}
		if req.Capture == order.CaptureManual {
			// A gateway that charged at once what it was asked to
			// authorize: the money is taken, all of it.
			res.Hold = &order.Hold{State: order.HoldCaptured, AuthorizedMinor: ch.Amount, CapturedMinor: ch.Amount}
		}
		return res
	case StatusRequiresAction:
		return order.Result{Outcome: order.OutcomeRequiresAction, ChargeID: ch.ID,
			NextAction: order.NextAction{RedirectURL: ch.NextActionURL}}
	}
	code := ch.DeclineCode
	if code == "" {
		code = "unspecified"
	}
	return order.Result{Outcome: order.OutcomeDeclined, ChargeID: ch.ID, DeclineCode: code}
}

// clip shortens a string from a response for an error message.
func clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
