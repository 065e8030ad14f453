package chaos

import (
	"slices"
	"testing"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
)

// adyenWorld: order b1 paid on Adyen by attempt p1, captured in full at
// once; order b2 pending again after its attempt p2 lost its notification
// and was technically canceled, its payment cancelled.
func adyenWorld() snapshot {
	w := snapshot{
		orders: []dbOrder{
			{id: "b1", state: "PAID", currency: "EUR", current: "p1", gateway: adyenGateway, amount: 500},
			{id: "b2", state: "PENDING", currency: "EUR", current: "p2", gateway: adyenGateway, amount: 700},
		},
		attempts: []dbAttempt{
			{id: "p1", order: "b1", outcome: "succeeded", currency: "EUR", amount: 500},
			{id: "p2", order: "b2", outcome: "not_found", currency: "EUR", amount: 700},
		},
		adyen: adyenEnd{
			payments: []adyenfake.Payment{
				{PSPReference: "psp1", Reference: "p1", Amount: 500, Currency: "EUR", ManualCapture: true, Status: adyenfake.StatusCaptured,
					AmountAuthorised: 500, AmountCaptured: 500, Captures: []adyenfake.Modification{
						{Kind: adyenfake.KindCapture, PSPReference: "psp1c", Reference: "p1:capture", Amount: 500, Currency: "EUR", Status: adyenfake.ModSucceeded}}},
				{PSPReference: "psp2", Reference: "p2", Amount: 700, Currency: "EUR", ManualCapture: true, Status: adyenfake.StatusCancelled,
					AmountAuthorised: 700},
			},
			techCancels: []adyenfake.Modification{{Kind: adyenfake.KindTechnicalCancel, PSPReference: "psp2t", Reference: "p2:cancel",
				PaymentPSPReference: "psp2", PaymentReference: "p2", Status: adyenfake.ModSucceeded}},
		},
		captureFailed: map[string]bool{},
	}
	w.adyen.delivered, w.refundFailed = map[string]bool{}, map[string]bool{}
	return w
}

func adyenInvariants(s snapshot) []int {
	orders := map[string]dbOrder{}
	for _, o := range s.orders {
		orders[o.id] = o
	}
	attempts := map[string]dbAttempt{}
	for _, a := range s.attempts {
		attempts[a.id] = a
	}
	var invs []int
	for _, v := range checkAdyen(s, orders, attempts) {
		invs = append(invs, v.Invariant)
	}
	return invs
}

// TestCheckAdyen: the Adyen invariants pass a clean world and each sees
// the fault it is there for.
func TestCheckAdyen(t *testing.T) {
	if invs := adyenInvariants(adyenWorld()); len(invs) > 0 {
		t.Fatalf("a clean world broke invariants %v", invs)
	}
	for _, tc := range []struct {
		name  string
		spoil func(*snapshot)
		want  int
	}{
		{"MissingNotificationTakenForADecline", func(s *snapshot) {
			// The lookup declined p2 without a technical cancel: Adyen
			// still holds its authorisation.
			s.attempts[1].outcome = "declined"
			s.adyen.payments[1].Status = adyenfake.StatusAuthorised
			s.adyen.techCancels = nil
		}, InvAdyenHold},
		{"TechnicalCancelOfThePayingAttempt", func(s *snapshot) {
			s.adyen.techCancels = append(s.adyen.techCancels, adyenfake.Modification{Kind: adyenfake.KindTechnicalCancel,
				PSPReference: "psp1t", PaymentReference: "p1", Status: adyenfake.ModSucceeded})
		}, InvAdyenTechnicalCancel},
		{"NotFoundWithoutTechnicalCancel", func(s *snapshot) { s.adyen.techCancels = nil }, InvAdyenTechnicalCancel},
		{"SecondPaymentCaptured", func(s *snapshot) {
			s.attempts = append(s.attempts, dbAttempt{id: "p0", order: "b1", outcome: "unknown", currency: "EUR", amount: 500})
			s.adyen.payments = append(s.adyen.payments, adyenfake.Payment{PSPReference: "psp0", Reference: "p0", Amount: 500,
				Currency: "EUR", Status: adyenfake.StatusCaptured, AmountAuthorised: 500, AmountCaptured: 500})
		}, InvAdyenOneCharge},
		{"PaidWithNothingTaken", func(s *snapshot) {
			s.adyen.payments[0].Status, s.adyen.payments[0].AmountCaptured = adyenfake.StatusAuthorised, 0
			s.adyen.payments[0].Captures = nil
		}, InvAdyenChargeSettled},
		{"ChargeForgotten", func(s *snapshot) { s.orders[0].state = "PENDING" }, InvAdyenChargeSettled},
		{"CaptureFailedTakenForDone", func(s *snapshot) {
			// Adyen failed the capture after its CAPTURE and told Settle,
			// which raised nothing: the order looks paid.
			failCapture(s)
			s.adyen.delivered[noteKey("CAPTURE_FAILED", "p1:capture")] = true
		}, InvAdyenChargeSettled},
		{"ManualCaptureFailedTakenForDone", func(s *snapshot) {
			manualCaptureFailed(s)
			s.adyen.delivered[noteKey("CAPTURE_FAILED", "c3")] = true
		}, InvAdyenCapture},
		{"RefundFailedTakenForDone", func(s *snapshot) {
			refundFailed(s)
			s.adyen.delivered[noteKey("REFUND_FAILED", "r1")] = true
		}, InvAdyenRefunds},
		{"LapseTold", func(s *snapshot) {
			lapsed(s)
			s.adyen.delivered[noteKey("EXPIRE", "p3")] = true
		}, InvAdyenHold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := adyenWorld()
			tc.spoil(&s)
			if invs := adyenInvariants(s); !slices.Contains(invs, tc.want) {
				t.Fatalf("invariant %d (%s) not reported; got %v", tc.want, invariantNames[tc.want], invs)
			}
		})
	}
	// A capture Adyen received, then failed, with its review item: the
	// PAID order is a person's to look at, no violation; nor is one whose
	// CAPTURE_FAILED never reached Settle, nor a lapse whose EXPIRE did
	// not.
	for name, spoil := range map[string]func(*snapshot){
		"review item": func(s *snapshot) { failCapture(s); s.captureFailed["p1"] = true },
		"untold":      failCapture,
		"manual, review item": func(s *snapshot) {
			manualCaptureFailed(s)
			s.adyen.delivered[noteKey("CAPTURE_FAILED", "c3")] = true
			s.captureFailed["p3"] = true
		},
		"manual, untold": manualCaptureFailed,
		"lapse untold":   lapsed,
		"lapse, a capture in review": func(s *snapshot) {
			lapsed(s)
			s.adyen.delivered[noteKey("EXPIRE", "p3")] = true
			s.captures = append(s.captures, dbCapture{id: "c3", order: "b3", state: "NEEDS_REVIEW", currency: "EUR", amount: 300, final: true})
		},
		"refund failed, review item": func(s *snapshot) {
			refundFailed(s)
			s.adyen.delivered[noteKey("REFUND_FAILED", "r1")] = true
			s.refundFailed["p1"] = true
		},
		"refund failed, untold": refundFailed,
		"lapse settled": func(s *snapshot) {
			lapsed(s)
			s.adyen.delivered[noteKey("EXPIRE", "p3")] = true
			s.orders[2].state = "EXPIRED"
		},
	} {
		s := adyenWorld()
		spoil(&s)
		if invs := adyenInvariants(s); len(invs) > 0 {
			t.Errorf("%s: broke invariants %v", name, invs)
		}
	}
}

