package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ReviewKind is what a review queue item is about.
type ReviewKind string

// The kinds of the review queue. The first four are operations in
// NEEDS_REVIEW, resolved by their own calls (Resolve, ResolveRefund); the
// next three are review items raised by a gateway's event, resolved by
// ResolveReviewItem; then a dispute near its deadline, answered at the
// gateway; the last is a finding of the gateway audit, resolved by
// ResolveAuditFinding.
const (
	// ReviewOrder: an order whose charge the reconciler could not learn.
	ReviewOrder ReviewKind = "order"
	// ReviewRefund: a refund whose outcome the reconciler could not learn.
	ReviewRefund ReviewKind = "refund"
	// ReviewCapture: a capture whose outcome the reconciler could not learn.
	ReviewCapture ReviewKind = "capture"
	// ReviewVoid: a void whose outcome the reconciler could not learn.
	ReviewVoid ReviewKind = "void"
	// ReviewPossibleDoubleCharge: the gateway reported a success for an
	// attempt its order does not hold: a possible second charge.
	ReviewPossibleDoubleCharge ReviewKind = "possible_double_charge"
	// ReviewCaptureFailed: the gateway reported a failure for the
	// operation that paid an order (Adyen's CAPTURE_FAILED).
	ReviewCaptureFailed ReviewKind = "capture_failed"
	// ReviewRefundFailed: the gateway reported a failure for a refund
	// Settle had settled as succeeded (Adyen's REFUND_FAILED).
	ReviewRefundFailed ReviewKind = "refund_failed"
	// ReviewDispute: a dispute waiting on the merchant's evidence
	// (NEEDS_RESPONSE) due within DisputeDueWithin, or overdue. It enters
	// the queue DisputeDueWithin before its due_by and leaves it when the
	// gateway reports the response or the dispute's end.
	ReviewDispute ReviewKind = "dispute"
	// ReviewAuditFinding: the gateway audit found the gateway's records
	// and Settle's in disagreement (internal/audit).
	ReviewAuditFinding ReviewKind = "audit_finding"
)

// ReviewKinds lists the kinds, in the queue's order of kinds.
var ReviewKinds = []ReviewKind{ReviewOrder, ReviewRefund, ReviewCapture, ReviewVoid, ReviewPossibleDoubleCharge, ReviewCaptureFailed,
	ReviewRefundFailed, ReviewDispute, ReviewAuditFinding}

// IsItem reports whether items of kind k are review items (review_items),
// resolved by ResolveReviewItem.
func (k ReviewKind) IsItem() bool {
	return k == ReviewPossibleDoubleCharge || k == ReviewCaptureFailed || k == ReviewRefundFailed || k == ReviewAuditFinding
}

// ReviewDecision is an operator's decision about a review item.
type ReviewDecision string

// The decisions about a review item's attempt.
const (
	// ReviewCharged: the attempt did charge the customer (for a possible
	// double charge, the second charge is real and must be refunded at
	// the gateway; for a failed capture, the money was taken after all).
	ReviewCharged ReviewDecision = "charged"
	// ReviewNotCharged: the attempt did not charge the customer. The
	// gateway must confirm it first.
	ReviewNotCharged ReviewDecision = "not_charged"
)

// ReviewItem is one entry of the review queue.
type ReviewItem struct {
	Kind ReviewKind
	// ID is the review item's id for the review items' kinds, and the
	// order's, refund's, capture's or void's id for the others.
	ID         string
	MerchantID string
	OrderID    string
	// AttemptID is the attempt concerned: the review item's, or the
	// order's current one ("" for a refund).
	AttemptID string
	// OperationID is the refund's, capture's, void's or dispute's id for
	// those kinds.
	OperationID string
	Gateway     string
	// RaisedAt is when the item entered review: the operation's last
	// change, or the review item's creation.
	RaisedAt time.Time
	// ReconcileCount is how many lookups the reconciler made; LastError
	// is the last one's failure, which escalated the operation.
	ReconcileCount int
	LastError      string
	// Outcome and DeclineCode are the gateway's last answer as Settle
	// recorded it: the operation's recorded outcome, or what the event
	// that raised the review item said.
	Outcome     Outcome
	DeclineCode string
	// EventID and EventType name the gateway event that raised a review
	// item; for a dispute, the gateway's id of the dispute and its stage.
	EventID   string
	EventType string
	// DueBy is when a dispute's evidence is due.
	DueBy time.Time
	// The resolution of a resolved review item: the decision, who made
	// it, their note, when, and what the gateway answered when asked
	// first ("" when it could not say).
	Decision       ReviewDecision
	Actor          Actor
	Note           string
	ResolvedAt     time.Time
	GatewayOutcome Outcome
	// An audit finding's class (the audit's DUPLICATE, FOREIGN, ...), the
	// gateway's record concerned, and the two sides as the audit read
	// them: Settle's and the gateway's (JSON objects, or null).
	AuditClass      string
	GatewayRecordID string
	SettleSide      string
	GatewaySide     string
}

