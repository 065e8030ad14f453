package grpcapi_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// TestRunAudit: an operator audits its merchant's gateway account over a
// closed window and lists the run; its findings are in the review queue.
// A key of every merchant names the merchant; another merchant's runs
// are none; an open window and an unknown account are refused.
func TestRunAudit(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	start := time.Now().Add(-time.Minute)
	s.chargeWith(t, keyA, "audit-1", "tok_ok")
	s.sim.Foreign(990, "GBP")
	end := time.Now()
	time.Sleep(2 * auditMargin)
	aop, platform := with(keyAop), with(keyPlatform)
	req := &settlev1.RunAuditRequest{Gateway: "sim", StartTime: timestamppb.New(start), EndTime: timestamppb.New(end)}
	resp, err := s.ops.RunAudit(aop, req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetRun()
	if r.GetMerchantId() != "merchant-a" || r.GetPhase() != "done" || !r.GetCovered() || r.GetClean() ||
		r.GetRecordsSeen() != 2 || r.GetCounts()["FOREIGN"] != 1 || r.GetActor() != "ops:a-ops" {
		t.Fatalf("run %v", r)
	}
	items := s.queue(t, aop, &settlev1.ListReviewItemsRequest{Kind: settlev1.ReviewItemKind_REVIEW_ITEM_KIND_AUDIT_FINDING})
	if len(items) != 1 || items[0].GetAuditClass() != "FOREIGN" || items[0].GetGatewaySide() == "" {
		t.Fatalf("queue %v, want the foreign charge", items)
	}
	if _, err := s.ops.ResolveReviewItem(aop, &settlev1.ResolveReviewItemRequest{ReviewItemId: items[0].GetId(),
		Note: "a dashboard charge"}); err != nil {
		t.Fatalf("resolve the finding: %v", err)
	}

	runs, err := s.ops.ListAuditRuns(aop, &settlev1.ListAuditRunsRequest{})
	if err != nil || len(runs.GetRuns()) != 1 || runs.GetRuns()[0].GetId() != r.GetId() {
		t.Fatalf("list: %v, %v", runs, err)
	}
	if runs, err := s.ops.ListAuditRuns(aop, &settlev1.ListAuditRunsRequest{MerchantId: "merchant-b"}); err != nil || len(runs.GetRuns()) != 0 {
		t.Fatalf("merchant-b's runs as merchant-a: %v, %v", runs, err)
	}
	_, err = s.ops.RunAudit(platform, req)
	wantCode(t, err, codes.InvalidArgument)
	open := &settlev1.RunAuditRequest{MerchantId: "merchant-a", Gateway: "sim", StartTime: timestamppb.New(start),
		EndTime: timestamppb.New(time.Now().Add(time.Hour))}
	_, err = s.ops.RunAudit(platform, open)
	wantCode(t, err, codes.InvalidArgument)
	_, err = s.ops.RunAudit(aop, &settlev1.RunAuditRequest{Gateway: "nowhere", StartTime: req.GetStartTime(), EndTime: req.GetEndTime()})
	wantCode(t, err, codes.InvalidArgument)
}
