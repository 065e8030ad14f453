package grpcapi

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

var reviewKindToProto = map[order.ReviewKind]settlev1.ReviewItemKind{
	order.ReviewOrder:                settlev1.ReviewItemKind_REVIEW_ITEM_KIND_ORDER,
	order.ReviewRefund:               settlev1.ReviewItemKind_REVIEW_ITEM_KIND_REFUND,
	order.ReviewCapture:              settlev1.ReviewItemKind_REVIEW_ITEM_KIND_CAPTURE,
	order.ReviewVoid:                 settlev1.ReviewItemKind_REVIEW_ITEM_KIND_VOID,
	order.ReviewPossibleDoubleCharge: settlev1.ReviewItemKind_REVIEW_ITEM_KIND_POSSIBLE_DOUBLE_CHARGE,
	order.ReviewCaptureFailed:        settlev1.ReviewItemKind_REVIEW_ITEM_KIND_CAPTURE_FAILED,
	order.ReviewRefundFailed:         settlev1.ReviewItemKind_REVIEW_ITEM_KIND_REFUND_FAILED,
	order.ReviewDispute:              settlev1.ReviewItemKind_REVIEW_ITEM_KIND_DISPUTE,
	order.ReviewAuditFinding:         settlev1.ReviewItemKind_REVIEW_ITEM_KIND_AUDIT_FINDING,
}

var protoToReviewKind = func() map[settlev1.ReviewItemKind]order.ReviewKind {
	m := map[settlev1.ReviewItemKind]order.ReviewKind{}
	for k, p := range reviewKindToProto {
		m[p] = k
	}
	return m
}()

var reviewDecisions = map[settlev1.ReviewDecision]order.ReviewDecision{
	settlev1.ReviewDecision_REVIEW_DECISION_CHARGED:     order.ReviewCharged,
	settlev1.ReviewDecision_REVIEW_DECISION_NOT_CHARGED: order.ReviewNotCharged,
}

var reviewDecisionToProto = func() map[order.ReviewDecision]settlev1.ReviewDecision {
	m := map[order.ReviewDecision]settlev1.ReviewDecision{}
	for p, d := range reviewDecisions {
		m[d] = p
	}
	return m
}()

// ListReviewItems lists the review queue within the operator's scope: a
// merchant's ops key sees its own items alone, and another merchant's
// named in the request as none at all, as if there were none.
func (s *opsServer) ListReviewItems(ctx context.Context, req *settlev1.ListReviewItemsRequest) (*settlev1.ListReviewItemsResponse, error) {
	f := order.ReviewFilter{Scope: opsScope(ctx), Limit: int(req.GetPageSize())}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > 500:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must be between 0 and 500"})
	}
	if k := req.GetKind(); k != settlev1.ReviewItemKind_REVIEW_ITEM_KIND_UNSPECIFIED {
		kind, ok := protoToReviewKind[k]
		if !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "kind", Reason: "is not a known review item kind"})
		}
		f.Kind = kind
	}
	if m := req.GetMerchantId(); m != "" {
		if err := order.CheckMerchantID("merchant_id", m); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		switch {
		case f.Scope.IsAnyMerchant():
			f.Scope = order.ForMerchant(m)
		case f.Scope.MerchantID() != m:
			// The zero scope reaches nothing: the key learns nothing of
			// another merchant's queue.
			f.Scope = order.Scope{}
		}
	}
	if tok := req.GetPageToken(); tok != "" {
		var ok bool
		if f.After, ok = decodeReviewToken(tok, f.Kind, req.GetMerchantId()); !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_token",
				Reason: "is not a token from a previous page with the same kind and merchant_id"})
		}
	}
	items, err := s.store.ReviewItems(ctx, f)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListReviewItemsResponse{}
	for _, it := range items {
		resp.Items = append(resp.Items, reviewItemToProto(it))
	}
	if len(items) == f.Limit {
		last := items[len(items)-1]
		resp.NextPageToken = encodeReviewToken(order.ReviewCursor{RaisedAt: last.RaisedAt, Kind: last.Kind, ID: last.ID},
			f.Kind, req.GetMerchantId())
	}
	return resp, nil
}

