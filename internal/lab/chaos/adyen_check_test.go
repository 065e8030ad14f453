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
	return snapshot{
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
	// PAID order is a person's to look at, no violation.
	s := adyenWorld()
	s.adyen.payments[0].Status, s.adyen.payments[0].AmountCaptured = adyenfake.StatusAuthorised, 0
	s.adyen.payments[0].Captures[0].Status = adyenfake.ModFailed
	s.captureFailed["p1"] = true
	if invs := adyenInvariants(s); len(invs) > 0 {
		t.Fatalf("a failed capture with its review item broke invariants %v", invs)
	}
}
