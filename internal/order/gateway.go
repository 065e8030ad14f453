package order

import (
	"context"
	"errors"
	"time"
)

// Outcome is what a call to a gateway came to.
type Outcome string

// The outcomes of a gateway call. Only OutcomeSucceeded means money moved;
// only OutcomeDeclined and OutcomeNotSent prove that it did not. Everything
// else is OutcomeUnknown, which is a state to be reconciled, never a failure.
const (
	// OutcomeSucceeded: the gateway charged the customer.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeDeclined: the gateway said no (a decline, or a rejected request).
	OutcomeDeclined Outcome = "declined"
	// OutcomeNotSent: provably never reached the gateway (refused before a
	// byte was written, or the gateway promised it charged nothing).
	OutcomeNotSent Outcome = "not_sent"
	// OutcomeRefused: the gateway refused Settle itself (a bad, revoked or
	// restricted API key, or a request it cannot accept) before charging
	// anything. It settles like a decline, but it is a configuration
	// error at Settle, not the card's: the checkout is told so, and the
	// operators are alerted.
	OutcomeRefused Outcome = "refused"
	// OutcomeRequiresAction: the gateway asks the customer to act (3-D
	// Secure) before it charges; Result.NextAction says how. Nothing has
	// moved yet, and the attempt stays open until the customer acts or it
	// expires.
	OutcomeRequiresAction Outcome = "requires_action"
	// OutcomeUnknown: anything else. The charge may or may not have happened.
	OutcomeUnknown Outcome = "unknown"
	// OutcomeNotFound: a lookup found no charge with the reference.
	OutcomeNotFound Outcome = "not_found"
)

// DeclineAuthenticationRequired is the decline code of a merchant-initiated
// (off-session) charge that the gateway would make only once the customer
// has authenticated: nobody is there to do it. Every adapter reports it
// alike. With OutcomeUnknown it marks an attempt whose gateway charge still
// waits for that authentication (see Attempt.AwaitsNobody).
const DeclineAuthenticationRequired = "authentication_required"

// ChargeRequest is what a gateway needs to charge, and to look up, one
// attempt. Lookups get the same request so that a gateway with idempotency
// keys can replay a step of the original call with the same parameters.
type ChargeRequest struct {
	// AttemptID is the gateway reference and idempotency key.
	AttemptID         string
	OrderID           string
	MerchantReference string
	Amount            Money
	PaymentMethod     string
	// CreatedAt is when the attempt was made (the attempt row's creation
	// time). A gateway whose Lookup replays the charge under its
	// idempotency key needs it to stay inside the key's retention window;
	// Lookup callers must set it, Charge callers may leave it zero.
	CreatedAt time.Time
	// GatewayChargeID is the gateway's own id for the attempt when Settle
	// has recorded one (a Result's ChargeID, kept even when the outcome
	// was unknown). Lookup callers set it, so that a gateway can read the
	// attempt by its id; Charge callers leave it empty.
	GatewayChargeID string
	// CustomerPresent says the customer is at the checkout and can act
	// (3-D Secure); otherwise the charge is merchant-initiated (off
	// session). Charge only.
	CustomerPresent bool
	// ReturnURL is where the gateway sends the customer back after a
	// redirect. Charge only.
	ReturnURL string
	// Customer is the gateway's customer the payment method is saved to
	// (a Stripe Customer), or empty. Charge and Lookup: it is the
	// attempt's, kept with it, because a Stripe Lookup may replay the
	// create, which must carry the same parameters as the first one.
	Customer string
	// CancelAwaitingAction tells Lookup that an attempt waiting for the
	// customer has expired, or waits for nobody (Attempt.AwaitsNobody): it
	// cancels it, proving it uncharged, instead of reporting
	// OutcomeRequiresAction.
	CancelAwaitingAction bool
	// Capture is the order's capture mode: with CaptureManual the charge
	// only authorizes (a Capturer), and a succeeded Result carries its
	// Hold. Charge and Lookup. Empty is CaptureAutomatic.
	Capture CaptureMode
	// AwaitingAction tells Lookup that Settle holds the attempt as waiting
	// for the customer (REQUIRES_ACTION): a gateway that cannot read the
	// attempt (Adyen, whose lookups answer from its notifications) reports
	// silence as OutcomeRequiresAction rather than as an unknown. Lookup
	// only.
	AwaitingAction bool
}

