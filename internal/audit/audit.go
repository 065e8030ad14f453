// Package audit proves Settle's promise from the gateways' own records:
// per merchant, gateway account and closed window, it lists what the
// gateway holds (order.ChargeLister) and matches it with Settle's
// attempts, orders and refunds by our reference, in both directions. Each
// discrepancy is a finding for a person, in the review queue; nothing is
// ever fixed automatically.
//
// A run reads the gateway a page at a time and has each page matched by
// the store in one transaction, which also moves the run's checkpoint, so
// that a run's memory does not grow with its window and a run that stops
// resumes after the last record it matched. The paid orders with no
// succeeded charge are then found in SQL, against what the run saw.
//
// A gateway account's records are matched with one merchant's: an account
// that serves several merchants shows each the others' charges, whose
// references are no attempts of its own, as MISSING_IN_SETTLE.
package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// Class is the kind of a finding.
type Class string

// The classes of findings.
const (
	// Duplicate: two or more succeeded charges for one order, a double
	// charge. Critical.
	Duplicate Class = "DUPLICATE"
	// MissingInSettle: a succeeded charge whose attempt Settle lacks, or
	// whose order is not paid.
	MissingInSettle Class = "MISSING_IN_SETTLE"
	// MissingOnGateway: a paid order whose attempt has no succeeded
	// charge at the gateway.
	MissingOnGateway Class = "MISSING_ON_GATEWAY"
	// AmountMismatch: the charge that paid an order is for another amount
	// than its attempt.
	AmountMismatch Class = "AMOUNT_MISMATCH"
	// CurrencyMismatch: the charge that paid an order is in another
	// currency than its attempt.
	CurrencyMismatch Class = "CURRENCY_MISMATCH"
	// StatusMismatch: the gateway has an attempt's charge in another
	// state than Settle (declined at the gateway, paid in Settle).
	StatusMismatch Class = "STATUS_MISMATCH"
	// RefundMismatch: what the gateway refunded or captured of a charge
	// is not what Settle recorded, or a refund at the gateway is not
	// Settle's, or differs from it.
	RefundMismatch Class = "REFUND_MISMATCH"
	// Foreign: a succeeded charge with no Settle reference, made outside
	// Settle. Reported, not an error.
	Foreign Class = "FOREIGN"
)

// Classes lists the classes, the critical first.
var Classes = []Class{Duplicate, MissingInSettle, MissingOnGateway, AmountMismatch, CurrencyMismatch, StatusMismatch,
	RefundMismatch, Foreign}

// Phase is where a run stands.
type Phase string

// A run's phases, in order.
const (
	// PhaseCharges: matching the gateway's charges.
	PhaseCharges Phase = "charges"
	// PhaseRefunds: matching the gateway's refunds.
	PhaseRefunds Phase = "refunds"
	// PhaseMissing: looking for paid orders the gateway did not list.
	PhaseMissing Phase = "missing"
	// PhaseDone: finished.
	PhaseDone Phase = "done"
)

// Window is the span of time a run answers for: the attempts Settle made
// in [From, To).
type Window struct {
	From, To time.Time
}

// Cursor is a run's checkpoint within a phase: the last gateway record
// matched, by the gateway's creation time and id (the listing's order).
// The zero Cursor is the phase's start.
type Cursor struct {
	Created time.Time
	ID      string
}

// After reports whether a record created at created with id id sorts
// after c in a listing.
func (c Cursor) After(created time.Time, id string) bool {
	if k := created.Compare(c.Created); k != 0 {
		return k > 0
	}
	return id > c.ID
}

// Run is one audit of a merchant's gateway account over a window.
type Run struct {
	MerchantID string
	ID         string
	Gateway    string
	Window     Window
	// Margin widens the gateway's listing on both sides of the window:
	// the gateway stamps its records by its own clock.
	Margin time.Duration
	Phase  Phase
	Cursor Cursor
	// Seen counts the gateway's records the run matched.
	Seen int64
	// Counts holds what the run found, by class: each discrepancy it saw,
	// whether or not an earlier run had reported it.
	Counts map[Class]int64
	// Covered is false when the gateway could not be audited (it offers
	// no listing): NotCovered says why. Such a run is never clean.
	Covered    bool
	NotCovered string
	Actor      string
	StartedAt  time.Time
	FinishedAt time.Time
}

// Listed is the span of the gateway's listing: the window widened by the
// margin on both sides.
func (r Run) Listed() Window {
	return Window{From: r.Window.From.Add(-r.Margin), To: r.Window.To.Add(r.Margin)}
}

// Clean reports whether the run finished, covered, with no finding.
func (r Run) Clean() bool {
	if r.Phase != PhaseDone || !r.Covered {
		return false
	}
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return true
}

// Finding is one discrepancy between a gateway's records and Settle's.
type Finding struct {
	MerchantID string
	ID         string
	// RunID is the run that found it first.
	RunID   string
	Gateway string
	Class   Class
	// OrderID and AttemptID are Settle's records concerned, "" when
	// Settle has none.
	OrderID   string
	AttemptID string
	// GatewayRecordID is the gateway's charge concerned ("" for
	// MissingOnGateway).
	GatewayRecordID string
	// Settle and GatewayRecord are the two sides as the run read them
	// (JSON objects; null for a side that has nothing).
	Settle        json.RawMessage
	GatewayRecord json.RawMessage
	CreatedAt     time.Time
	// The resolution: when, by whom, and the operator's note.
	ResolvedAt time.Time
	Actor      order.Actor
	Note       string
}

// Found is what one step of a run found: findings by class, and whether
// each was new.
type Found struct {
	Class Class
	New   bool
}

// Store keeps audit runs and findings, and matches the gateway's records
// with Settle's.
type Store interface {
	// StartRun resumes the unfinished run of r's merchant, gateway and
	// window, or records r as a new one, and returns it.
	StartRun(ctx context.Context, r Run) (Run, error)
	// MatchCharges matches a page of the gateway's charges, in listing
	// order, with the merchant's attempts and orders, records what the
	// run found and saw, and moves the run's cursor to the page's last
	// charge, all in one transaction; charged lists the order states in
	// which Settle holds the order charged.
	MatchCharges(ctx context.Context, r Run, page []order.GatewayCharge, charged []order.State) (Run, []Found, error)
	// MatchRefunds does MatchCharges' work for a page of refunds, matched
	// with the merchant's refunds.
	MatchRefunds(ctx context.Context, r Run, page []order.GatewayRefund) (Run, []Found, error)
	// NextPhase moves the run to phase p, its cursor at p's start.
	NextPhase(ctx context.Context, r Run, p Phase) (Run, error)
	// FinishRun records a finding for each attempt of the window whose
	// order Settle holds charged and whose succeeded charge the run did
	// not see, and finishes the run, in one transaction.
	FinishRun(ctx context.Context, r Run, charged []order.State) (Run, []Found, error)
	// LastRun returns the merchant's latest finished run of the gateway
	// account by its window's end; order.ErrNotFound when none has run.
	LastRun(ctx context.Context, merchantID, gateway string) (Run, error)
	// Runs returns the merchant's runs, the latest first, at most limit.
	Runs(ctx context.Context, merchantID string, limit int) ([]Run, error)
	// Findings returns the findings a run saw, oldest first.
	Findings(ctx context.Context, merchantID, runID string) ([]Finding, error)
}

// charged are the order states in which Settle holds an order's charge as
// made: money taken, held, or held and released since.
var charged = []order.State{order.StatePaid, order.StatePartiallyRefunded, order.StateRefunded, order.StateAuthorized,
	order.StateVoided, order.StateExpired}
