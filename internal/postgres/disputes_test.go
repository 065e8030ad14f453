package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// disputeEvent is a gateway's event about dispute dp of the charge
// chargeID, saying status at stage with withdrawn taken back.
func disputeEvent(id, chargeID, dp string, stage order.DisputeStage, status order.DisputeStatus, withdrawn, reinstated int64) order.GatewayEvent {
	return order.GatewayEvent{Gateway: "sim", ID: id, Type: "dispute", ObjectID: dp, ChargeID: chargeID,
		Dispute: &order.GatewayDispute{ID: dp, Status: status, Stage: stage,
			Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, Reason: "fraudulent", NetworkReasonCode: "10.4",
			DueBy: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC), Withdrawn: withdrawn, Reinstated: reinstated}}
}

func applyDispute(t *testing.T, s *postgres.Store, ev order.GatewayEvent) order.DisputeApplied {
	t.Helper()
	a, err := s.ApplyDispute(context.Background(), order.DisputeChange{Event: ev, Dispute: *ev.Dispute, Actor: order.ActorGateway})
	if err != nil {
		t.Fatalf("apply %s: %v", ev.ID, err)
	}
	return a
}

// testDisputeForwardOnly: a dispute is created from its first event and
// moves only forward; a repeated event is a duplicate, an older one
// (another id) changes nothing and says so; the order's totals follow,
// refunds are refused while the dispute is open and shrink by what was
// charged back once it is lost; each move is one event out, in the
// change's transaction.
func testDisputeForwardOnly(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	o, att := paidOrder(t, s, "dp")

	a := applyDispute(t, s, disputeEvent("evt_1", "psp_dp", "dp_1", order.DisputeChargeback, order.DisputeNeedsResponse, 1250, 0))
	if a.Result != order.EventDispute || a.Dispute == nil || a.Dispute.Status != order.DisputeNeedsResponse ||
		a.Dispute.OrderID != o.ID || a.Dispute.AttemptID != att || a.Dispute.Withdrawn != 1250 {
		t.Fatalf("first event: %+v %+v", a, a.Dispute)
	}
	id := a.Dispute.ID
	if a := applyDispute(t, s, disputeEvent("evt_1", "psp_dp", "dp_1", order.DisputeChargeback, order.DisputeNeedsResponse, 1250, 0)); a.Result != order.EventDuplicate {
		t.Fatalf("repeat: %+v", a)
	}
	got, err := s.Order(ctx, order.ForMerchant(order.DefaultMerchant), o.ID)
	if err != nil || got.State != order.StatePaid || got.OpenDisputes != 1 || got.Disputed != 1250 || got.ChargedBack != 1250 {
		t.Fatalf("order with an open dispute: %+v %v", got, err)
	}

	// A refund is refused under the order's lock while the dispute is open.
	c, err := s.ClaimRefund(ctx, refundClaimOf(o, "refund-open", 100))
	if err != nil || c.Claimed || c.Order.OpenDisputes != 1 {
		t.Fatalf("refund beside an open dispute: %+v %v", c, err)
	}

	if a := applyDispute(t, s, disputeEvent("evt_2", "psp_dp", "dp_1", order.DisputeChargeback, order.DisputeLost, 1250, 0)); a.Result != order.EventDispute || a.Dispute.Status != order.DisputeLost {
		t.Fatalf("lost: %+v", a)
	}
	// An older word, under another event id, arrives late.
	if a := applyDispute(t, s, disputeEvent("evt_0", "psp_dp", "dp_1", order.DisputeChargeback, order.DisputeUnderReview, 1250, 0)); a.Result != order.EventDisputeStale || a.Dispute.Status != order.DisputeLost {
		t.Fatalf("late event: %+v", a)
	}
	got, err = s.Order(ctx, order.ForMerchant(order.DefaultMerchant), o.ID)
	if err != nil || got.State != order.StatePaid || got.OpenDisputes != 0 || got.Disputed != 0 || got.ChargedBack != 1250 {
		t.Fatalf("order after a lost dispute: %+v %v", got, err)
	}
	if c, err := s.ClaimRefund(ctx, refundClaimOf(o, "refund-lost", 1)); err != nil || c.Claimed || c.Order.ChargedBack != 1250 {
		t.Fatalf("refund after the whole amount was charged back: %+v %v", c, err)
	}

	d, hist, err := s.Dispute(ctx, order.ForMerchant(order.DefaultMerchant), id)
	if err != nil || d.Status != order.DisputeLost || d.NetworkReasonCode != "10.4" || len(hist) != 2 ||
		hist[0].Name != order.DisputeOpened || hist[1].Name != order.DisputeClosed || hist[1].From != order.DisputeNeedsResponse {
		t.Fatalf("dispute %+v, history %+v, %v", d, hist, err)
	}
	if _, _, err := s.Dispute(ctx, order.ForMerchant("someone-else"), id); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another merchant's dispute: %v", err)
	}
	list, err := s.Disputes(ctx, order.AnyMerchant, order.DisputeFilter{Status: order.DisputeLost, Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("lost disputes: %+v %v", list, err)
	}
	list, err = s.Disputes(ctx, order.ForMerchant(order.DefaultMerchant), order.DisputeFilter{
		DueBefore: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("disputes due before 2029: %+v %v", list, err)
	}

	var types []string
	for _, e := range listEvents(t, s, order.EventCursor{}, 100, 3) {
		types = append(types, e.Type)
	}
	if len(types) != 3 || types[0] != "order.paid" || types[1] != "dispute.opened" || types[2] != "dispute.closed" {
		t.Fatalf("events out: %v", types)
	}

	// A dispute of a charge that is not ours is recorded once, as unknown.
	if a := applyDispute(t, s, disputeEvent("evt_x", "ch_foreign", "dp_x", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)); a.Result != order.EventUnknownObject {
		t.Fatalf("foreign dispute: %+v", a)
	}
	if a := applyDispute(t, s, disputeEvent("evt_x", "ch_foreign", "dp_x", order.DisputeChargeback, order.DisputeNeedsResponse, 0, 0)); a.Result != order.EventDuplicate {
		t.Fatalf("foreign dispute again: %+v", a)
	}
	counts, err := s.CountDisputes(ctx, 24*time.Hour)
	if err != nil || counts.ByStatus[order.DisputeLost] != 1 || counts.DueSoon != 0 {
		t.Fatalf("counts: %+v %v", counts, err)
	}
}
