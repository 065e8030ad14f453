package grpcapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// TestListEventsThroughTheAPI: a charged order's order.paid and a declined
// one's order.payment_failed come back from ListEvents in order, with the
// payload a webhook would carry; the cursor continues after them; a bad
// cursor is INVALID_ARGUMENT.
func TestListEventsThroughTheAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	paid := s.create(t, "ref-paid", "tok_ok")
	s.charge(t, paid.GetId(), "req-paid-1")
	declined := s.create(t, "ref-declined", "tok_decline")
	s.charge(t, declined.GetId(), "req-declined-1")

	var evs []*settlev1.Event
	var cursor string
	for deadline := time.Now().Add(30 * time.Second); len(evs) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := s.orders.ListEvents(ctx, &settlev1.ListEventsRequest{AfterCursor: cursor, PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, resp.GetEvents()...)
		cursor = resp.GetNextCursor()
	}
	if len(evs) != 2 || evs[0].GetType() != "order.paid" || evs[0].GetOrderId() != paid.GetId() ||
		evs[1].GetType() != "order.payment_failed" || evs[1].GetOrderId() != declined.GetId() {
		t.Fatalf("events %v", evs)
	}
	var body struct {
		ID    string `json:"id"`
		Actor string `json:"actor"`
		Order struct {
			State string `json:"state"`
		} `json:"order"`
	}
	if err := json.Unmarshal([]byte(evs[0].GetPayloadJson()), &body); err != nil || body.ID != evs[0].GetId() || body.Order.State != "PAID" ||
		body.Actor != "merchant" {
		t.Fatalf("payload %s: %v", evs[0].GetPayloadJson(), err)
	}
	resp, err := s.orders.ListEvents(ctx, &settlev1.ListEventsRequest{AfterCursor: cursor})
	if err != nil || len(resp.GetEvents()) != 0 || resp.GetNextCursor() != cursor {
		t.Fatalf("after the last event: %v %v", resp, err)
	}
	if _, err := s.orders.ListEvents(ctx, &settlev1.ListEventsRequest{AfterCursor: "not-a-cursor"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad cursor: %v", err)
	}

	// ResendEvent: found for its merchant, not for another.
	if _, err := s.ops.ResendEvent(ctx, &settlev1.ResendEventRequest{MerchantId: "default", EventId: evs[0].GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ops.ResendEvent(ctx, &settlev1.ResendEventRequest{MerchantId: "other", EventId: evs[0].GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("another merchant's event: %v", err)
	}
	if _, err := s.ops.ResendEvent(ctx, &settlev1.ResendEventRequest{MerchantId: "default", EventId: "42"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed id: %v", err)
	}

	// An operator's refund is announced as one: the refund's reason and
	// request id are the operator's, and the events say so.
	if _, err := s.ops.RefundOrder(ctx, &settlev1.OpsServiceRefundOrderRequest{OrderId: paid.GetId(), RequestId: "ops-refund-1",
		AmountMinor: 100, Reason: "goodwill"}); err != nil {
		t.Fatal(err)
	}
	var refundEv *settlev1.Event
	for deadline := time.Now().Add(30 * time.Second); refundEv == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := s.orders.ListEvents(ctx, &settlev1.ListEventsRequest{AfterCursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetEvents() {
			if e.GetType() == "refund.succeeded" {
				refundEv = e
			}
		}
	}
	var rbody struct {
		Actor  string `json:"actor"`
		Refund struct {
			Reason      string `json:"reason"`
			RequestID   string `json:"request_id"`
			RequestedBy string `json:"requested_by"`
		} `json:"refund"`
	}
	if err := json.Unmarshal([]byte(refundEv.GetPayloadJson()), &rbody); err != nil || rbody.Actor != "operator" ||
		rbody.Refund.RequestedBy != "operator" || rbody.Refund.Reason != "goodwill" || rbody.Refund.RequestID != "ops-refund-1" {
		t.Fatalf("operator's refund.succeeded payload %s: %v", refundEv.GetPayloadJson(), err)
	}
}

// TestAuditFindingEventThroughTheAPI: a finding of the gateway audit with
// no order (a foreign charge) is listed as an audit.finding event naming
// the finding and no order, its payload the finding's.
func TestAuditFindingEventThroughTheAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	var findingID string
	if err := s.pool.QueryRow(ctx, `
		INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class, gateway_record_id, record_key, gateway_record)
		VALUES ('default', gen_random_uuid(), gen_random_uuid(), 'sim', 'FOREIGN', 'ch_foreign', 'ch_foreign', '{"id": "ch_foreign"}')
		RETURNING id::text`).Scan(&findingID); err != nil {
		t.Fatal(err)
	}
	var evs []*settlev1.Event
	for deadline := time.Now().Add(30 * time.Second); len(evs) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := s.orders.ListEvents(ctx, &settlev1.ListEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		evs = resp.GetEvents()
	}
	if len(evs) != 1 || evs[0].GetType() != "audit.finding" || evs[0].GetAuditFindingId() != findingID || evs[0].GetOrderId() != "" {
		t.Fatalf("events %v, want finding %s's", evs, findingID)
	}
	var body struct {
		ID      string `json:"id"`
		Finding struct {
			ID              string `json:"id"`
			Class           string `json:"class"`
			GatewayRecordID string `json:"gateway_record_id"`
		} `json:"finding"`
	}
	if err := json.Unmarshal([]byte(evs[0].GetPayloadJson()), &body); err != nil || body.ID != evs[0].GetId() ||
		body.Finding.ID != findingID || body.Finding.Class != "FOREIGN" || body.Finding.GatewayRecordID != "ch_foreign" {
		t.Fatalf("payload %s: %v", evs[0].GetPayloadJson(), err)
	}
}