// ResolveReviewItem records an operator's decision about a review item,
// with the operator as its actor; with no decision, that the operator
// dealt with an audit finding.
func (s *opsServer) ResolveReviewItem(ctx context.Context, req *settlev1.ResolveReviewItemRequest) (*settlev1.ResolveReviewItemResponse, error) {
	var (
		it  order.ReviewItem
		err error
	)
	if m := req.GetMerchantId(); m != "" {
		if err := order.CheckMerchantID("merchant_id", m); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
	}
	if req.GetDecision() == settlev1.ReviewDecision_REVIEW_DECISION_UNSPECIFIED {
		it, err = s.svc.ResolveAuditFinding(ctx, opsScope(ctx), req.GetMerchantId(), canonicalID(req.GetOrderId()),
			canonicalID(req.GetReviewItemId()), req.GetNote(), operator(ctx))
	} else {
		it, err = s.svc.ResolveReviewItem(ctx, opsScope(ctx), canonicalID(req.GetOrderId()), canonicalID(req.GetReviewItemId()),
			reviewDecisions[req.GetDecision()], req.GetNote(), operator(ctx))
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.ResolveReviewItemResponse{Item: reviewItemToProto(it)}, nil
}

func reviewItemToProto(it order.ReviewItem) *settlev1.ReviewItem {
	p := &settlev1.ReviewItem{
		Kind: reviewKindToProto[it.Kind], Id: it.ID, MerchantId: it.MerchantID, OrderId: it.OrderID, AttemptId: it.AttemptID,
		Gateway: it.Gateway, RaiseTime: timestamp(it.RaisedAt), Reason: it.Reason(), GatewayOutcome: string(it.Outcome),
		DeclineCode: it.DeclineCode, ReconcileCount: int32(it.ReconcileCount), LastError: it.LastError, EventId: it.EventID,
		EventType: it.EventType, Decision: reviewDecisionToProto[it.Decision], Actor: string(it.Actor), Note: it.Note,
		ResolveTime: timestamp(it.ResolvedAt), ResolvedGatewayOutcome: string(it.GatewayOutcome),
		AuditClass: it.AuditClass, GatewayRecordId: it.GatewayRecordID, SettleSide: it.SettleSide, GatewaySide: it.GatewaySide,
	}
	switch it.Kind {
	case order.ReviewRefund:
		p.RefundId = it.OperationID
	case order.ReviewCapture:
		p.CaptureId = it.OperationID
	case order.ReviewVoid:
		p.VoidId = it.OperationID
	case order.ReviewDispute:
		p.DisputeId, p.DueTime = it.OperationID, timestamp(it.DueBy)
	case order.ReviewOrder, order.ReviewPossibleDoubleCharge, order.ReviewCaptureFailed, order.ReviewRefundFailed,
		order.ReviewAuditFinding:
	}
	return p
}

// encodeReviewToken writes where the next page of the review queue begins,
// with the filters of the page (kind and merchant), so that it is refused
// with others. The merchant comes last: it may hold any character.
func encodeReviewToken(c order.ReviewCursor, kind order.ReviewKind, merchant string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join([]string{"r1", string(kind),
		c.RaisedAt.UTC().Format(time.RFC3339Nano), string(c.Kind), c.ID, merchant}, "|")))
}

// decodeReviewToken reads a token of encodeReviewToken for the filters
// kind and merchant.
func decodeReviewToken(tok string, kind order.ReviewKind, merchant string) (order.ReviewCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return order.ReviewCursor{}, false
	}
	f := strings.SplitN(string(b), "|", 6)
	if len(f) != 6 || f[0] != "r1" || f[1] != string(kind) || f[5] != merchant {
		return order.ReviewCursor{}, false
	}
	c := order.ReviewCursor{Kind: order.ReviewKind(f[3]), ID: f[4]}
	if _, ok := reviewKindToProto[c.Kind]; !ok || order.CheckID("page_token", c.ID) != nil {
		return order.ReviewCursor{}, false
	}
	if c.RaisedAt, err = time.Parse(time.RFC3339Nano, f[2]); err != nil {
		return order.ReviewCursor{}, false
	}
	return c, true
}