// Reason says, in Settle's words, why the item is in review.
func (r ReviewItem) Reason() string {
	switch r.Kind {
	case ReviewPossibleDoubleCharge:
		return fmt.Sprintf("gateway event %s (%s) reported a success for attempt %s, which its order does not hold: a possible second charge",
			r.EventID, r.EventType, r.AttemptID)
	case ReviewCaptureFailed:
		return fmt.Sprintf("gateway event %s (%s) reported a failure for the operation that paid the order (attempt %s)",
			r.EventID, r.EventType, r.AttemptID)
	case ReviewRefundFailed:
		return fmt.Sprintf("gateway event %s (%s) reported a failure for a refund of the order that Settle had settled as succeeded: the money did not go back",
			r.EventID, r.EventType)
	case ReviewDispute:
		return fmt.Sprintf("dispute %s (%s, reason %q) waits on the merchant's evidence, due by %s: answer it at the gateway",
			r.EventID, r.EventType, r.DeclineCode, r.DueBy.UTC().Format(time.RFC3339))
	case ReviewAuditFinding:
		return fmt.Sprintf("the audit of gateway %s found %s (gateway record %q): Settle's records and the gateway's disagree",
			r.Gateway, r.AuditClass, r.GatewayRecordID)
	case ReviewOrder, ReviewRefund, ReviewCapture, ReviewVoid:
	}
	if r.LastError == "" {
		return fmt.Sprintf("the %s is in NEEDS_REVIEW", r.Kind)
	}
	return fmt.Sprintf("the reconciler handed the %s to a person: %s", r.Kind, r.LastError)
}

// ReviewFilter selects a page of the review queue, which is ordered by
// RaisedAt, then Kind, then ID.
type ReviewFilter struct {
	Scope Scope
	// Kind selects one kind; "" all.
	Kind ReviewKind
	// After is the last item of the previous page; the zero value starts
	// at the oldest.
	After ReviewCursor
	Limit int
}

// ReviewCursor is a position in the review queue.
type ReviewCursor struct {
	RaisedAt time.Time
	Kind     ReviewKind
	ID       string
}

// ReviewResolution is an operator's decision about a merchant's review
// item, as the store records it. An audit finding (Kind
// ReviewAuditFinding) is resolved with a note and no decision.
type ReviewResolution struct {
	Kind           ReviewKind
	MerchantID     string
	ID             string
	Decision       ReviewDecision
	Actor          Actor
	Note           string
	GatewayOutcome Outcome
}

// ReviewStore keeps the review queue.
type ReviewStore interface {
	// ReviewItems returns a page of the review queue.
	ReviewItems(ctx context.Context, f ReviewFilter) ([]ReviewItem, error)
	// ReviewItem returns a merchant's review item (of the review items'
	// kinds) by id, resolved or not; ErrReviewItemNotFound when there is
	// none.
	ReviewItem(ctx context.Context, merchantID, id string) (ReviewItem, error)
	// ResolveReviewItem records r on its open item and reports true; it
	// changes nothing and reports false when the item is resolved already.
	ResolveReviewItem(ctx context.Context, r ReviewResolution) (bool, error)
}

// ErrReviewItemNotFound means no review item has the id within the order
// named.
var ErrReviewItemNotFound = errors.New("review item not found")

