package adyen

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// notified is the event ReceiveEvents makes of a notification about ref.
func notified(g *Gateway, code, psp, original, ref string, success bool, value int64, reason string) order.GatewayEvent {
	s := "false"
	if success {
		s = "true"
	}
	it := &notificationItem{EventCode: code, PSPReference: psp, OriginalReference: original, MerchantAccountCode: testMerchant,
		MerchantReference: ref, Amount: amount{Currency: "GBP", Value: value}, Success: s, Reason: reason,
		EventDate: "2026-12-02T02:00:00+01:00"}
	return g.event(it, eventAbout[code])
}

// TestLookupOutcomes checks every row of the package documentation's
// Lookup table: what the recorded notifications say, and what Lookup
// sends to Adyen for it.
func TestLookupOutcomes(t *testing.T) {
	const captures = "/payments/" + testPSP + "/captures"
	now := time.Now()
	young, old := now.Add(-testHorizon/2), now.Add(-2*testHorizon)
	tests := []struct {
		name    string
		created time.Time
		capture order.CaptureMode
		cancel  bool
		// awaiting says Settle holds the attempt as REQUIRES_ACTION.
		awaiting bool
		// notYet says the error is order.ErrNotYetKnown.
		notYet bool
		// events are the notifications recorded about the attempt.
		events func(g *Gateway, id string) []order.GatewayEvent
		want   order.Outcome
		code   string
		hold   order.HoldState
		paths  []string
	}{
		{name: "technical cancel succeeded", created: old, want: order.OutcomeNotFound,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventTechnicalCancel, "TC00000000000001", testPSP, id, true, 1250, "")}
			}},
		{name: "technical cancel after an authorisation", created: old, want: order.OutcomeNotFound,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventTechnicalCancel, "TC00000000000001", testPSP, id+":cancel", true, 1250, "")}
			}},
		{name: "technical cancel beside a capture", created: old, want: order.OutcomeUnknown,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", true, 1250, ""),
					notified(g, EventTechnicalCancel, "TC00000000000001", testPSP, id, true, 1250, "")}
			}},
		{name: "captured, the AUTHORISATION lost", created: old, want: order.OutcomeSucceeded,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", true, 1250, "")}
			}},
		{name: "authorisation refused", created: young, want: order.OutcomeDeclined, code: "cvc_declined",
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, false, 1250, "CVC Declined")}
			}},
		{name: "authorised for less", created: young, want: order.OutcomeDeclined, code: "partially_authorised",
			paths: []string{"/payments/" + testPSP + "/cancels"},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 500, "")}
			}},
		{name: "authorised, manual", created: old, capture: order.CaptureManual, want: order.OutcomeSucceeded, hold: order.HoldOpen,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "authorised, manual, expired", created: old, capture: order.CaptureManual, want: order.OutcomeSucceeded, hold: order.HoldExpired,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventExpire, testPSP, "", id, true, 1250, "")}
			}},
		{name: "manual, expired, its authorisation lost", created: old, capture: order.CaptureManual, want: order.OutcomeSucceeded,
			hold: order.HoldExpired,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventExpire, testPSP, "", id, true, 1250, "")}
			}},
		{name: "authorised, automatic, captured", created: old, want: order.OutcomeSucceeded,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", true, 1250, "")}
			}},
		{name: "authorised, automatic, capture failed", created: young, want: order.OutcomeUnknown,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventCaptureFailed, "CP00000000000001", testPSP, id+":capture", true, 1250, "Capture Failed")}
			}},
		{name: "authorised, automatic, captured, then CAPTURE_FAILED", created: old, want: order.OutcomeUnknown,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", true, 1250, ""),
					notified(g, EventCaptureFailed, "CP00000000000001", testPSP, id+":capture", true, 1250, "Capture Failed")}
			}},
		{name: "authorised, automatic, capture refused, then made", created: old, want: order.OutcomeSucceeded,
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, ""),
					notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", false, 1250, "Refused"),
					notified(g, EventCapture, "CP00000000000001", testPSP, id+":capture", true, 1250, "")}
			}},
		{name: "authorised, automatic, young: the capture replayed", created: young, want: order.OutcomeSucceeded, paths: []string{captures},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "authorised, automatic, past the horizon: never captured", created: old, want: order.OutcomeUnknown, paths: []string{"/cancels"},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "nothing yet, young", created: young, want: order.OutcomeUnknown, notYet: true},
		{name: "nothing, waiting for the shopper", created: old, awaiting: true, want: order.OutcomeRequiresAction},
		{name: "waiting for the shopper, expired: technical cancel", created: old, awaiting: true, cancel: true, want: order.OutcomeUnknown, paths: []string{"/cancels"}},
		{name: "authorised after the challenge expired: technical cancel, never captured", created: young, awaiting: true, cancel: true,
			want: order.OutcomeUnknown, paths: []string{"/cancels"},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "authorised, manual, after the challenge expired: technical cancel, no hold", created: young, awaiting: true, cancel: true,
			capture: order.CaptureManual, want: order.OutcomeUnknown, paths: []string{"/cancels"},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "authorised late after a challenge: captured", created: old, awaiting: true, want: order.OutcomeSucceeded, paths: []string{captures},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventAuthorisation, testPSP, "", id, true, 1250, "")}
			}},
		{name: "nothing, past the horizon: technical cancel", created: old, want: order.OutcomeUnknown, paths: []string{"/cancels"}},
		{name: "nothing, waiting for nobody: technical cancel", created: young, cancel: true, want: order.OutcomeUnknown, paths: []string{"/cancels"}},
		{name: "technical cancel failed", created: old, want: order.OutcomeUnknown, paths: []string{"/cancels"},
			events: func(g *Gateway, id string) []order.GatewayEvent {
				return []order.GatewayEvent{notified(g, EventTechnicalCancel, "TC00000000000001", "", id, false, 1250, "")}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t)
			modified := map[string]any{"pspReference": "MOD0000000000001", "status": "received", "merchantAccount": testMerchant}
			s.on(captures, http.StatusCreated, modified)
			s.on("/payments/"+testPSP+"/cancels", http.StatusCreated, modified)
			s.on("/cancels", http.StatusCreated, modified)
			log := &MemoryLog{}
			g := newGateway(t, s.srv.URL, log, func() time.Time { return now })
			req := chargeRequest(tt.created)
			req.Capture, req.CancelAwaitingAction, req.AwaitingAction = tt.capture, tt.cancel, tt.awaiting
			if tt.events != nil {
				log.Record(tt.events(g, req.AttemptID)...)
			}
			res, err := g.Lookup(t.Context(), req)
			definite := tt.want != order.OutcomeUnknown
			if res.Outcome != tt.want || res.DeclineCode != tt.code || (err == nil) != definite {
				t.Fatalf("Lookup = %+v, %v; want %s %q", res, err, tt.want, tt.code)
			}
			if errors.Is(err, order.ErrNotYetKnown) != tt.notYet {
				t.Errorf("Lookup's error %v: ErrNotYetKnown %t, want %t", err, !tt.notYet, tt.notYet)
			}
			if tt.want == order.OutcomeSucceeded && res.ChargeID != testPSP {
				t.Errorf("Lookup's charge id %q, want the payment's %s", res.ChargeID, testPSP)
			}
			if tt.hold != "" {
				h := res.Hold
				if h == nil || h.State != tt.hold || h.AuthorizedMinor != 1250 || !h.CaptureBefore.Equal(tt.created.Add(DefaultAuthorizationLifetime)) {
					t.Errorf("hold %+v, want %s, 1250 held, capture_before as Charge reports it", h, tt.hold)
				}
			}
			got := s.requests()
			if len(got) != len(tt.paths) {
				t.Fatalf("Lookup sent %+v, want %v", got, tt.paths)
			}
			for i, p := range tt.paths {
				if got[i].Path != p {
					t.Errorf("request %d to %s, want %s", i, got[i].Path, p)
				}
			}
			for _, r := range got {
				switch r.Path {
				case "/cancels":
					if r.Key != req.AttemptID+":cancel" || r.Body["paymentReference"] != req.AttemptID ||
						r.Body["reference"] != req.AttemptID+":cancel" || r.Body["merchantAccount"] != testMerchant {
						t.Errorf("technical cancel %+v (key %s)", r.Body, r.Key)
					}
				case captures:
					if r.Key != req.AttemptID+":capture" {
						t.Errorf("the replayed capture's key %s, want Charge's <attempt>:capture", r.Key)
					}
				}
			}
		})
	}
}