// LookupRequest is the request that asks o's gateway about its attempt a:
// everything the charge carried (a gateway may replay a step of it), what
// Settle learned since, and where the order stands.
func LookupRequest(o Order, a Attempt) ChargeRequest {
	return ChargeRequest{
		AttemptID: a.ID, OrderID: o.ID, MerchantReference: o.MerchantReference, Amount: a.Amount,
		PaymentMethod: a.PaymentMethod, Customer: a.Customer, CreatedAt: a.CreatedAt,
		GatewayChargeID: a.GatewayChargeID, Capture: o.Capture,
		AwaitingAction: o.State == StateRequiresAction && o.CurrentAttempt == a.ID,
	}
}

// Result is a gateway's answer about one attempt.
type Result struct {
	Outcome Outcome
	// ChargeID is the gateway's own id for the charge, when it told us.
	ChargeID string
	// DeclineCode says why the gateway said no. With OutcomeUnknown it is
	// empty, or DeclineAuthenticationRequired for an off-session charge the
	// gateway asked the absent customer to authenticate and that could not
	// be canceled: the settle records it, and the reconciler cancels it.
	DeclineCode string
	// NextAction is what the customer must do, with OutcomeRequiresAction.
	NextAction NextAction
	// Hold is the authorization as the gateway has it, for a charge made
	// with CaptureManual (and its captures); nil otherwise.
	Hold *Hold
}

// NextAction is what the checkout shows a customer the gateway asks to act:
// a page to redirect to, or the secret a client library (Stripe.js) needs.
// Neither is stored or logged.
type NextAction struct {
	RedirectURL  string
	ClientSecret string
}

// Gateway charges payment methods. Charge reports an outcome for every call;
// its error, when not nil, explains an OutcomeUnknown, OutcomeNotSent or
// OutcomeRefused and is for logs only. Lookup asks about an earlier attempt
// by its reference; it returns OutcomeSucceeded, OutcomeDeclined or
// OutcomeNotFound, or an error when the gateway cannot say. A Lookup never
// moves money: it reads, and at most cancels what was never confirmed.
// With OutcomeUnknown, either call may still report the ChargeID it
// learned, so that it is recorded for the next Lookup.
type Gateway interface {
	Charge(ctx context.Context, req ChargeRequest) (Result, error)
	Lookup(ctx context.Context, req ChargeRequest) (Result, error)
}

// AmountChecker is implemented by a gateway that cannot carry every amount
// the currency table allows (Stripe wants three-decimal amounts in
// multiples of ten). The Service asks it when an order is created, so that
// such an order is refused at once instead of at its first charge.
type AmountChecker interface {
	// CheckAmount returns a *ValidationError naming what is wrong with m.
	CheckAmount(m Money) error
}

// ErrNotYetKnown is returned (wrapped) by Lookup when the gateway has not
// yet told Settle what became of the attempt and cannot be asked (Adyen,
// whose outcomes arrive only by notification), while the attempt's request
// may still be reaching it. It is not a failed check: the reconciler looks
// again no sooner than the no-show horizon, or when the gateway's event
// makes the attempt due.
var ErrNotYetKnown = errors.New("the gateway has not told the outcome yet")

// ErrLookupExpired is returned by Lookup when the gateway can no longer be
// asked about the attempt safely (for example, an idempotency key past its
// retention window). The reconciler hands such orders to a person.
var ErrLookupExpired = errors.New("gateway can no longer be asked about this attempt")
