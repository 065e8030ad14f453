package grpcapi

import (
	"context"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

var disputeStatusToProto = map[order.DisputeStatus]settlev1.DisputeStatus{
	order.DisputeNeedsResponse: settlev1.DisputeStatus_DISPUTE_STATUS_NEEDS_RESPONSE,
	order.DisputeUnderReview:   settlev1.DisputeStatus_DISPUTE_STATUS_UNDER_REVIEW,
	order.DisputeWon:           settlev1.DisputeStatus_DISPUTE_STATUS_WON,
	order.DisputeLost:          settlev1.DisputeStatus_DISPUTE_STATUS_LOST,
	order.DisputeWarningClosed: settlev1.DisputeStatus_DISPUTE_STATUS_WARNING_CLOSED,
}

var protoToDisputeStatus = func() map[settlev1.DisputeStatus]order.DisputeStatus {
	m := map[settlev1.DisputeStatus]order.DisputeStatus{}
	for s, p := range disputeStatusToProto {
		m[p] = s
	}
	return m
}()

var disputeStageToProto = map[order.DisputeStage]settlev1.DisputeStage{
	order.DisputeInquiry:          settlev1.DisputeStage_DISPUTE_STAGE_INQUIRY,
	order.DisputeChargeback:       settlev1.DisputeStage_DISPUTE_STAGE_CHARGEBACK,
	order.DisputePreArbitration:   settlev1.DisputeStage_DISPUTE_STAGE_PRE_ARBITRATION,
	order.DisputeSecondChargeback: settlev1.DisputeStage_DISPUTE_STAGE_SECOND_CHARGEBACK,
}

// moneyOf is amount in currency, or nil when it is zero.
func moneyOf(currency string, amount int64) *settlev1.Money {
	if amount == 0 {
		return nil
	}
	return &settlev1.Money{Currency: currency, AmountMinor: amount}
}

func disputeToProto(d order.Dispute) *settlev1.Dispute {
	cur := d.Amount.Currency
	return &settlev1.Dispute{
		Id: d.ID, MerchantId: d.MerchantID, OrderId: d.OrderID, AttemptId: d.AttemptID, Gateway: d.Gateway,
		GatewayDisputeId: d.GatewayDisputeID, Amount: &settlev1.Money{Currency: cur, AmountMinor: d.Amount.AmountMinor},
		Reason: d.Reason, NetworkReasonCode: d.NetworkReasonCode, Status: disputeStatusToProto[d.Status],
		Stage: disputeStageToProto[d.Stage], DueTime: timestamp(d.DueBy), Withdrawn: moneyOf(cur, d.Withdrawn),
		Reinstated: moneyOf(cur, d.Reinstated), Fee: moneyOf(cur, d.Fee), CreateTime: timestamp(d.CreatedAt),
		UpdateTime: timestamp(d.UpdatedAt),
	}
}

// ListDisputes lists disputes within the key's merchant scope, narrowed to
// merchant_id as ListReviewItems narrows it.
func (s *opsServer) ListDisputes(ctx context.Context, req *settlev1.ListDisputesRequest) (*settlev1.ListDisputesResponse, error) {
	f := order.DisputeFilter{Limit: int(req.GetPageSize())}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > 500:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must be between 0 and 500"})
	}
	if st := req.GetStatus(); st != settlev1.DisputeStatus_DISPUTE_STATUS_UNSPECIFIED {
		status, ok := protoToDisputeStatus[st]
		if !ok {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "status", Reason: "is not a known dispute status"})
		}
		f.Status = status
	}
	if req.GetDueBefore() != nil {
		if err := req.GetDueBefore().CheckValid(); err != nil {
			return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "due_before", Reason: "is not a valid time"})
		}
		f.DueBefore = req.GetDueBefore().AsTime()
	}
	scope := opsScope(ctx)
	if m := req.GetMerchantId(); m != "" {
		if err := order.CheckMerchantID("merchant_id", m); err != nil {
			return nil, toStatus(ctx, s.log, err)
		}
		switch {
		case scope.IsAnyMerchant():
			scope = order.ForMerchant(m)
		case scope.MerchantID() != m:
			// The zero scope reaches nothing.
			scope = order.Scope{}
		}
	}
	f.AfterID = canonicalID(req.GetPageToken())
	ds, err := s.svc.Disputes(ctx, scope, f)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListDisputesResponse{}
	for _, d := range ds {
		resp.Disputes = append(resp.Disputes, disputeToProto(d))
	}
	if len(ds) == f.Limit {
		resp.NextPageToken = ds[len(ds)-1].ID
	}
	return resp, nil
}

// GetDispute returns a dispute within the key's merchant scope and its
// history.
func (s *opsServer) GetDispute(ctx context.Context, req *settlev1.GetDisputeRequest) (*settlev1.GetDisputeResponse, error) {
	d, evs, err := s.svc.Dispute(ctx, opsScope(ctx), canonicalID(req.GetDisputeId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.GetDisputeResponse{Dispute: disputeToProto(d)}
	cur := d.Amount.Currency
	for _, e := range evs {
		resp.Events = append(resp.Events, &settlev1.DisputeEvent{
			FromStatus: disputeStatusToProto[e.From], ToStatus: disputeStatusToProto[e.To],
			FromStage: disputeStageToProto[e.FromStage], ToStage: disputeStageToProto[e.ToStage], Event: e.Name,
			Actor: string(e.Actor), GatewayEventId: e.GatewayEventID, Withdrawn: moneyOf(cur, e.Withdrawn),
			Reinstated: moneyOf(cur, e.Reinstated), CreateTime: timestamp(e.CreatedAt),
		})
	}
	return resp, nil
}

// AcceptDispute concedes a dispute at its gateway, recording the key's
// name in the dispute's history.
func (s *opsServer) AcceptDispute(ctx context.Context, req *settlev1.AcceptDisputeRequest) (*settlev1.AcceptDisputeResponse, error) {
	d, err := s.svc.AcceptDispute(ctx, opsScope(ctx), operator(ctx), canonicalID(req.GetDisputeId()))
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.AcceptDisputeResponse{Dispute: disputeToProto(d)}, nil
}
