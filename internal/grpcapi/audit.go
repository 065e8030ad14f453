package grpcapi

import (
	"context"
	"errors"
	"fmt"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/order"
)

// errNoAuditor answers the audit's calls on a server built without one.
var errNoAuditor = fmt.Errorf("%w: the gateway audit is not configured on this server", order.ErrUnavailable)

// auditMerchant is the merchant an audit call is about: the one named,
// within the operator's scope (another merchant's is none at all), or the
// scope's own.
func auditMerchant(ctx context.Context, m string) (string, error) {
	scope := opsScope(ctx)
	switch {
	case m != "":
		if err := order.CheckMerchantID("merchant_id", m); err != nil {
			return "", err
		}
		if !scope.IsAnyMerchant() && scope.MerchantID() != m {
			return "", order.ErrNotFound
		}
		return m, nil
	case scope.IsAnyMerchant():
		return "", &order.ValidationError{Field: "merchant_id", Reason: "is required with an ops key of every merchant"}
	}
	return scope.MerchantID(), nil
}

// RunAudit audits a merchant's gateway account over a closed window, with
// the operator as the run's actor.
func (s *opsServer) RunAudit(ctx context.Context, req *settlev1.RunAuditRequest) (*settlev1.RunAuditResponse, error) {
	if s.auditor == nil {
		return nil, toStatus(ctx, s.log, errNoAuditor)
	}
	m, err := auditMerchant(ctx, req.GetMerchantId())
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	// An account's name is checked as every client's text is, so that a
	// card number pasted there is refused as such.
	if err := order.CheckReference("gateway", req.GetGateway()); err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	if req.GetStartTime() == nil || req.GetEndTime() == nil {
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "start_time", Reason: "start_time and end_time are required"})
	}
	w := audit.Window{From: req.GetStartTime().AsTime(), To: req.GetEndTime().AsTime()}
	r, err := s.auditor.Audit(ctx, m, req.GetGateway(), w, string(operator(ctx)))
	switch {
	case errors.Is(err, audit.ErrUnknownGateway):
		err = &order.ValidationError{Field: "gateway", Reason: "is not a configured gateway account"}
	case errors.Is(err, audit.ErrWindowOpen):
		err = &order.ValidationError{Field: "end_time", Reason: "is not closed yet: a window is audited once it ended the no-show horizon plus the audit margin ago"}
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	return &settlev1.RunAuditResponse{Run: auditRunToProto(r)}, nil
}

// ListAuditRuns lists a merchant's audit runs, the latest first.
func (s *opsServer) ListAuditRuns(ctx context.Context, req *settlev1.ListAuditRunsRequest) (*settlev1.ListAuditRunsResponse, error) {
	if s.auditor == nil {
		return nil, toStatus(ctx, s.log, errNoAuditor)
	}
	m, err := auditMerchant(ctx, req.GetMerchantId())
	if errors.Is(err, order.ErrNotFound) {
		return &settlev1.ListAuditRunsResponse{}, nil
	}
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	limit := int(req.GetPageSize())
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 500:
		return nil, toStatus(ctx, s.log, &order.ValidationError{Field: "page_size", Reason: "must be between 0 and 500"})
	}
	runs, err := s.auditor.Runs(ctx, m, limit)
	if err != nil {
		return nil, toStatus(ctx, s.log, err)
	}
	resp := &settlev1.ListAuditRunsResponse{}
	for _, r := range runs {
		resp.Runs = append(resp.Runs, auditRunToProto(r))
	}
	return resp, nil
}

func auditRunToProto(r audit.Run) *settlev1.AuditRun {
	p := &settlev1.AuditRun{
		Id: r.ID, MerchantId: r.MerchantID, Gateway: r.Gateway, StartTime: timestamp(r.Window.From),
		EndTime: timestamp(r.Window.To), Phase: string(r.Phase), RecordsSeen: r.Seen, Counts: map[string]int64{},
		Covered: r.Covered, NotCoveredReason: r.NotCovered, Clean: r.Clean(), Actor: r.Actor,
		CreateTime: timestamp(r.StartedAt), FinishTime: timestamp(r.FinishedAt),
	}
	for c, n := range r.Counts {
		p.Counts[string(c)] = n
	}
	return p
}