// ReviewResolvedError refuses a decision about a review item that another
// decision resolved already.
type ReviewResolvedError struct {
	Decision ReviewDecision
}

func (e *ReviewResolvedError) Error() string {
	return fmt.Sprintf("the review item is resolved already as %s; a resolution is not changed", e.Decision)
}

// ReviewChargeFoundError refuses the decision that a review item's attempt
// did not charge: the gateway reports that it did.
type ReviewChargeFoundError struct {
	AttemptID string
	ChargeID  string
}

func (e *ReviewChargeFoundError) Error() string {
	return fmt.Sprintf("the gateway reports a charge for attempt %s (gateway charge id %q): the customer was charged; resolve the item CHARGED",
		e.AttemptID, e.ChargeID)
}

// ResolveReviewItem records an operator's decision about a review item
// (a possible double charge, a failed capture) of order orderID, within
// scope. The gateway is asked about the item's attempt first, as Resolve
// asks it: the decision that the attempt did not charge is refused when
// the gateway reports a charge (*ReviewChargeFoundError) or cannot say
// (*GatewayUnsureError); the decision that it did charge forgets nothing
// and stands whatever the gateway says. note is required and checked like
// every free text. The same decision again returns the item as resolved;
// another is a *ReviewResolvedError.
func (s *Service) ResolveReviewItem(ctx context.Context, scope Scope, orderID, itemID string, d ReviewDecision, note string,
	actor Actor) (ReviewItem, error) {
	if err := CheckID("order_id", orderID); err != nil {
		return ReviewItem{}, err
	}
	if err := CheckID("review_item_id", itemID); err != nil {
		return ReviewItem{}, err
	}
	if d != ReviewCharged && d != ReviewNotCharged {
		return ReviewItem{}, &ValidationError{Field: "decision", Reason: "must be REVIEW_DECISION_CHARGED or REVIEW_DECISION_NOT_CHARGED"}
	}
	if err := CheckReason("note", note, true); err != nil {
		return ReviewItem{}, err
	}
	if actor == "" {
		return ReviewItem{}, errors.New("resolve review item: no operator identity")
	}
	if s.reviews == nil {
		return ReviewItem{}, ErrReviewItemNotFound
	}
	o, err := s.store.Order(ctx, scope, orderID)
	if err != nil {
		return ReviewItem{}, err
	}
	item, err := s.reviews.ReviewItem(ctx, o.MerchantID, itemID)
	switch {
	case errors.Is(err, ErrReviewItemNotFound) || (err == nil && item.OrderID != o.ID):
		return ReviewItem{}, ErrReviewItemNotFound
	case err != nil:
		return ReviewItem{}, err
	}
	if item.Kind == ReviewAuditFinding {
		return ReviewItem{}, &ValidationError{Field: "decision", Reason: "an audit finding is resolved with a note and no decision"}
	}
	if !item.ResolvedAt.IsZero() {
		return settledReview(item, d)
	}
	a, err := s.store.Attempt(ctx, o.MerchantID, item.AttemptID)
	if err != nil {
		return ReviewItem{}, err
	}
	res, err := s.lookupForOperator(ctx, o, a)
	var gatewayOutcome Outcome
	switch {
	case err != nil && d == ReviewNotCharged:
		return ReviewItem{}, &GatewayUnsureError{AttemptID: item.AttemptID, Err: err}
	case err == nil:
		gatewayOutcome = res.Outcome
	}
	if d == ReviewNotCharged && res.Outcome == OutcomeSucceeded {
		return ReviewItem{}, &ReviewChargeFoundError{AttemptID: item.AttemptID, ChargeID: res.ChargeID}
	}
	if d == ReviewNotCharged && res.Outcome != OutcomeDeclined && res.Outcome != OutcomeNotFound && res.Outcome != OutcomeNotSent {
		// Only a proof of no charge lets a person say there was none.
		return ReviewItem{}, &GatewayUnsureError{AttemptID: item.AttemptID, Err: fmt.Errorf("lookup answered %s", res.Outcome)}
	}
	ok, err := s.reviews.ResolveReviewItem(ctx, ReviewResolution{Kind: item.Kind, MerchantID: o.MerchantID, ID: item.ID, Decision: d, Actor: actor,
		Note: note, GatewayOutcome: gatewayOutcome})
	if err != nil {
		return ReviewItem{}, err
	}
	resolved, err := s.reviews.ReviewItem(ctx, o.MerchantID, item.ID)
	if err != nil {
		return ReviewItem{}, err
	}
	if !ok {
		// Another operator decided first.
		return settledReview(resolved, d)
	}
	// The note stays in the database: an operator's text is never logged.
	s.log.LogAttrs(ctx, slog.LevelInfo, "review item resolved", slog.String("order_id", o.ID),
		slog.String("review_item_id", item.ID), slog.String("kind", string(item.Kind)), slog.String("attempt_id", item.AttemptID),
		slog.String("decision", string(d)), slog.String("gateway_outcome", string(gatewayOutcome)), slog.String("actor", string(actor)))
	return resolved, nil
}

