// Package order is Settle's domain: orders, their states and the one table
// of moves between them, money, validation, and the Service that charges an
// order exactly once (claim, call, settle). It does no I/O of its own; the
// Store and Gateway it needs are small interfaces implemented elsewhere.
package order

import (
	"strings"
	"time"
)

// State is where an order stands. The database mirrors these values.
type State string

// The states of an order. REFUNDED and CANCELED are terminal.
const (
	StatePending     State = "PENDING"
	StateCharging    State = "CHARGING"
	StatePaid        State = "PAID"
	StateCanceled    State = "CANCELED"
	StateNeedsReview State = "NEEDS_REVIEW"
	// StatePartiallyRefunded: paid, and some of it refunded.
	StatePartiallyRefunded State = "PARTIALLY_REFUNDED"
	// StateRefunded: paid, and all of it refunded.
	StateRefunded State = "REFUNDED"
	// StateRequiresAction: the gateway asks the customer to act (3-D
	// Secure); the checkout has the next action. The customer's return
	// settles it, or the reconciler cancels it when it expires.
	StateRequiresAction State = "REQUIRES_ACTION"
	// StateAuthorized: a capture-manual order whose charge succeeded as an
	// authorization: the gateway holds the amount until captures take it,
	// a void releases it, or it lapses (EXPIRED).
	StateAuthorized State = "AUTHORIZED"
	// StateVoided: the hold was released with nothing captured. Terminal.
	StateVoided State = "VOIDED"
	// StateExpired: the gateway let the hold lapse with nothing captured.
	// Terminal.
	StateExpired State = "EXPIRED"
)

// States lists every state, in the order the API numbers them.
var States = []State{StatePending, StateCharging, StatePaid, StateCanceled, StateNeedsReview,
	StatePartiallyRefunded, StateRefunded, StateRequiresAction, StateAuthorized, StateVoided, StateExpired}

// AwaitsGateway reports whether an order in state s has an attempt whose
// outcome the gateway has yet to tell: CHARGING, or REQUIRES_ACTION, where
// the customer is to act. The reconciler checks orders in both.
func (s State) AwaitsGateway() bool { return s == StateCharging || s == StateRequiresAction }

// Terminal reports whether nothing can happen to an order in state s.
func (s State) Terminal() bool {
	return s == StateRefunded || s == StateCanceled || s == StateVoided || s == StateExpired
}

// ChargeSettled reports whether the charge path is done with an order in
// state s: it was paid (and perhaps refunded since), canceled, or
// authorized (and perhaps voided or lapsed since). Only refunds, captures,
// voids and the gateway's word on a hold can move it from here.
func (s State) ChargeSettled() bool {
	switch s {
	case StatePaid, StatePartiallyRefunded, StateRefunded, StateCanceled, StateAuthorized, StateVoided, StateExpired:
		return true
	default:
		return false
	}
}

// Actor names who made a transition, as an order's history records it.
type Actor string

// The actors that are not people.
const (
	// ActorAPI is the charge path, serving a client's call.
	ActorAPI Actor = "api"
	// ActorReconciler is the reconciler, settling an unknown outcome.
	ActorReconciler Actor = "reconciler"
)

// Operator is the actor for a person at the operator API, named by the API
// key they called with. The key's name, never the key, reaches the history.
func Operator(keyName string) Actor { return Actor("ops:" + keyName) }

// The kinds of actor, as events tell merchants who acted (see Kind).
const (
	// KindMerchant: the merchant's own call (ActorAPI).
	KindMerchant = "merchant"
	// KindOperator: a person at the operator API (Operator).
	KindOperator = "operator"
	// KindSettle: Settle itself, the reconciler settling an outcome.
	KindSettle = "settle"
)

// Kind is what a merchant is told of the actor: KindMerchant,
// KindOperator or KindSettle, never the operator's key name, which is
// the platform's own.
func (a Actor) Kind() string {
	switch {
	case a == ActorAPI:
		return KindMerchant
	case strings.HasPrefix(string(a), "ops:"):
		return KindOperator
	default:
		return KindSettle
	}
}

// Money is an amount in a currency's minor units.
type Money struct {
	Currency    string
	AmountMinor int64
}

// DefaultMerchant owns every order until authentication assigns merchants.
const DefaultMerchant = "default"

// Order is what a customer owes a merchant.
type Order struct {
	ID                string
	MerchantID        string
	MerchantReference string
	Amount            Money
	PaymentMethod     string
	// Gateway is the gateway of the order's current attempt (before the
	// first, of its first eligible route): the claim of an attempt sets
	// both, so that whatever acts on the current attempt (the reconciler,
	// captures, voids, refunds) reaches the gateway it was sent to.
	Gateway string
	// Routes are the gateways the order may be charged on, in order of
	// preference, as created; nil for an order with one route (Gateway and
	// PaymentMethod). Only Create and CreateAndCharge carry them; reads of
	// an order leave them nil (Store.Routing has them).
	Routes []Route
	State  State
	// CurrentAttempt is the attempt in flight, or the last one made.
	CurrentAttempt string
	// ReconcileAt is when the reconciler next looks at a CHARGING order.
	ReconcileAt time.Time
	// ReconcileCount counts the reconciler's checks of the current attempt.
	ReconcileCount int
	// LastError is the last thing that kept the outcome unknown.
	LastError string
	// Refunded is the sum of the order's succeeded refunds, and Refunding
	// the sum of those in flight or in review: what may have gone back.
	// Never more than Amount is refunded or refunding.
	Refunded, Refunding int64
	// OpenDisputes counts the order's disputes that wait on their outcome
	// (refunds are refused meanwhile), Disputed is what they dispute, and
	// ChargedBack what the gateway took back for disputes lost or still
	// open (withdrawn less reinstated): it is no longer refundable. The
	// order's state does not move for a dispute (dispute.go). Reads that
	// show an order to a client fill them.
	OpenDisputes          int
	Disputed, ChargedBack int64
	// Capture is the order's capture mode; empty reads as CaptureAutomatic.
	Capture CaptureMode
	// With CaptureManual, once authorized: AuthorizedMinor is what the
	// gateway holds, CaptureBefore when it lets the hold lapse (zero when
	// it did not say), CapturedMinor the sum of the succeeded captures and
	// CapturingMinor of those in flight or in review; Voiding says a void
	// is in flight or in review, HoldClosed that a final capture released
	// the rest. Never more than AuthorizedMinor is captured or capturing.
	AuthorizedMinor, CapturedMinor, CapturingMinor int64
	CaptureBefore                                  time.Time
	Voiding, HoldClosed                            bool
	CreatedAt                                      time.Time
	UpdatedAt                                      time.Time
}

