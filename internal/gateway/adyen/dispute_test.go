package adyen

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// disputeBatch is a batch of one dispute notification with additionalData
// extra, signed with key.
func disputeBatch(t *testing.T, key []byte, it notificationItem, extra map[string]any) []byte {
	t.Helper()
	it.AdditionalData = map[string]any{"hmacSignature": sign(key, &it)}
	for k, v := range extra {
		it.AdditionalData[k] = v
	}
	b, err := json.Marshal(map[string]any{"live": "false", "notificationItems": []any{
		map[string]any{"NotificationRequestItem": it}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDisputeNotifications: every dispute notification becomes an event
// about the disputed payment with the dispute Adyen's notification
// implies (its id the payment's pspReference), never a payment outcome;
// an unknown disputeStatus and a bad signature are refused.
func TestDisputeNotifications(t *testing.T) {
	t.Parallel()
	key, _ := CheckHMACKey(sampleKey)
	other, _ := CheckHMACKey(otherKey)
	g := newGateway(t, "https://127.0.0.1:1", &MemoryLog{}, time.Now)
	attempt := order.NewID()
	due := time.Date(2027, 1, 9, 2, 3, 7, 0, time.UTC)
	item := func(code, psp string) notificationItem {
		return notificationItem{EventCode: code, PSPReference: psp, OriginalReference: testPSP, MerchantAccountCode: testMerchant,
			MerchantReference: attempt, Amount: amount{Currency: "EUR", Value: 1000}, Success: "true",
			Reason: "Fraud / Card Absent", EventDate: "2026-12-02T02:00:00+01:00"}
	}
	base := map[string]any{"chargebackReasonCode": " 10.4", "chargebackSchemeCode": "visa",
		"defensePeriodEndsAt": "2027-01-09T03:03:07+01:00", "modificationMerchantReferences": ""}
	with := func(kv ...string) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		code  string
		extra map[string]any
		want  order.GatewayDispute
	}{
		{EventRequestForInformation, with(), order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeInquiry}},
		{EventNotificationOfChargeback, with(), order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeInquiry}},
		{EventChargeback, with("defendable", "true"), order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("defendable", "false"), order.GatewayDispute{Status: order.DisputeLost, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("disputeStatus", "Unresponded"), order.GatewayDispute{Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("disputeStatus", "Responded"), order.GatewayDispute{Status: order.DisputeUnderReview, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("disputeStatus", "Pending"), order.GatewayDispute{Status: order.DisputeUnderReview, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("disputeStatus", "Accepted"), order.GatewayDispute{Status: order.DisputeLost, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargeback, with("disputeStatus", "Won"), order.GatewayDispute{Status: order.DisputeWon, Stage: order.DisputeChargeback, Withdrawn: 1000}},
		{EventChargebackReversed, with(), order.GatewayDispute{Status: order.DisputeWon, Stage: order.DisputeChargeback, Withdrawn: 1000, Reinstated: 1000}},
		{EventPrearbitrationWon, with(), order.GatewayDispute{Status: order.DisputeWon, Stage: order.DisputePreArbitration, Withdrawn: 1000, Reinstated: 1000}},
		{EventPrearbitrationLost, with(), order.GatewayDispute{Status: order.DisputeLost, Stage: order.DisputePreArbitration, Withdrawn: 2000, Reinstated: 1000}},
		{EventSecondChargeback, with(), order.GatewayDispute{Status: order.DisputeLost, Stage: order.DisputeSecondChargeback, Withdrawn: 2000, Reinstated: 1000}},
	} {
		psp := "DP0000000000" + strings.ToUpper(tc.code[:4])
		evs, err := g.ReceiveEvents(disputeBatch(t, key, item(tc.code, psp), tc.extra), nil)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s %v: %+v, %v; want one event", tc.code, tc.extra, evs, err)
		}
		e := evs[0]
		want := tc.want
		want.ID, want.Amount, want.Reason, want.NetworkReasonCode, want.DueBy = testPSP, order.Money{Currency: "EUR", AmountMinor: 1000},
			"fraud_card_absent", "10.4", due
		if e.Dispute == nil || *e.Dispute != want {
			t.Errorf("%s %v: dispute %+v, want %+v", tc.code, tc.extra, e.Dispute, want)
		}
		if e.ID != tc.code+":"+psp+":true" || e.Type != tc.code || e.ObjectID != psp || e.AttemptID != attempt ||
			e.ChargeID != testPSP || e.About != order.EventAboutAttempt || e.Outcome != "" || e.Succeeded {
			t.Errorf("%s: event %+v, want one about the payment %s, attempt %s, with no outcome", tc.code, e, testPSP, attempt)
		}
	}

	// An unknown disputeStatus refuses the batch, naming it.
	_, err := g.ReceiveEvents(disputeBatch(t, key, item(EventChargeback, "DP00000000000X01"), with("disputeStatus", "Arbitration")), nil)
	if err == nil || !strings.Contains(err.Error(), `"Arbitration"`) || errors.Is(err, order.ErrEventSignature) || errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("an unknown disputeStatus: %v, want an error naming it", err)
	}
	// A deadline that is not a time is refused too.
	if _, err := g.ReceiveEvents(disputeBatch(t, key, item(EventChargeback, "DP00000000000X02"), with("defensePeriodEndsAt", "soon")), nil); err == nil {
		t.Error("a defensePeriodEndsAt that is not a time: no error")
	}
	// Signed with another key, or changed after signing: refused.
	if _, err := g.ReceiveEvents(disputeBatch(t, other, item(EventChargeback, "DP00000000000X03"), with()), nil); !errors.Is(err, order.ErrEventSignature) {
		t.Errorf("signed with another key: %v, want order.ErrEventSignature", err)
	}
	tampered := strings.Replace(string(disputeBatch(t, key, item(EventChargeback, "DP00000000000X04"), with())), `"value":1000`, `"value":10`, 1)
	if _, err := g.ReceiveEvents([]byte(tampered), nil); !errors.Is(err, order.ErrEventSignature) {
		t.Errorf("an amount changed after signing: %v, want order.ErrEventSignature", err)
	}
	// Without the payment's pspReference, it is about nothing.
	bare := item(EventChargeback, "DP00000000000X05")
	bare.OriginalReference = ""
	if _, err := g.ReceiveEvents(disputeBatch(t, key, bare, with()), nil); err == nil || errors.Is(err, order.ErrEventSignature) {
		t.Errorf("a chargeback without originalReference: %v, want an error of its own", err)
	}
}

// TestNotADisputeGateway: Adyen's disputes are read from notifications
// only (dispute.go says why).
func TestNotADisputeGateway(t *testing.T) {
	t.Parallel()
	var g any = newGateway(t, "https://127.0.0.1:1", &MemoryLog{}, time.Now)
	if _, ok := g.(order.DisputeGateway); ok {
		t.Error("the Adyen adapter claims to read disputes, which its API cannot")
	}
}