// settledReview answers a decision about an item resolved already: the
// item when the decision is the same, a *ReviewResolvedError otherwise.
func settledReview(item ReviewItem, d ReviewDecision) (ReviewItem, error) {
	if item.Decision != d {
		return ReviewItem{}, &ReviewResolvedError{Decision: item.Decision}
	}
	return item, nil
}

// ResolveAuditFinding records that an operator dealt with a finding of the
// gateway audit, with a note (required, checked like every free text) and
// the operator as actor. Settle changes nothing else: a finding is never
// fixed automatically, and what was done (a refund at the gateway, an
// order resolved) was done by its own call. The finding is named by its
// id and merchant: merchantID, which a merchant's own scope may leave
// empty, or the order orderID's when given. Resolving a resolved finding
// again returns it as it was resolved.
func (s *Service) ResolveAuditFinding(ctx context.Context, scope Scope, merchantID, orderID, findingID, note string,
	actor Actor) (ReviewItem, error) {
	if err := CheckID("review_item_id", findingID); err != nil {
		return ReviewItem{}, err
	}
	if err := CheckReason("note", note, true); err != nil {
		return ReviewItem{}, err
	}
	if actor == "" {
		return ReviewItem{}, errors.New("resolve audit finding: no operator identity")
	}
	if s.reviews == nil {
		return ReviewItem{}, ErrReviewItemNotFound
	}
	switch {
	case orderID != "":
		if err := CheckID("order_id", orderID); err != nil {
			return ReviewItem{}, err
		}
		o, err := s.store.Order(ctx, scope, orderID)
		if err != nil {
			return ReviewItem{}, err
		}
		merchantID = o.MerchantID
	case !scope.IsAnyMerchant() && (merchantID == "" || merchantID == scope.MerchantID()):
		merchantID = scope.MerchantID()
	case !scope.IsAnyMerchant():
		return ReviewItem{}, ErrReviewItemNotFound
	}
	if err := CheckMerchantID("merchant_id", merchantID); err != nil {
		return ReviewItem{}, err
	}
	item, err := s.reviews.ReviewItem(ctx, merchantID, findingID)
	switch {
	case errors.Is(err, ErrReviewItemNotFound) || (err == nil && orderID != "" && item.OrderID != orderID):
		return ReviewItem{}, ErrReviewItemNotFound
	case err != nil:
		return ReviewItem{}, err
	case item.Kind != ReviewAuditFinding:
		// Another kind of review item takes a decision.
		return ReviewItem{}, &ValidationError{Field: "decision", Reason: "must be REVIEW_DECISION_CHARGED or REVIEW_DECISION_NOT_CHARGED"}
	}
	if !item.ResolvedAt.IsZero() {
		return item, nil
	}
	if _, err := s.reviews.ResolveReviewItem(ctx, ReviewResolution{Kind: ReviewAuditFinding, MerchantID: merchantID,
		ID: item.ID, Actor: actor, Note: note}); err != nil {
		return ReviewItem{}, err
	}
	resolved, err := s.reviews.ReviewItem(ctx, merchantID, item.ID)
	if err != nil {
		return ReviewItem{}, err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "audit finding resolved", slog.String("merchant_id", merchantID),
		slog.String("review_item_id", item.ID), slog.String("class", item.AuditClass), slog.String("actor", string(actor)))
	return resolved, nil
}
