package chaos

import (
	"testing"

	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/receiver"
)

// A small world: order o1 paid by attempt a1 (request r1) after a decline
// of attempt a0 (request r0); order o2 pending, never charged.
func cleanWorld() (snapshot, *history) {
	s := snapshot{
		orders: []dbOrder{
			{id: "o1", state: "PAID", currency: "GBP", current: "a1", amount: 500},
			{id: "o2", state: "PENDING", currency: "EUR", amount: 700},
		},
		attempts: []dbAttempt{
			{id: "a0", order: "o1", request: "r0", outcome: "declined", currency: "GBP", amount: 500},
			{id: "a1", order: "o1", request: "r1", outcome: "succeeded", chargeID: "ch_2", currency: "GBP", amount: 500},
		},
		events: []dbEvent{
			{id: 1, order: "o1", to: "PENDING", event: "create"},
			{id: 2, order: "o1", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a0"},
			{id: 3, order: "o1", from: "CHARGING", to: "PENDING", event: "fail", attempt: "a0", typ: "order.payment_failed", delivered: true},
			{id: 4, order: "o1", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a1"},
			{id: 5, order: "o1", from: "CHARGING", to: "PAID", event: "succeed", attempt: "a1", typ: "order.paid", delivered: true},
			{id: 6, order: "o2", to: "PENDING", event: "create"},
		},
		received: []receiver.Delivery{
			{EventID: "evt_3", Type: "order.payment_failed", OrderID: "o1", State: "PENDING", Verified: true},
			{EventID: "evt_5", Type: "order.paid", OrderID: "o1", State: "PAID", Verified: true},
			{EventID: "evt_5", Type: "order.paid", OrderID: "o1", State: "PAID", Verified: true}, // at least once
		},
		ledger: []sim.Charge{
			{ID: "ch_1", Reference: "a0", Amount: 500, Currency: "GBP", Status: "declined"},
			{ID: "ch_2", Reference: "a1", Amount: 500, Currency: "GBP", Status: "succeeded"},
		},
	}
	h := newHistory()
	h.orders["o1"], h.orders["o2"] = "ref-1", "ref-2"
	h.paid["o1"] = true
	h.requests["r1"] = &request{order: "o1", attempts: map[string]int{"a1": 2}, answers: 2}
	return s, h
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name    string
		breakIt func(*snapshot, *history)
		want    int // the invariant broken; 0: none
	}{
		{"clean", func(*snapshot, *history) {}, 0},
		{"double charge", func(s *snapshot, _ *history) {
			s.ledger = append(s.ledger, sim.Charge{ID: "ch_3", Reference: "a1", Amount: 500, Currency: "GBP", Status: "succeeded"})
		}, InvOneCharge},
		{"charge of no attempt", func(s *snapshot, _ *history) {
			s.ledger = append(s.ledger, sim.Charge{ID: "ch_3", Reference: "zz", Amount: 1, Currency: "GBP", Status: "succeeded"})
		}, InvOneCharge},
		{"charged but pending", func(s *snapshot, _ *history) {
			s.ledger[0].Status = "succeeded"
			s.ledger[1].Status = "declined"
		}, InvChargeSettled},
		{"paid without charge", func(s *snapshot, _ *history) { s.ledger = s.ledger[:1] }, InvChargeSettled},
		{"charged another amount", func(s *snapshot, _ *history) { s.ledger[1].Amount = 501 }, InvSums},
		{"charging left", func(s *snapshot, _ *history) { s.orders[1].state = "CHARGING" }, InvNoCharging},
		{"move the table refuses", func(s *snapshot, _ *history) {
			s.events = append(s.events[:5:5], dbEvent{order: "o1", from: "PAID", to: "CHARGING", event: "charge", attempt: "a2"}, s.events[5])
		}, InvHistory},
		{"two events for one transition", func(s *snapshot, _ *history) {
			s.events = append(s.events[:5:5], s.events[4], s.events[5])
		}, InvHistory},
		{"attempt without its claim", func(s *snapshot, _ *history) {
			s.attempts = append(s.attempts, dbAttempt{id: "a2", order: "o2", request: "r2", currency: "EUR", amount: 700})
		}, InvHistory},
		{"history ends elsewhere", func(s *snapshot, _ *history) { s.orders[1].state = "CANCELED" }, InvHistory},
		{"paid without its event", func(s *snapshot, _ *history) { s.events[4].typ = "" }, InvEvents},
		{"event never delivered", func(s *snapshot, _ *history) { s.events[2].delivered = false }, InvEvents},
		{"event never received", func(s *snapshot, _ *history) { s.received = s.received[1:] }, InvEvents},
		{"received an event that is not", func(s *snapshot, _ *history) {
			s.received = append(s.received, receiver.Delivery{EventID: "evt_9", Type: "order.paid", OrderID: "o2", State: "PAID", Verified: true})
		}, InvEvents},
		{"received another event", func(s *snapshot, _ *history) { s.received[0].State = "PAID" }, InvEvents},
		{"unsigned delivery", func(s *snapshot, _ *history) { s.received[1].Verified = false }, InvEvents},
		{"announced a state not kept", func(s *snapshot, _ *history) {
			s.orders = append(s.orders, dbOrder{id: "o3", state: "PENDING", currency: "GBP"})
			s.events = append(s.events, dbEvent{id: 7, order: "o3", to: "PENDING", event: "create"},
				dbEvent{id: 8, order: "o3", from: "PENDING", to: "CANCELED", event: "cancel", typ: "order.canceled", delivered: true})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_8", Type: "order.canceled", OrderID: "o3", State: "CANCELED", Verified: true})
		}, InvEvents},
		{"claim announced", func(s *snapshot, _ *history) { s.events[1].typ = "order.payment_failed" }, InvEvents},
		{"paid announced as something else", func(s *snapshot, _ *history) { s.events[4].typ = "order.canceled" }, InvEvents},
		{"paid answer not kept", func(_ *snapshot, h *history) { h.paid["o2"] = true }, InvAnswers},
		{"order lost", func(_ *snapshot, h *history) { h.orders["o3"] = "ref-3" }, InvAnswers},
		{"request named two attempts", func(_ *snapshot, h *history) { h.requests["r1"].attempts["a0"] = 1 }, InvRequestID},
		{"request named another attempt", func(_ *snapshot, h *history) {
			h.requests["r0"] = &request{order: "o1", attempts: map[string]int{"a1": 1}}
		}, InvRequestID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, h := cleanWorld()
			tt.breakIt(&s, h)
			got := check(s, h)
			if tt.want == 0 {
				for _, v := range got {
					t.Errorf("unexpected violation: %s", v)
				}
				return
			}
			found := false
			for _, v := range got {
				found = found || v.Invariant == tt.want
			}
			if !found {
				t.Errorf("want a violation of invariant %d, got %v", tt.want, got)
			}
		})
	}
}