// Attempt is one try to charge an order. Its ID is the gateway reference and
// idempotency key; it never changes, and every retry of the attempt reuses it.
type Attempt struct {
	ID            string
	OrderID       string
	RequestID     string
	PaymentMethod string
	// Customer is the gateway's customer the payment method is saved to
	// (a Stripe Customer id), or empty.
	Customer string
	// Gateway is the gateway the attempt was sent to.
	Gateway string
	// CascadeAfter, for an attempt that followed another in a cascade, is
	// that attempt's gateway and proven outcome ("sim not_sent", "sim
	// declined: processing_error"); Skipped names the routes passed over
	// as ineligible for it, with why. Both are read by History only.
	CascadeAfter, Skipped string
	Amount                Money
	// Outcome is empty while the first call is in flight.
	Outcome         Outcome
	DeclineCode     string
	GatewayChargeID string
	CreatedAt       time.Time
	// NextAction is what the customer must do while the attempt waits for
	// them (REQUIRES_ACTION), when the gateway has just said; it is never
	// stored.
	NextAction NextAction
}

// AwaitsNobody reports an attempt whose off-session charge the gateway
// answered by asking for the customer's authentication, and whose cancel's
// outcome is unknown (OutcomeUnknown with DeclineAuthenticationRequired):
// its gateway charge may still be open, waiting for a customer who is not
// there. A lookup cancels it at once, rather than wait for the action
// expiry as for a customer at the checkout.
func (a Attempt) AwaitsNobody() bool {
	return a.Outcome == OutcomeUnknown && a.DeclineCode == DeclineAuthenticationRequired
}

// Event is one recorded transition in an order's history.
type Event struct {
	// Seq orders an order's events: a later event has a greater Seq.
	Seq       int64
	OrderID   string
	From      State // empty for the creation of the order
	To        State
	Name      string
	Actor     Actor
	Reason    string
	AttemptID string
	// RefundID, CaptureID and VoidID name the refund, capture or void
	// that made the move, if one did.
	RefundID  string
	CaptureID string
	VoidID    string
	CreatedAt time.Time
}

// Due is a CHARGING order leased for a reconciler's check, with its current
// attempt.
type Due struct {
	Order   Order
	Attempt Attempt
	// AttemptAge is how long ago the attempt was made, in database time.
	AttemptAge time.Duration
}

// ListFilter selects orders for an operator.
type ListFilter struct {
	// Scope is whose orders are listed: the operator's key's.
	Scope Scope
	// State, when set, keeps only orders in it.
	State State
	// MinAge keeps only orders whose last state change is at least this old.
	MinAge time.Duration
	Limit  int
	// After continues a listing after this order (the last of a page).
	AfterUpdated time.Time
	AfterID      string
}

// HistoryPage selects one page of an order's history: up to Limit events
// after event AfterSeq, and up to Limit attempts after the attempt
// (AfterAttemptCreated, AfterAttemptID) in the order (created, id).
type HistoryPage struct {
	Limit               int
	AfterSeq            int64
	AfterAttemptCreated time.Time
	AfterAttemptID      string
}

// History is an order as it stood at one moment, with one page of its
// events and attempts (see HistoryPage) and, when asked for, its refunds,
// captures and voids with their histories.
type History struct {
	Order        Order
	Events       []Event
	Attempts     []Attempt
	Refunds      []Refund
	RefundEvents []RefundEvent
	// Captures and Voids are the order's, with their transitions, as its
	// refunds are.
	Captures      []Capture
	CaptureEvents []CaptureEvent
	Voids         []Void
	VoidEvents    []VoidEvent
}

// Stats summarises the orders an operator's scope reaches.
type Stats struct {
	ByState map[State]int64
	// OldestCharging is when the longest-CHARGING order entered CHARGING.
	OldestCharging time.Time
	// Backlog counts CHARGING orders whose check is due.
	Backlog int64
	// Refunds summarises the refunds.
	Refunds RefundStats
	// Holds summarises the authorizations, captures and voids.
	Holds HoldStats
}

// ExpiringWithin is how close to its capture_before an authorization
// counts as expiring in HoldStats: a day, time for a person to capture or
// void it before the gateway lets it lapse.
const ExpiringWithin = 24 * time.Hour

// HoldStats summarises authorizations, captures and voids.
type HoldStats struct {
	// Expiring counts AUTHORIZED orders whose capture_before is within
	// ExpiringWithin, or has passed (the reconciler is yet to hear from
	// the gateway whether the hold lapsed).
	Expiring        int64
	CapturesByState map[CaptureState]int64
	VoidsByState    map[VoidState]int64
}
