package postgres

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// reviewRow is an item of the review queue as list_review_items.sql and
// review_item.sql select it.
type reviewRow struct {
	Kind           string     `db:"kind"`
	MerchantID     string     `db:"merchant_id"`
	ID             string     `db:"id"`
	OrderID        string     `db:"order_id"`
	AttemptID      string     `db:"attempt_id"`
	OperationID    string     `db:"operation_id"`
	Gateway        string     `db:"gateway"`
	RaisedAt       time.Time  `db:"raised_at"`
	ReconcileCount int        `db:"reconcile_count"`
	LastError      string     `db:"last_error"`
	Outcome        string     `db:"outcome"`
	DeclineCode    string     `db:"decline_code"`
	EventID        string     `db:"event_id"`
	EventType      string     `db:"event_type"`
	Decision       string     `db:"decision"`
	Actor          string     `db:"actor"`
	Note           string     `db:"note"`
	GatewayOutcome string     `db:"gateway_outcome"`
	ResolvedAt     *time.Time `db:"resolved_at"`
	DueBy          *time.Time `db:"due_by"`
	// An audit finding's (migration 00027).
	AuditClass      string `db:"audit_class"`
	GatewayRecordID string `db:"gateway_record_id"`
	SettleSide      string `db:"settle_side"`
	GatewaySide     string `db:"gateway_side"`
}

func (r reviewRow) item() order.ReviewItem {
	it := order.ReviewItem{
		Kind: order.ReviewKind(r.Kind), ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, AttemptID: r.AttemptID,
		OperationID: r.OperationID, Gateway: r.Gateway, RaisedAt: r.RaisedAt, ReconcileCount: r.ReconcileCount,
		LastError: r.LastError, Outcome: order.Outcome(r.Outcome), DeclineCode: r.DeclineCode, EventID: r.EventID,
		EventType: r.EventType, Decision: order.ReviewDecision(r.Decision), Actor: order.Actor(r.Actor), Note: r.Note,
		GatewayOutcome: order.Outcome(r.GatewayOutcome), AuditClass: r.AuditClass, GatewayRecordID: r.GatewayRecordID,
		SettleSide: r.SettleSide, GatewaySide: r.GatewaySide,
	}
	if r.ResolvedAt != nil {
		it.ResolvedAt = *r.ResolvedAt
	}
	if r.DueBy != nil {
		it.DueBy = *r.DueBy
	}
	return it
}

//go:embed sql/list_review_items.sql
var listReviewItemsSQL string

// ReviewItems implements order.ReviewStore.
func (s *Store) ReviewItems(ctx context.Context, f order.ReviewFilter) ([]order.ReviewItem, error) {
	args := scopeArgs(f.Scope)
	args["kind"], args["limit"], args["due_within"] = string(f.Kind), f.Limit, order.DisputeDueWithin
	args["after_at"], args["after_kind"], args["after_id"] = f.After.RaisedAt, string(f.After.Kind), f.After.ID
	var out []order.ReviewItem
	err := retry(ctx, func() error {
		rows, err := queryAll[reviewRow](ctx, s.pool, listReviewItemsSQL, args)
		out = make([]order.ReviewItem, len(rows))
		for i, r := range rows {
			out[i] = r.item()
		}
		return err
	})
	return out, err
}

//go:embed sql/review_item.sql
var reviewItemSQL string

// ReviewItem implements order.ReviewStore.
func (s *Store) ReviewItem(ctx context.Context, merchantID, id string) (order.ReviewItem, error) {
	var r reviewRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[reviewRow](ctx, s.pool, reviewItemSQL, pgx.StrictNamedArgs{"merchant_id": merchantID, "id": id})
		return err
	})
	if errors.Is(err, order.ErrNotFound) {
		return order.ReviewItem{}, order.ErrReviewItemNotFound
	}
	return r.item(), err
}

//go:embed sql/resolve_review_item.sql
var resolveReviewItemSQL string

//go:embed sql/resolve_audit_finding.sql
var resolveAuditFindingSQL string

// ResolveReviewItem implements order.ReviewStore.
func (s *Store) ResolveReviewItem(ctx context.Context, r order.ReviewResolution) (bool, error) {
	sql, args := resolveReviewItemSQL, pgx.StrictNamedArgs{
		"merchant_id": r.MerchantID, "id": r.ID, "decision": string(r.Decision), "actor": string(r.Actor),
		"note": r.Note, "gateway_outcome": string(r.GatewayOutcome),
	}
	if r.Kind == order.ReviewAuditFinding {
		sql, args = resolveAuditFindingSQL, pgx.StrictNamedArgs{"merchant_id": r.MerchantID, "id": r.ID,
			"actor": string(r.Actor), "note": r.Note}
	}
	err := retry(ctx, func() error {
		_, err := queryOne[struct {
			ID string `db:"id"`
		}](ctx, s.pool, sql, args)
		return err
	})
	if errors.Is(err, order.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
