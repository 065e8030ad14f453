package refpsp

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

var (
	testCapture = order.CaptureRequest{CaptureID: "cap_1", OrderID: "ord_1", ChargeAttemptID: "att_1",
		Amount: order.Money{Currency: "GBP", AmountMinor: 500}, Final: true}
	captureBefore = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
)

// captureBody returns a capture object for testCapture with the given
// changes, of an authorization of 1250 with 500 captured.
func captureBody(status string, change func(map[string]any)) []byte {
	m := map[string]any{"id": "cp_1", "reference": "cap_1", "charge_reference": "att_1", "status": status,
		"amount": 500, "currency": "GBP", "final": true,
		"charge": map[string]any{"id": "ch_1", "reference": "att_1", "status": "captured", "amount": 1250, "currency": "GBP",
			"amount_captured": 500, "capture_before": captureBefore}}
	if change != nil {
		change(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestClassifyCapture: a capture's answer is succeeded or declined only
// when it is the capture asked for and fits its status code; a reused
// reference (409) and 5xx are unknown; a succeeded one carries the hold.
func TestClassifyCapture(t *testing.T) {
	captured := &order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 500, CaptureBefore: captureBefore}
	tests := []struct {
		name    string
		ex      exchange
		want    order.Result
		wantErr bool
	}{
		{"201 succeeded", exchange{connected: true, status: 201, body: captureBody("succeeded", nil)},
			order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "cp_1", Hold: captured}, false},
		{"402 failed", exchange{connected: true, status: 402, body: captureBody("failed", func(m map[string]any) { m["failure_code"] = FailureTooLarge })},
			order.Result{Outcome: order.OutcomeDeclined, ChargeID: "cp_1", DeclineCode: FailureTooLarge}, false},
		{"402 without a failure code", exchange{connected: true, status: 402, body: captureBody("failed", nil)},
			order.Result{Outcome: order.OutcomeDeclined, ChargeID: "cp_1", DeclineCode: "unspecified"}, false},
		{"201 failed", exchange{connected: true, status: 201, body: captureBody("failed", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"402 succeeded", exchange{connected: true, status: 402, body: captureBody("succeeded", nil)},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 of another capture", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { m["reference"] = "cap_2" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 of another charge", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { m["charge_reference"] = "att_2" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 for another amount", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { m["amount"] = 600 })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 not final", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { m["final"] = false })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 with no authorization", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { delete(m, "charge") })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 with no id", exchange{connected: true, status: 201, body: captureBody("succeeded", func(m map[string]any) { m["id"] = "" })},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"201 garbage", exchange{connected: true, status: 201, body: []byte("<html>")},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"409 reference reused", exchange{connected: true, status: 409},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"404 no such charge", exchange{connected: true, status: 404},
			order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "rejected_404"}, true},
		{"429 rate limited", exchange{connected: true, status: 429},
			order.Result{Outcome: order.OutcomeNotSent}, true},
		{"500", exchange{connected: true, status: 500},
			order.Result{Outcome: order.OutcomeUnknown}, true},
		{"no answer", exchange{connected: true},
			order.Result{Outcome: order.OutcomeUnknown}, true},
	}
	for _, tt := range tests {
		got, err := classifyWrite(tt.ex, "capture", func(b []byte) (order.Result, error) { return captureResult(b, testCapture) })
		if got.Outcome != tt.want.Outcome || got.ChargeID != tt.want.ChargeID || got.DeclineCode != tt.want.DeclineCode ||
			(got.Hold == nil) != (tt.want.Hold == nil) || (got.Hold != nil && *got.Hold != *tt.want.Hold) || (err != nil) != tt.wantErr {
			t.Errorf("%s: %+v (hold %+v), %v; want %+v (hold %+v), error %t", tt.name, got, got.Hold, err, tt.want, tt.want.Hold, tt.wantErr)
		}
	}
}

// TestChargeCaptureModes: an authorization answers a manual order with
// its hold, never an automatic one (money held is not money taken); a
// charge made at once answers a manual order as a hold captured in full.
func TestChargeCaptureModes(t *testing.T) {
	manual := testReq
	manual.Capture = order.CaptureManual
	authorized := body(StatusAuthorized, func(m map[string]any) { m["amount_capturable"] = 1250; m["capture_before"] = captureBefore })

	res, err := classifyCharge(manual, exchange{connected: true, status: 201, body: authorized})
	want := order.Hold{State: order.HoldOpen, AuthorizedMinor: 1250, CaptureBefore: captureBefore}
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold == nil || *res.Hold != want {
		t.Errorf("manual charge answered authorized = %+v (hold %+v), %v; want succeeded with %+v", res, res.Hold, err, want)
	}
	for _, status := range []string{StatusAuthorized, StatusCaptured, StatusVoided, StatusExpired} {
		b := body(status, nil)
		if res, err := classifyCharge(testReq, exchange{connected: true, status: 201, body: b}); res.Outcome != order.OutcomeUnknown || err == nil {
			t.Errorf("automatic charge answered %s = %+v, %v; want unknown", status, res, err)
		}
		if res, err := classifyLookup(testReq, exchange{connected: true, status: 200, body: b}); res.Outcome != order.OutcomeUnknown || err == nil {
			t.Errorf("lookup of an automatic charge answered %s = %+v, %v; want unknown", status, res, err)
		}
	}
	res, err = classifyLookup(manual, exchange{connected: true, status: 200, body: body(StatusSucceeded, nil)})
	want = order.Hold{State: order.HoldCaptured, AuthorizedMinor: 1250, CapturedMinor: 1250}
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold == nil || *res.Hold != want {
		t.Errorf("manual lookup answered succeeded = %+v (hold %+v), %v; want %+v", res, res.Hold, err, want)
	}
	if res, err := classifyCharge(testReq, exchange{connected: true, status: 201, body: body(StatusSucceeded, nil)}); err != nil || res.Hold != nil {
		t.Errorf("automatic charge = %+v, %v; want no hold", res, err)
	}
}
