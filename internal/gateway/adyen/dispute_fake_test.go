package adyen_test

import (
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/order"
)

// TestDisputesFromTheFake: the fake Adyen's dispute notifications, signed
// and delivered (late, reordered, twice) like its others and checked
// against Adyen's definitions, reach the adapter as events about the paid
// attempt with the dispute they describe; and they never change what the
// attempt's Lookup reads from the notifications.
func TestDisputesFromTheFake(t *testing.T) {
	t.Parallel()
	a := newAdyen(t, nil)
	req := order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(), Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
		PaymentMethod: "tok_ok", CreatedAt: time.Now()}
	if res, err := a.gw.Charge(t.Context(), req); res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("Charge = %+v, %v; want succeeded", res, err)
	}
	psp := a.fake.Ledger()[0].PSPReference
	due := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second).UTC()
	steps := []struct {
		code   string
		notice adyenfake.DisputeNotice
		want   order.GatewayDispute
	}{
		{adyen.EventNotificationOfChargeback, adyenfake.DisputeNotice{Defendable: true, DefenseEnds: due},
			order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeInquiry, DueBy: due}},
		{adyen.EventChargeback, adyenfake.DisputeNotice{Defendable: true, DefenseEnds: due, DisputeStatus: "Unresponded"},
			order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback, DueBy: due, Withdrawn: 1250}},
		{adyen.EventChargebackReversed, adyenfake.DisputeNotice{},
			order.GatewayDispute{Status: order.DisputeWon, Stage: order.DisputeChargeback, Withdrawn: 1250, Reinstated: 1250}},
		{adyen.EventSecondChargeback, adyenfake.DisputeNotice{ReasonCode: "4853"},
			order.GatewayDispute{Status: order.DisputeLost, Stage: order.DisputeSecondChargeback, Withdrawn: 2500, Reinstated: 1250}},
	}
	for _, st := range steps {
		if _, err := a.fake.Dispute(psp, st.code, st.notice); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.fake.Dispute(psp, "AUTHORISATION", adyenfake.DisputeNotice{}); err == nil {
		t.Error("the fake sent an AUTHORISATION as a dispute")
	}
	if _, err := a.fake.Dispute("0000000000000000", adyen.EventChargeback, adyenfake.DisputeNotice{}); err == nil {
		t.Error("the fake disputed a payment it never took")
	}
	sent := a.fake.Disputes()
	var got map[string]order.GatewayEvent
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, _ := a.log.GatewayEventsAbout(t.Context(), "adyen", req.AttemptID)
		got = map[string]order.GatewayEvent{}
		for _, e := range evs {
			if e.Dispute != nil {
				got[e.Type] = e
			}
		}
		if len(got) == len(steps) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dispute events recorded, want %d: %+v", len(got), len(steps), got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, st := range steps {
		e := got[st.code]
		want := st.want
		want.ID, want.Amount = psp, order.Money{Currency: "GBP", AmountMinor: 1250}
		want.NetworkReasonCode = st.notice.ReasonCode
		if want.NetworkReasonCode == "" {
			want.NetworkReasonCode = "10.4"
		}
		if *e.Dispute != want {
			t.Errorf("%s: dispute %+v, want %+v", st.code, *e.Dispute, want)
		}
		if e.ObjectID != sent[i].PSPReference || e.ChargeID != psp || e.Outcome != "" || e.Succeeded {
			t.Errorf("%s: event %+v, want one about the payment %s", st.code, e, psp)
		}
	}
	if res := settledLookup(t, a.gw, req); res.Outcome != order.OutcomeSucceeded {
		t.Errorf("Lookup after the disputes = %+v; want the charge still succeeded", res)
	}
}
