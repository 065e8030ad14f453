package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/order"
)

// A small world: order o1 paid by attempt a1 (request r1) after a decline
// of attempt a0 (request r0); order o2 pending, never charged; order o3
// paid by attempt a3, and 400 of its 1000 refunded by refund f1, whose
// refund.succeeded event (evt_17, the last delivery) was delivered; order
// o4 pending again after its attempt a4 asked for 3-D Secure and expired,
// the gateway's charge canceled. Capture MANUAL: order o5 authorized for
// 1000 by attempt a5 and paid by captures k1 (300) and k2 (200), its hold
// still open; order o6 authorized and voided by void v1; order o7
// authorized and lapsed.
func cleanWorld() (snapshot, *history) {
	s := snapshot{
		orders: []dbOrder{
			{id: "o1", state: "PAID", currency: "GBP", current: "a1", amount: 500},
			{id: "o2", state: "PENDING", currency: "EUR", amount: 700},
			{id: "o3", state: "PARTIALLY_REFUNDED", currency: "GBP", current: "a3", amount: 1000, refunded: 400},
			{id: "o4", state: "PENDING", currency: "EUR", current: "a4", amount: 900},
		},
		attempts: []dbAttempt{
			{id: "a0", order: "o1", request: "r0", outcome: "declined", currency: "GBP", amount: 500},
			{id: "a1", order: "o1", request: "r1", outcome: "succeeded", chargeID: "ch_2", currency: "GBP", amount: 500},
			{id: "a3", order: "o3", request: "r3", outcome: "succeeded", chargeID: "ch_3", currency: "GBP", amount: 1000},
			{id: "a4", order: "o4", request: "r4", outcome: "declined", chargeID: "ch_4", currency: "EUR", amount: 900},
		},
		events: []dbEvent{
			{id: 1, order: "o1", to: "PENDING", event: "create"},
			{id: 2, order: "o1", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a0"},
			{id: 3, order: "o1", from: "CHARGING", to: "PENDING", event: "fail", attempt: "a0", typ: "order.payment_failed", delivered: true},
			{id: 4, order: "o1", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a1"},
			{id: 5, order: "o1", from: "CHARGING", to: "PAID", event: "succeed", attempt: "a1", typ: "order.paid", delivered: true},
			{id: 6, order: "o2", to: "PENDING", event: "create"},
			{id: 7, order: "o3", to: "PENDING", event: "create"},
			{id: 8, order: "o3", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a3"},
			{id: 9, order: "o3", from: "CHARGING", to: "PAID", event: "succeed", attempt: "a3", typ: "order.paid", delivered: true},
			{id: 10, order: "o3", from: "PAID", to: "PARTIALLY_REFUNDED", event: "refund_partial", typ: "order.partially_refunded", delivered: true},
			{id: 11, order: "o4", to: "PENDING", event: "create"},
			{id: 12, order: "o4", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a4"},
			{id: 13, order: "o4", from: "CHARGING", to: "REQUIRES_ACTION", event: "require_action", attempt: "a4",
				typ: "order.requires_action", delivered: true},
			{id: 14, order: "o4", from: "REQUIRES_ACTION", to: "PENDING", event: "fail", attempt: "a4", reason: "expired",
				typ: "order.payment_failed", delivered: true},
		},
		received: []receiver.Delivery{
			{EventID: "evt_3", Type: "order.payment_failed", OrderID: "o1", State: "PENDING", Verified: true},
			{EventID: "evt_5", Type: "order.paid", OrderID: "o1", State: "PAID", Verified: true},
			{EventID: "evt_5", Type: "order.paid", OrderID: "o1", State: "PAID", Verified: true}, // at least once
			{EventID: "evt_9", Type: "order.paid", OrderID: "o3", State: "PAID", Verified: true},
			{EventID: "evt_10", Type: "order.partially_refunded", OrderID: "o3", State: "PARTIALLY_REFUNDED", Verified: true},
			{EventID: "evt_13", Type: "order.requires_action", OrderID: "o4", State: "REQUIRES_ACTION", Verified: true},
			{EventID: "evt_14", Type: "order.payment_failed", OrderID: "o4", State: "PENDING", Verified: true},
			{EventID: "evt_17", Type: "refund.succeeded", OrderID: "o3", RefundID: "f1", State: "SUCCEEDED", Verified: true},
		},
		refundEvents: []dbRefundEvent{
			{id: 15, refund: "f1", order: "o3", to: "PENDING", event: "create"},
			{id: 16, refund: "f1", order: "o3", from: "PENDING", to: "REFUNDING", event: "refund"},
			{id: 17, refund: "f1", order: "o3", from: "REFUNDING", to: "SUCCEEDED", event: "succeed", typ: "refund.succeeded", delivered: true},
		},
		ledger: []sim.Charge{
			{ID: "ch_1", Reference: "a0", Amount: 500, Currency: "GBP", Status: "declined"},
			{ID: "ch_2", Reference: "a1", Amount: 500, Currency: "GBP", Status: "succeeded"},
			{ID: "ch_3", Reference: "a3", Amount: 1000, Currency: "GBP", Status: "succeeded"},
			{ID: "ch_4", Reference: "a4", Amount: 900, Currency: "EUR", PaymentMethod: "tok_3ds", Status: "declined", DeclineCode: "canceled"},
		},
		refunds: []dbRefund{{id: "f1", order: "o3", request: "rf1", state: "SUCCEEDED", currency: "GBP", amount: 400}},
		refundLedger: []sim.Refund{
			{ID: "re_1", Reference: "f1", ChargeReference: "a3", Amount: 400, Currency: "GBP", Status: "succeeded"},
		},
	}
	at := time.Date(2026, 6, 11, 12, 0, 0, 0, time.UTC)
	s.at = at
	s.orders = append(s.orders,
		dbOrder{id: "o5", state: "PAID", currency: "GBP", current: "a5", amount: 1000, manual: true, authorized: 1000, captured: 500},
		dbOrder{id: "o6", state: "VOIDED", currency: "EUR", current: "a6", amount: 800, manual: true, authorized: 800},
		dbOrder{id: "o7", state: "EXPIRED", currency: "USD", current: "a7", amount: 600, manual: true, authorized: 600})
	for i, o := range []struct{ id, cur, to, event, typ, state string }{
		{"o5", "GBP", "PAID", "capture", "capture.succeeded", "PAID"},
		{"o6", "EUR", "VOIDED", "void", "order.voided", "VOIDED"},
		{"o7", "USD", "EXPIRED", "expire", "order.authorization_expired", "EXPIRED"},
	} {
		base := int64(20 + 10*i)
		a := "a" + o.id[1:]
		s.attempts = append(s.attempts, dbAttempt{id: a, order: o.id, request: "r" + o.id[1:], outcome: "succeeded", currency: o.cur})
		s.events = append(s.events,
			dbEvent{id: base, order: o.id, to: "PENDING", event: "create"},
			dbEvent{id: base + 1, order: o.id, from: "PENDING", to: "CHARGING", event: "charge", attempt: a},
			dbEvent{id: base + 2, order: o.id, from: "CHARGING", to: "AUTHORIZED", event: "authorize", attempt: a, typ: "order.authorized", delivered: true},
			dbEvent{id: base + 3, order: o.id, from: "AUTHORIZED", to: o.to, event: o.event, typ: o.typ, delivered: true})
		s.received = append(s.received,
			receiver.Delivery{EventID: order.EventID(base + 2), Type: "order.authorized", OrderID: o.id, State: "AUTHORIZED", Verified: true},
			receiver.Delivery{EventID: order.EventID(base + 3), Type: o.typ, OrderID: o.id, State: o.state, Verified: true})
	}
	s.events = append(s.events, dbEvent{id: 24, order: "o5", from: "PAID", to: "PAID", event: "captured", typ: "capture.succeeded", delivered: true})
	s.received = append(s.received, receiver.Delivery{EventID: "evt_24", Type: "capture.succeeded", OrderID: "o5", State: "PAID", Verified: true})
	s.ledger = append(s.ledger,
		sim.Charge{ID: "ch_5", Reference: "a5", Amount: 1000, Currency: "GBP", Status: "authorized", Manual: true, AmountCaptured: 500, CaptureBefore: at.Add(time.Hour)},
		sim.Charge{ID: "ch_6", Reference: "a6", Amount: 800, Currency: "EUR", Status: "voided", Manual: true, CaptureBefore: at.Add(time.Hour)},
		sim.Charge{ID: "ch_7", Reference: "a7", Amount: 600, Currency: "USD", Status: "authorized", Manual: true, CaptureBefore: at.Add(-time.Second)})
	s.captures = []dbCapture{
		{id: "k1", order: "o5", request: "rk1", state: "SUCCEEDED", currency: "GBP", amount: 300},
		{id: "k2", order: "o5", request: "rk2", state: "SUCCEEDED", currency: "GBP", amount: 200},
	}
	s.captureLedger = []sim.Capture{
		{ID: "cp_1", Reference: "k1", ChargeReference: "a5", Amount: 300, Currency: "GBP", Status: "succeeded"},
		{ID: "cp_2", Reference: "k2", ChargeReference: "a5", Amount: 200, Currency: "GBP", Status: "succeeded"},
	}
	// Order o3's dispute d1 (dp_1 at the gateway), of the 600 not
	// refunded, opened (event 18) after refund f1 and lost (event 21).
	s.orders[2].chargedBack = 600
	s.disputes = []dbDispute{{id: "d1", order: "o3", attempt: "a3", gateway: simGateway, gatewayID: "dp_1", status: "LOST",
		stage: "CHARGEBACK", amount: 600, withdrawn: 600}}
	s.disputeLedger = []sim.Dispute{{ID: "dp_1", ChargeID: "ch_3", ChargeReference: "a3", Amount: 600, Currency: "GBP",
		Status: "lost", Stage: "chargeback", Withdrawn: 600}}
	for _, e := range []struct {
		id            int64
		event, status string
	}{{18, "dispute_opened", "NEEDS_RESPONSE"}, {21, "dispute_closed", "LOST"}} {
		typ := strings.Replace(e.event, "_", ".", 1)
		s.events = append(s.events, dbEvent{id: e.id, order: "o3", from: "PARTIALLY_REFUNDED", to: "PARTIALLY_REFUNDED",
			event: e.event, reason: e.status, dispute: "d1", typ: typ, delivered: true})
		s.received = append(s.received, receiver.Delivery{EventID: order.EventID(e.id), Type: typ, OrderID: "o3",
			State: "PARTIALLY_REFUNDED", Verified: true})
	}
	s.voids = []dbVoid{{id: "v1", order: "o6", request: "rv1", state: "SUCCEEDED"}}
	s.voidLedger = []sim.Void{{ID: "vd_1", Reference: "v1", ChargeReference: "a6", Status: "succeeded"}}
	h := newHistory()
	h.captureReqs["rk1"] = &holdRequest{order: "o5", named: map[string]int{"k1": 1}}
	h.captured["k1"] = true
	h.voidReqs["rv1"] = &holdRequest{order: "o6", named: map[string]int{"v1": 2}}
	h.orders["o1"], h.orders["o2"] = "ref-1", "ref-2"
	h.paid["o1"] = true
	h.requests["r1"] = &request{order: "o1", attempts: map[string]int{"a1": 2}, answers: 2}
	h.refundReqs["rf1"] = &refundRequest{order: "o3", refunds: map[string]int{"f1": 1}}
	h.refunded["f1"] = true
	return s, h
}

// withRoutes adds to a world order o8, made with routes over the account
// "flaky" and "refpsp": its attempt a80 on flaky was declined
// processing_error, and a81, which cascaded after it, paid on refpsp.
func withRoutes(s *snapshot) {
	s.orders = append(s.orders, dbOrder{id: "o8", state: "PAID", currency: "GBP", current: "a81", gateway: "refpsp", amount: 300, routed: true})
	s.attempts = append(s.attempts,
		dbAttempt{id: "a80", order: "o8", request: "r8", outcome: "declined", declineCode: "processing_error", currency: "GBP",
			amount: 300, gateway: "flaky"},
		dbAttempt{id: "a81", order: "o8", request: "r8/cascade-1", outcome: "succeeded", chargeID: "ch_8", currency: "GBP",
			amount: 300, gateway: "refpsp", cascadeAfter: "flaky declined: processing_error"})
	s.events = append(s.events,
		dbEvent{id: 60, order: "o8", to: "PENDING", event: "create"},
		dbEvent{id: 61, order: "o8", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a80"},
		dbEvent{id: 62, order: "o8", from: "CHARGING", to: "PENDING", event: "fail", attempt: "a80", typ: "order.payment_failed", delivered: true},
		dbEvent{id: 63, order: "o8", from: "PENDING", to: "CHARGING", event: "charge", attempt: "a81"},
		dbEvent{id: 64, order: "o8", from: "CHARGING", to: "PAID", event: "succeed", attempt: "a81", typ: "order.paid", delivered: true})
	s.received = append(s.received,
		receiver.Delivery{EventID: "evt_62", Type: "order.payment_failed", OrderID: "o8", State: "PENDING", Verified: true},
		receiver.Delivery{EventID: "evt_64", Type: "order.paid", OrderID: "o8", State: "PAID", Verified: true})
	s.ledger = append(s.ledger,
		sim.Charge{ID: "flaky/ch_1", Reference: "a80", Amount: 300, Currency: "GBP", Status: "declined", DeclineCode: "processing_error"},
		sim.Charge{ID: "ch_8", Reference: "a81", Amount: 300, Currency: "GBP", Status: "succeeded"})
	s.accountOf = map[string]string{"flaky/ch_1": "flaky", "ch_8": "refpsp"}
}

// ledgerCharge returns the charge of world s's ledger for reference ref.
func ledgerCharge(s *snapshot, ref string) *sim.Charge {
	for i := range s.ledger {
		if s.ledger[i].Reference == ref {
			return &s.ledger[i]
		}
	}
	panic("no charge for " + ref)
}

// TestCheckRoutes checks the invariants of the orders with routes: each
// case must report its invariant, and a clean cascade none.
func TestCheckRoutes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		breakIt func(*snapshot)
		want    int // the invariant broken; 0: none
	}{
		{"clean cascade", func(*snapshot) {}, 0},
		{"clean cascade after not sent", func(s *snapshot) {
			s.attempts[len(s.attempts)-2].outcome, s.attempts[len(s.attempts)-2].declineCode = "not_sent", ""
			s.ledger = slices.DeleteFunc(s.ledger, func(c sim.Charge) bool { return c.Reference == "a80" }) // never reached flaky
			s.attempts[len(s.attempts)-1].cascadeAfter = "flaky not_sent"
		}, 0},
		{"charged on two gateways", func(s *snapshot) {
			c := ledgerCharge(s, "a80")
			c.Status, c.DeclineCode = "succeeded", ""
		}, InvRouteOneCharge},
		{"an order with routes charged twice on one gateway", func(s *snapshot) {
			s.ledger = append(s.ledger, sim.Charge{ID: "ch_9", Reference: "a81", Amount: 300, Currency: "GBP", Status: "succeeded"})
			s.accountOf["ch_9"] = "refpsp"
		}, InvRouteOneCharge},
		{"a single order charged on two gateways", func(s *snapshot) {
			s.orders[len(s.orders)-1].routed = false
			c := ledgerCharge(s, "a80")
			c.Status, c.DeclineCode = "succeeded", ""
		}, InvRouteOneCharge},
		{"charge in another gateway's ledger", func(s *snapshot) { s.accountOf["ch_8"] = "slow" }, InvOneCharge},
		{"claimed on another gateway before the settle", func(s *snapshot) {
			n := len(s.events)
			s.events[n-3].id, s.events[n-2].id = 63, 62 // a81 claimed, then a80 failed
			s.events[n-3], s.events[n-2] = s.events[n-2], s.events[n-3]
		}, InvCascadeWait},
		{"claimed on another gateway while unknown", func(s *snapshot) {
			s.attempts[len(s.attempts)-2].outcome, s.attempts[len(s.attempts)-2].declineCode = "unknown", ""
		}, InvCascadeWait},
		{"claimed on another gateway after an issuer's decline", func(s *snapshot) {
			s.attempts[len(s.attempts)-2].declineCode = "insufficient_funds"
		}, InvCascadeWait},
		{"claimed on another gateway, previous never settled", func(s *snapshot) {
			s.events = slices.DeleteFunc(s.events, func(e dbEvent) bool { return e.id == 62 })
		}, InvCascadeWait},
		{"cascade after a charge", func(s *snapshot) {
			// What a build that cascades after a timeout leaves: the slow
			// gateway charged the attempt it took for failed.
			s.attempts[len(s.attempts)-2].gateway, s.attempts[len(s.attempts)-2].outcome = "slow", "unknown"
			s.attempts[len(s.attempts)-1].cascadeAfter = "slow unknown"
			c := ledgerCharge(s, "a80")
			c.Status, c.DeclineCode = "succeeded", ""
			s.accountOf[c.ID] = "slow"
		}, InvCascadeProven},
		{"cascade after an attempt the gateway still holds", func(s *snapshot) {
			c := ledgerCharge(s, "a80")
			c.Status, c.DeclineCode = "requires_action", ""
		}, InvCascadeProven},
		{"cascade after another gateway's attempt", func(s *snapshot) {
			s.attempts[len(s.attempts)-1].cascadeAfter = "down not_sent"
		}, InvCascadeProven},
		{"answer naming the cascade's hop", func(s *snapshot) {}, 0},
		{"answer naming a hop of another request", func(s *snapshot) {
			s.attempts[len(s.attempts)-1].request = "r1/cascade-1"
		}, InvRequestID},
		{"cascade from the first attempt", func(s *snapshot) {
			s.attempts[len(s.attempts)-2].cascadeAfter = "refpsp not_sent"
		}, InvCascadeProven},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, h := cleanWorld()
			withRoutes(&s)
			h.requests["r8"] = &request{order: "o8", attempts: map[string]int{"a81": 1}, answers: 1}
			tt.breakIt(&s)
			got := check(s, h)
			if tt.want == 0 {
				for _, v := range got {
					t.Errorf("unexpected violation: %s", v)
				}
				return
			}
			if !slices.ContainsFunc(got, func(v Violation) bool { return v.Invariant == tt.want }) {
				t.Errorf("want a violation of invariant %d, got %v", tt.want, got)
			}
		})
	}
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
		{"a foreign charge's finding announced", func(s *snapshot, _ *history) {
			s.findingEvents = append(s.findingEvents, dbFindingEvent{id: 90, finding: "x1"})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_90", Type: order.EventAuditFinding, FindingID: "x1", Verified: true})
		}, 0},
		{"received a finding's event that is not", func(s *snapshot, _ *history) {
			s.received = append(s.received, receiver.Delivery{EventID: "evt_90", Type: order.EventAuditFinding, FindingID: "x1", Verified: true})
		}, InvEvents},
		{"received another finding's event", func(s *snapshot, _ *history) {
			s.findingEvents = append(s.findingEvents, dbFindingEvent{id: 90, finding: "x1", order: "o1"})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_90", Type: order.EventAuditFinding, FindingID: "x2",
				OrderID: "o1", Verified: true})
		}, InvEvents},
		{"announced a state not kept", func(s *snapshot, _ *history) {
			s.orders = append(s.orders, dbOrder{id: "o3", state: "PENDING", currency: "GBP"})
			s.events = append(s.events, dbEvent{id: 7, order: "o3", to: "PENDING", event: "create"},
				dbEvent{id: 8, order: "o3", from: "PENDING", to: "CANCELED", event: "cancel", typ: "order.canceled", delivered: true})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_8", Type: "order.canceled", OrderID: "o3", State: "CANCELED", Verified: true})
		}, InvEvents},
		{"claim announced", func(s *snapshot, _ *history) { s.events[1].typ = "order.payment_failed" }, InvEvents},
		{"paid announced as something else", func(s *snapshot, _ *history) { s.events[4].typ = "order.canceled" }, InvEvents},
		{"refund succeeded without its event", func(s *snapshot, _ *history) { s.refundEvents[2].typ = "" }, InvEvents},
		{"refund event never delivered", func(s *snapshot, _ *history) { s.refundEvents[2].delivered = false }, InvEvents},
		{"refund event never received", func(s *snapshot, _ *history) { s.received = s.received[:len(s.received)-1] }, InvEvents},
		{"refund claim announced", func(s *snapshot, _ *history) { s.refundEvents[1].typ = "refund.refunding" }, InvEvents},
		{"refund event for a move not made", func(s *snapshot, _ *history) {
			s.refundEvents = append(s.refundEvents, dbRefundEvent{id: 18, refund: "f1", order: "o3", from: "REFUNDING", to: "SUCCEEDED",
				event: "succeed", typ: "refund.succeeded", delivered: true})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_18", Type: "refund.succeeded", OrderID: "o3", RefundID: "f1",
				State: "SUCCEEDED", Verified: true})
		}, InvEvents},
		{"refund history ends elsewhere", func(s *snapshot, _ *history) { s.refundEvents = s.refundEvents[:2] }, InvEvents},
		{"received another refund's event", func(s *snapshot, _ *history) { s.received[len(s.received)-1].RefundID = "f2" }, InvEvents},
		{"refund event sharing a number", func(s *snapshot, _ *history) { s.refundEvents[2].id = 10 }, InvEvents},
		{"paid answer not kept", func(_ *snapshot, h *history) { h.paid["o2"] = true }, InvAnswers},
		{"order lost", func(_ *snapshot, h *history) { h.orders["o9"] = "ref-9" }, InvAnswers},
		{"request named two attempts", func(_ *snapshot, h *history) { h.requests["r1"].attempts["a0"] = 1 }, InvRequestID},
		{"request named another attempt", func(_ *snapshot, h *history) {
			h.requests["r0"] = &request{order: "o1", attempts: map[string]int{"a1": 1}}
		}, InvRequestID},
		{"refund reference twice at the gateway", func(s *snapshot, _ *history) {
			s.refundLedger = append(s.refundLedger, sim.Refund{ID: "re_2", Reference: "f1", ChargeReference: "a3",
				Amount: 400, Currency: "GBP", Status: "failed"})
		}, InvRefundOnce},
		{"refund of no refund", func(s *snapshot, _ *history) {
			s.refundLedger = append(s.refundLedger, sim.Refund{ID: "re_2", Reference: "zz", ChargeReference: "a3",
				Amount: 1, Currency: "GBP", Status: "failed"})
		}, InvRefundOnce},
		{"refunded more than charged", func(s *snapshot, _ *history) {
			s.refunds = append(s.refunds, dbRefund{id: "f2", order: "o3", request: "rf2", state: "SUCCEEDED", currency: "GBP", amount: 700})
			s.refundLedger = append(s.refundLedger, sim.Refund{ID: "re_2", Reference: "f2", ChargeReference: "a3",
				Amount: 700, Currency: "GBP", Status: "succeeded"})
			s.orders[2].refunded = 1100
		}, InvRefunds},
		{"succeeded refund not at the gateway", func(s *snapshot, _ *history) { s.refundLedger = nil }, InvRefunds},
		{"refund at the gateway, failed in Settle", func(s *snapshot, _ *history) {
			s.refunds[0].state = "FAILED"
			s.orders[2].refunded, s.orders[2].state = 0, "PAID"
		}, InvRefunds},
		{"refunding left", func(s *snapshot, _ *history) { s.refunds[0].state = "REFUNDING" }, InvRefunds},
		{"refunded total off", func(s *snapshot, _ *history) { s.orders[2].refunded = 300 }, InvRefunds},
		{"state not what is refunded", func(s *snapshot, _ *history) { s.orders[2].state = "REFUNDED" }, InvRefunds},
		{"refund answer not kept", func(_ *snapshot, h *history) { h.refunded["f9"] = true }, InvRefunds},
		{"expired without canceling the challenge", func(s *snapshot, _ *history) {
			s.ledger[3].Status, s.ledger[3].DeclineCode = "requires_action", ""
		}, InvActionCharge},
		{"challenge completed after the expiry", func(s *snapshot, _ *history) {
			s.ledger[3].Status, s.ledger[3].DeclineCode = "succeeded", ""
		}, InvActionCharge},
		{"challenge open for a canceled order", func(s *snapshot, _ *history) {
			s.ledger[3].Status, s.ledger[3].DeclineCode = "requires_action", ""
			s.orders[3].state = "CANCELED"
			s.events = append(s.events, dbEvent{id: 15, order: "o4", from: "PENDING", to: "CANCELED", event: "cancel",
				typ: "order.canceled", delivered: true})
			s.received = append(s.received, receiver.Delivery{EventID: "evt_15", Type: "order.canceled", OrderID: "o4", State: "CANCELED", Verified: true})
		}, InvActionCharge},
		{"fail out of REQUIRES_ACTION while the gateway waits", func(s *snapshot, _ *history) {
			s.ledger[3].Status, s.ledger[3].DeclineCode = "requires_action", ""
		}, InvActionExit},
		{"REQUIRES_ACTION left for another attempt", func(s *snapshot, _ *history) { s.events[13].attempt = "a3" }, InvActionExit},
		{"REQUIRES_ACTION left by a move the table refuses", func(s *snapshot, _ *history) {
			s.events[13].event, s.events[13].to, s.events[13].typ = "cancel", "CANCELED", "order.canceled"
			s.orders[3].state = "CANCELED"
			s.received[6] = receiver.Delivery{EventID: "evt_14", Type: "order.canceled", OrderID: "o4", State: "CANCELED", Verified: true}
		}, InvActionExit},
		{"REQUIRES_ACTION for a charge the gateway never saw", func(s *snapshot, _ *history) { s.ledger = s.ledger[:3] }, InvActionExit},
		{"capture refused as more than the hold", func(s *snapshot, _ *history) {
			s.captures = append(s.captures, dbCapture{id: "k3", order: "o5", request: "rk3", state: "FAILED", currency: "GBP", amount: 600})
			s.captureLedger = append(s.captureLedger, sim.Capture{ID: "cp_3", Reference: "k3", ChargeReference: "a5", Amount: 600,
				Currency: "GBP", Status: "failed", FailureCode: "amount_too_large"})
		}, InvCaptureHold},
		{"captured beyond the hold", func(s *snapshot, _ *history) { s.orders[4].captured = 1200 }, InvCaptureHold},
		{"authorized another amount", func(s *snapshot, _ *history) { s.orders[4].authorized = 900 }, InvCaptureHold},
		{"voided and captured", func(s *snapshot, _ *history) {
			s.captures = append(s.captures, dbCapture{id: "k4", order: "o6", request: "rk4", state: "SUCCEEDED", currency: "EUR", amount: 100})
			s.captureLedger = append(s.captureLedger, sim.Capture{ID: "cp_4", Reference: "k4", ChargeReference: "a6", Amount: 100,
				Currency: "EUR", Status: "succeeded"})
		}, InvVoidCapture},
		{"capture of no capture", func(s *snapshot, _ *history) {
			s.captureLedger = append(s.captureLedger, sim.Capture{ID: "cp_9", Reference: "zz", ChargeReference: "a5", Amount: 1, Status: "failed"})
		}, InvCaptureKnown},
		{"succeeded capture not at the gateway", func(s *snapshot, _ *history) { s.captureLedger = s.captureLedger[:1] }, InvCaptureKnown},
		{"capture reference twice at the gateway", func(s *snapshot, _ *history) {
			s.captureLedger = append(s.captureLedger, s.captureLedger[0])
		}, InvCaptureKnown},
		{"capture at the gateway, failed in Settle", func(s *snapshot, _ *history) { s.captures[1].state = "FAILED" }, InvCaptureKnown},
		{"capturing left", func(s *snapshot, _ *history) { s.captures[1].state = "CAPTURING" }, InvCaptureKnown},
		{"voided at the gateway, failed in Settle", func(s *snapshot, _ *history) { s.voids[0].state = "FAILED" }, InvCaptureKnown},
		{"capture answer not kept", func(_ *snapshot, h *history) { h.captured["k9"] = true }, InvCaptureKnown},
		{"capture request named another capture", func(_ *snapshot, h *history) { h.captureReqs["rk1"].named["k2"] = 1 }, InvCaptureKnown},
		{"captured total off", func(s *snapshot, _ *history) { s.orders[4].captured = 400 }, InvCapturedTotal},
		{"captured at the gateway beyond Settle's", func(s *snapshot, _ *history) {
			s.captureLedger = append(s.captureLedger, sim.Capture{ID: "cp_5", Reference: "k5", ChargeReference: "a5", Amount: 100,
				Currency: "GBP", Status: "succeeded"})
			s.captures = append(s.captures, dbCapture{id: "k5", order: "o5", request: "rk5", state: "FAILED", currency: "GBP", amount: 100})
		}, InvCapturedTotal},
		{"paid with nothing captured", func(s *snapshot, _ *history) {
			s.captures, s.captureLedger, s.orders[4].captured = nil, nil, 0
		}, InvHoldState},
		{"voided at the gateway, authorized in Settle", func(s *snapshot, _ *history) { s.orders[5].state = "AUTHORIZED" }, InvHoldState},
		{"expired while the gateway holds it", func(s *snapshot, _ *history) { s.ledger[6].CaptureBefore = s.at.Add(time.Hour) }, InvHoldState},
		{"authorization of an automatic order", func(s *snapshot, _ *history) {
			s.ledger = append(s.ledger, sim.Charge{ID: "ch_9", Reference: "a3", Amount: 1000, Currency: "GBP", Status: "authorized", Manual: true})
		}, InvHoldState},
		{"capture announced as paid", func(s *snapshot, _ *history) { s.events[len(s.events)-1].typ = "order.paid" }, InvEvents},
		{"dispute not in Settle", func(s *snapshot, _ *history) { s.disputes = nil }, InvDisputes},
		{"dispute the gateway never opened", func(s *snapshot, _ *history) {
			s.disputeLedger, s.orders[2].chargedBack = nil, 0
		}, InvDisputes},
		{"dispute won in Settle, lost at the gateway", func(s *snapshot, _ *history) { s.disputes[0].status = "WON" }, InvDisputes},
		{"dispute on another attempt", func(s *snapshot, _ *history) { s.disputes[0].attempt = "a1" }, InvDisputes},
		{"charged back not the gateway's", func(s *snapshot, _ *history) { s.orders[2].chargedBack = 0 }, InvDisputes},
		{"open dispute not counted", func(s *snapshot, _ *history) {
			s.disputeLedger[0].Status, s.disputes[0].status = "needs_response", "NEEDS_RESPONSE"
		}, InvDisputes},
		{"refund and chargeback beyond the charge", func(s *snapshot, _ *history) {
			s.disputeLedger[0].Withdrawn, s.disputes[0].withdrawn, s.orders[2].chargedBack = 700, 700, 700
		}, InvDisputes},
		{"refund claimed during an open dispute", func(s *snapshot, _ *history) { s.refundEvents[1].id = 20 }, InvDisputeRefund},
		{"dispute change announced as something else", func(s *snapshot, _ *history) {
			for i := range s.events {
				if s.events[i].dispute != "" {
					s.events[i].typ = "dispute.updated"
				}
			}
		}, InvEvents},
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