// failCapture makes b1's capture one Adyen reported done, then failed.
func failCapture(s *snapshot) {
	p := &s.adyen.payments[0]
	p.Status, p.AmountCaptured = adyenfake.StatusAuthorised, 0
	p.Captures[0].Status, p.Captures[0].Reason = adyenfake.ModFailed, adyenfake.ReasonCaptureFailed
}

// manualCaptureFailed adds order b3, MANUAL, PAID by its capture c3 that
// Adyen reported done and then failed.
func manualCaptureFailed(s *snapshot) {
	s.orders = append(s.orders, dbOrder{id: "b3", state: "PAID", currency: "EUR", current: "p3", gateway: adyenGateway, amount: 300,
		manual: true, authorized: 300, captured: 300})
	s.attempts = append(s.attempts, dbAttempt{id: "p3", order: "b3", outcome: "succeeded", currency: "EUR", amount: 300})
	s.captures = append(s.captures, dbCapture{id: "c3", order: "b3", state: "SUCCEEDED", currency: "EUR", amount: 300, final: true})
	s.adyen.payments = append(s.adyen.payments, adyenfake.Payment{PSPReference: "psp3", Reference: "p3", Amount: 300, Currency: "EUR",
		ManualCapture: true, Status: adyenfake.StatusAuthorised, AmountAuthorised: 300, Captures: []adyenfake.Modification{
			{Kind: adyenfake.KindCapture, PSPReference: "psp3c", Reference: "c3", Amount: 300, Currency: "EUR",
				Status: adyenfake.ModFailed, Reason: adyenfake.ReasonCaptureFailed}}})
}

// lapsed adds order b3, MANUAL and AUTHORIZED, whose hold lapsed at Adyen.
func lapsed(s *snapshot) {
	s.orders = append(s.orders, dbOrder{id: "b3", state: "AUTHORIZED", currency: "EUR", current: "p3", gateway: adyenGateway, amount: 300,
		manual: true, authorized: 300})
	s.attempts = append(s.attempts, dbAttempt{id: "p3", order: "b3", outcome: "succeeded", currency: "EUR", amount: 300})
	s.adyen.payments = append(s.adyen.payments, adyenfake.Payment{PSPReference: "psp3", Reference: "p3", Amount: 300, Currency: "EUR",
		ManualCapture: true, Status: adyenfake.StatusExpired, AmountAuthorised: 300})
}

// refundFailed adds to b1 a refund r1, SUCCEEDED in Settle, that Adyen
// reported done and then failed.
func refundFailed(s *snapshot) {
	s.orders[0].state, s.orders[0].refunded = "PARTIALLY_REFUNDED", 200
	s.refunds = append(s.refunds, dbRefund{id: "r1", order: "b1", state: "SUCCEEDED", currency: "EUR", amount: 200})
	s.adyen.payments[0].Refunds = []adyenfake.Modification{{Kind: adyenfake.KindRefund, PSPReference: "psp1r", Reference: "r1",
		Amount: 200, Currency: "EUR", Status: adyenfake.ModFailed, Reason: adyenfake.ReasonRefundFailed}}
}