// TestModifications checks the table of modify.go: each call received is
// unknown with the modification's pspReference, its refusals, and its
// lookups from the notifications.
func TestModifications(t *testing.T) {
	const mod = "MOD0000000000001"
	received := map[string]any{"pspReference": mod, "status": "received", "merchantAccount": testMerchant, "paymentPspReference": testPSP}
	s := newScripted(t)
	s.on("/payments/"+testPSP+"/captures", 201, received)
	s.on("/payments/"+testPSP+"/cancels", 201, received)
	s.on("/payments/"+testPSP+"/refunds", 201, received)
	s.on("/payments/REFUSED000000000/captures", 422, map[string]any{"status": 422, "errorCode": "167", "errorType": "validation",
		"message": "Original pspReference required for this operation"})
	s.on("/payments/DENIED0000000000/refunds", 403, map[string]any{"status": 403, "errorCode": "010", "errorType": "security"})
	s.on("/payments/INFLIGHT00000000/cancels", 422, map[string]any{"status": 422, "errorCode": "704", "errorType": "validation"})
	log := &MemoryLog{}
	g := newGateway(t, s.srv.URL, log, time.Now)
	attempt := order.NewID()
	log.Record(notified(g, EventAuthorisation, testPSP, "", attempt, true, 1250, ""))
	gbp := func(v int64) order.Money { return order.Money{Currency: "GBP", AmountMinor: v} }
	ctx := t.Context()

	capt := order.CaptureRequest{CaptureID: order.NewID(), ChargeAttemptID: attempt, ChargeID: testPSP, Amount: gbp(500), Final: true}
	if res, err := g.Capture(ctx, capt); res.Outcome != order.OutcomeUnknown || res.ChargeID != mod || err == nil {
		t.Errorf("Capture = %+v, %v; want unknown (received) with the capture's pspReference", res, err)
	}
	if res, err := g.LookupCapture(ctx, capt); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("LookupCapture before its notification = %+v, %v; want an error", res, err)
	}
	log.Record(notified(g, EventCapture, mod, testPSP, capt.CaptureID, true, 500, ""))
	res, err := g.LookupCapture(ctx, capt)
	if h := res.Hold; err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != mod || h == nil ||
		h.State != order.HoldCaptured || h.AuthorizedMinor != 1250 || h.CapturedMinor != 500 {
		t.Errorf("LookupCapture = %+v (hold %+v), %v; want succeeded, captured 500 of 1250", res, res.Hold, err)
	}
	notFinal := capt
	notFinal.CaptureID, notFinal.Final = order.NewID(), false
	if res, err := g.Capture(ctx, notFinal); res.Outcome != order.OutcomeDeclined || res.DeclineCode != declineNoMulticapture {
		t.Errorf("Capture not final = %+v, %v; want declined %s", res, err, declineNoMulticapture)
	}
	refused := capt
	refused.CaptureID, refused.ChargeID = order.NewID(), "REFUSED000000000"
	if res, err := g.Capture(ctx, refused); res.Outcome != order.OutcomeDeclined || res.DeclineCode != "rejected_167" || err == nil {
		t.Errorf("Capture refused 422 = %+v, %v; want declined rejected_167", res, err)
	}
	failed := capt
	failed.CaptureID = order.NewID()
	log.Record(notified(g, EventCapture, "MOD0000000000009", testPSP, failed.CaptureID, false, 500, "Insufficient balance on payment"))
	if res, err := g.LookupCapture(ctx, failed); res.Outcome != order.OutcomeDeclined || res.DeclineCode != "insufficient_balance_on_payment" {
		t.Errorf("LookupCapture of a failed capture = %+v, %v; want declined with its reason", res, err)
	}

	void := order.VoidRequest{VoidID: order.NewID(), ChargeAttemptID: attempt, ChargeID: testPSP}
	if res, err := g.Void(ctx, void); res.Outcome != order.OutcomeUnknown || res.ChargeID != mod || err == nil {
		t.Errorf("Void = %+v, %v; want unknown (received)", res, err)
	}
	log.Record(notified(g, EventCancellation, mod, testPSP, void.VoidID, true, 1250, ""))
	if res, err := g.LookupVoid(ctx, void); err != nil || res.Outcome != order.OutcomeSucceeded || res.Hold == nil ||
		res.Hold.State != order.HoldVoided {
		t.Errorf("LookupVoid = %+v, %v; want succeeded, voided", res, err)
	}
	inFlight := order.VoidRequest{VoidID: order.NewID(), ChargeID: "INFLIGHT00000000"}
	if res, err := g.Void(ctx, inFlight); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("Void answered 704 = %+v, %v; want unknown", res, err)
	}

	refund := order.RefundRequest{RefundID: order.NewID(), ChargeAttemptID: attempt, ChargeID: testPSP, Amount: gbp(300)}
	if res, err := g.Refund(ctx, refund); res.Outcome != order.OutcomeUnknown || res.ChargeID != mod || err == nil {
		t.Errorf("Refund = %+v, %v; want unknown (received)", res, err)
	}
	log.Record(notified(g, EventRefund, mod, testPSP, refund.RefundID, true, 300, ""))
	if res, err := g.LookupRefund(ctx, refund); err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != mod {
		t.Errorf("LookupRefund = %+v, %v; want succeeded", res, err)
	}
	// A refund the scheme fails after Adyen reported it done.
	log.Record(notified(g, EventRefundFailed, mod, testPSP, refund.RefundID, true, 300, "Refund Failed"))
	if res, err := g.LookupRefund(ctx, refund); err != nil || res.Outcome != order.OutcomeDeclined || res.DeclineCode != "refund_failed" {
		t.Errorf("LookupRefund after REFUND_FAILED = %+v, %v; want declined refund_failed", res, err)
	}
	denied := order.RefundRequest{RefundID: order.NewID(), ChargeID: "DENIED0000000000", Amount: gbp(300)}
	if res, err := g.Refund(ctx, denied); res.Outcome != order.OutcomeNotSent || err == nil {
		t.Errorf("Refund answered 403 = %+v, %v; want not sent", res, err)
	}

	for _, r := range s.requests() {
		if r.Path == "/payments/"+testPSP+"/captures" && (r.Key != capt.CaptureID || r.Body["reference"] != capt.CaptureID) {
			t.Errorf("capture key %s reference %v; want the capture id", r.Key, r.Body["reference"])
		}
		if r.Path == "/payments/"+testPSP+"/refunds" && (r.Key != refund.RefundID || r.Body["amount"].(map[string]any)["value"] != 300.0) {
			t.Errorf("refund key %s body %+v; want the refund id, 300", r.Key, r.Body)
		}
	}
}
