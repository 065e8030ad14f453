package adyen

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/order"
)

const testPSP = "QFQTPCQ8HXSKGK82"

// TestChargeOutcomes checks every row of the package documentation's
// table of Charge's outcomes against a server answering as Adyen does.
func TestChargeOutcomes(t *testing.T) {
	received := func(path string) func(s *scripted, req order.ChargeRequest) {
		return func(s *scripted, req order.ChargeRequest) {
			s.on(path, http.StatusCreated, map[string]any{"pspReference": "MOD0000000000001", "status": "received",
				"merchantAccount": testMerchant, "paymentPspReference": testPSP})
		}
	}
	payment := func(body map[string]any) map[string]any {
		if _, ok := body["pspReference"]; !ok {
			body["pspReference"] = testPSP
		}
		return body
	}
	tests := []struct {
		name string
		// answer is /payments's answer; more sets the others.
		status   int
		answer   map[string]any
		more     func(s *scripted, req order.ChargeRequest)
		capture  order.CaptureMode
		offline  bool
		want     order.Outcome
		code     string
		chargeID string
		// paths are the requests the adapter must send, in order.
		paths []string
		err   bool
	}{
		{name: "authorised, manual capture", status: 200, answer: payment(map[string]any{"resultCode": "Authorised"}),
			capture: order.CaptureManual, want: order.OutcomeSucceeded, chargeID: testPSP, paths: []string{"/payments"}},
		{name: "authorised, automatic: captured at once", status: 200, answer: payment(map[string]any{"resultCode": "Authorised"}),
			more: received("/payments/" + testPSP + "/captures"), want: order.OutcomeSucceeded, chargeID: testPSP,
			paths: []string{"/payments", "/payments/" + testPSP + "/captures"}},
		{name: "authorised, automatic, the capture unanswered", status: 200, answer: payment(map[string]any{"resultCode": "Authorised"}),
			more: func(s *scripted, _ order.ChargeRequest) {
				s.on("/payments/"+testPSP+"/captures", 500, map[string]any{"status": 500})
			},
			want: order.OutcomeUnknown, chargeID: testPSP, paths: []string{"/payments", "/payments/" + testPSP + "/captures"}, err: true},
		{name: "partially authorised: released, declined", status: 200,
			answer: payment(map[string]any{"resultCode": "PartiallyAuthorised", "amount": map[string]any{"currency": "GBP", "value": 500}}),
			more:   received("/payments/" + testPSP + "/cancels"), want: order.OutcomeDeclined, code: "partially_authorised", chargeID: testPSP,
			paths: []string{"/payments", "/payments/" + testPSP + "/cancels"}},
		{name: "refused, authentication required (38)", status: 200,
			answer: payment(map[string]any{"resultCode": "Refused", "refusalReasonCode": "38", "refusalReason": "Authentication required"}),
			want:   order.OutcomeDeclined, code: order.DeclineAuthenticationRequired, chargeID: testPSP, paths: []string{"/payments"}},
		{name: "refused, not enough balance (12)", status: 200,
			answer: payment(map[string]any{"resultCode": "Refused", "refusalReasonCode": "12", "refusalReason": "Not enough balance"}),
			want:   order.OutcomeDeclined, code: "not_enough_balance", chargeID: testPSP, paths: []string{"/payments"}},
		{name: "refused without a code", status: 200, answer: payment(map[string]any{"resultCode": "Refused"}),
			want: order.OutcomeDeclined, code: "refused", chargeID: testPSP, paths: []string{"/payments"}},
		{name: "error", status: 200, answer: payment(map[string]any{"resultCode": "Error", "refusalReason": "Acquirer Error"}),
			want: order.OutcomeDeclined, code: "error", chargeID: testPSP, paths: []string{"/payments"}},
		{name: "cancelled", status: 200, answer: payment(map[string]any{"resultCode": "Cancelled"}),
			want: order.OutcomeDeclined, code: "cancelled", chargeID: testPSP, paths: []string{"/payments"}},
		{name: "redirect shopper", status: 200, answer: map[string]any{"resultCode": "RedirectShopper",
			"action": map[string]any{"type": "redirect", "url": "https://acs.example/challenge", "method": "GET"}},
			want: order.OutcomeRequiresAction, paths: []string{"/payments"}},
		{name: "challenge shopper", status: 200, answer: map[string]any{"resultCode": "ChallengeShopper",
			"action": map[string]any{"type": "threeDS2", "url": "https://acs.example/3ds2"}},
			want: order.OutcomeRequiresAction, paths: []string{"/payments"}},
		{name: "identify shopper without a url", status: 200, answer: map[string]any{"resultCode": "IdentifyShopper",
			"action": map[string]any{"type": "threeDS2", "token": "abc"}}, want: order.OutcomeUnknown, paths: []string{"/payments"}, err: true},
		{name: "redirect shopper, merchant-initiated: technical cancel", status: 200, offline: true,
			answer: map[string]any{"resultCode": "RedirectShopper", "action": map[string]any{"type": "redirect", "url": "https://acs.example/c"}},
			more: func(s *scripted, req order.ChargeRequest) {
				s.on("/cancels", http.StatusCreated, map[string]any{"pspReference": "MOD0000000000002", "status": "received",
					"merchantAccount": testMerchant, "paymentReference": req.AttemptID})
			},
			want: order.OutcomeDeclined, code: order.DeclineAuthenticationRequired, paths: []string{"/payments", "/cancels"}},
		{name: "redirect shopper, merchant-initiated, the technical cancel lost", status: 200, offline: true,
			answer: map[string]any{"resultCode": "RedirectShopper", "action": map[string]any{"type": "redirect", "url": "https://acs.example/c"}},
			more:   func(s *scripted, _ order.ChargeRequest) { s.on("/cancels", 500, map[string]any{"status": 500}) },
			want:   order.OutcomeUnknown, code: order.DeclineAuthenticationRequired, paths: []string{"/payments", "/cancels"}, err: true},
		{name: "pending", status: 200, answer: payment(map[string]any{"resultCode": "Pending"}), want: order.OutcomeUnknown,
			chargeID: testPSP, paths: []string{"/payments"}, err: true},
		{name: "received", status: 200, answer: payment(map[string]any{"resultCode": "Received"}), want: order.OutcomeUnknown,
			chargeID: testPSP, paths: []string{"/payments"}, err: true},
		{name: "another payment's answer", status: 200, answer: payment(map[string]any{"resultCode": "Authorised", "merchantReference": "other"}),
			want: order.OutcomeUnknown, paths: []string{"/payments"}, err: true},
		{name: "another amount", status: 200,
			answer: payment(map[string]any{"resultCode": "Authorised", "amount": map[string]any{"currency": "GBP", "value": 1251}}),
			want:   order.OutcomeUnknown, paths: []string{"/payments"}, err: true},
		{name: "400", status: 400, answer: map[string]any{"status": 400, "errorCode": "702", "errorType": "validation"},
			want: order.OutcomeRefused, paths: []string{"/payments"}, err: true},
		{name: "401", status: 401, answer: map[string]any{"status": 401, "errorCode": "000", "errorType": "security"},
			want: order.OutcomeRefused, paths: []string{"/payments"}, err: true},
		{name: "403", status: 403, answer: map[string]any{"status": 403, "errorCode": "010", "errorType": "security"},
			want: order.OutcomeRefused, paths: []string{"/payments"}, err: true},
		{name: "422 validation", status: 422, answer: map[string]any{"status": 422, "errorCode": "14_030", "errorType": "validation",
			"message": "Return URL is missing."}, want: order.OutcomeRefused, paths: []string{"/payments"}, err: true},
		{name: "422 request in progress (704)", status: 422, answer: map[string]any{"status": 422, "errorCode": "704",
			"errorType": "validation", "message": "request already processed or in progress"}, want: order.OutcomeUnknown,
			paths: []string{"/payments"}, err: true},
		{name: "409", status: 409, answer: map[string]any{"status": 409, "errorCode": "704"}, want: order.OutcomeUnknown,
			paths: []string{"/payments"}, err: true},
		{name: "429", status: 429, answer: map[string]any{"status": 429}, want: order.OutcomeUnknown, paths: []string{"/payments"}, err: true},
		{name: "500", status: 500, answer: map[string]any{"status": 500, "errorType": "internal"}, want: order.OutcomeUnknown,
			paths: []string{"/payments"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t)
			req := chargeRequest(time.Now())
			req.Capture = tt.capture
			if tt.offline {
				req.CustomerPresent, req.ReturnURL = false, ""
			}
			s.on("/payments", tt.status, tt.answer)
			if tt.more != nil {
				tt.more(s, req)
			}
			g := newGateway(t, s.srv.URL, &MemoryLog{}, time.Now)
			res, err := g.Charge(t.Context(), req)
			if res.Outcome != tt.want || res.DeclineCode != tt.code || res.ChargeID != tt.chargeID || (err != nil) != tt.err {
				t.Fatalf("Charge = %+v, %v; want %s %q, charge id %q, error %t", res, err, tt.want, tt.code, tt.chargeID, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), testAPIKey) {
				t.Errorf("the error quotes the API key: %v", err)
			}
			got := s.requests()
			if len(got) != len(tt.paths) {
				t.Fatalf("requests %+v, want to %v", got, tt.paths)
			}
			for i, p := range tt.paths {
				if got[i].Path != p || got[i].APIKey != testAPIKey {
					t.Errorf("request %d to %s with key %q, want %s", i, got[i].Path, got[i].APIKey, p)
				}
			}
			switch tt.want {
			case order.OutcomeRequiresAction:
				if res.NextAction.RedirectURL == "" || res.NextAction.RedirectURL != tt.answer["action"].(map[string]any)["url"] {
					t.Errorf("next action %+v, want the action's url", res.NextAction)
				}
			case order.OutcomeSucceeded:
				if tt.capture == order.CaptureManual {
					h := res.Hold
					if h == nil || h.State != order.HoldOpen || h.AuthorizedMinor != 1250 || h.CapturedMinor != 0 ||
						!h.CaptureBefore.Equal(req.CreatedAt.Add(DefaultAuthorizationLifetime)) {
						t.Errorf("hold %+v, want open, 1250 held, capture_before the attempt's creation + %s", h, DefaultAuthorizationLifetime)
					}
				} else if res.Hold != nil {
					t.Errorf("an automatic charge reports a hold %+v", res.Hold)
				}
			case order.OutcomeDeclined, order.OutcomeNotSent, order.OutcomeRefused, order.OutcomeUnknown, order.OutcomeNotFound:
			}
		})
	}
}

// TestPaymentRequest checks what /payments is sent, for a customer at the
// checkout and for a merchant-initiated charge, and the keys and
// references of the capture that follows.
func TestPaymentRequest(t *testing.T) {
	s := newScripted(t)
	s.on("/payments", 200, map[string]any{"pspReference": testPSP, "resultCode": "Authorised"})
	s.on("/payments/"+testPSP+"/captures", 201, map[string]any{"pspReference": "MOD0000000000001", "status": "received",
		"merchantAccount": testMerchant, "paymentPspReference": testPSP})
	g := newGateway(t, s.srv.URL, &MemoryLog{}, time.Now)
	present := chargeRequest(time.Now())
	present.Customer = "shopper-42"
	offline := chargeRequest(time.Now())
	offline.CustomerPresent, offline.ReturnURL = false, ""
	offline.Amount = order.Money{Currency: "ISK", AmountMinor: 990}
	for _, req := range []order.ChargeRequest{present, offline} {
		if res, err := g.Charge(t.Context(), req); err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Charge = %+v, %v", res, err)
		}
	}
	got := s.requests()
	if len(got) != 4 {
		t.Fatalf("requests %+v, want two payments and two captures", got)
	}
	check := func(r seen, req order.ChargeRequest, value float64, shopper, interaction, model, returnURL string) {
		t.Helper()
		b := r.Body
		pm, _ := b["paymentMethod"].(map[string]any)
		am, _ := b["amount"].(map[string]any)
		ad, _ := b["additionalData"].(map[string]any)
		if r.Key != req.AttemptID || b["reference"] != req.AttemptID || b["merchantAccount"] != testMerchant ||
			pm["type"] != "scheme" || pm["storedPaymentMethodId"] != req.PaymentMethod ||
			am["value"] != value || am["currency"] != req.Amount.Currency || ad["manualCapture"] != "true" ||
			b["shopperReference"] != shopper || b["shopperInteraction"] != interaction ||
			b["recurringProcessingModel"] != model || b["returnUrl"] != returnURL {
			t.Errorf("payment request %+v (key %s)", b, r.Key)
		}
	}
	check(got[0], present, 1250, "shopper-42", "Ecommerce", "CardOnFile", present.ReturnURL)
	// ISK: whole krónur in ISO 4217, hundredths at Adyen; no customer: the order.
	check(got[2], offline, 99000, offline.OrderID, "ContAuth", "UnscheduledCardOnFile", DefaultReturnURL)
	capt := got[1]
	if capt.Key != present.AttemptID+":capture" || capt.Body["reference"] != present.AttemptID+":capture" ||
		capt.Body["amount"].(map[string]any)["value"] != 1250.0 {
		t.Errorf("capture %+v (key %s); want key and reference <attempt>:capture, the whole amount", capt.Body, capt.Key)
	}
}

// TestChargeNotSent: a refused connection and an amount Adyen cannot
// carry are not sent; a call past its timeout is unknown.
func TestChargeNotSent(t *testing.T) {
	g := newGateway(t, "http://"+gatewaytest.ClosedAddr(t), &MemoryLog{}, time.Now)
	if res, err := g.Charge(t.Context(), chargeRequest(time.Now())); res.Outcome != order.OutcomeNotSent || err == nil {
		t.Errorf("Charge to a closed port = %+v, %v; want not sent", res, err)
	}
	req := chargeRequest(time.Now())
	req.Amount = order.Money{Currency: "IDR", AmountMinor: 150050}
	res, err := g.Charge(t.Context(), req)
	var verr *order.ValidationError
	if res.Outcome != order.OutcomeNotSent || !errors.As(err, &verr) {
		t.Errorf("Charge of 1500.50 IDR = %+v, %v; want not sent, a validation error", res, err)
	}

	s := newScripted(t)
	s.answers["/v71/payments"] = func(w http.ResponseWriter, _ map[string]any) { time.Sleep(3 * time.Second) }
	slow := newGateway(t, s.srv.URL, &MemoryLog{}, time.Now, func(c *Config) { c.Timeout = 300 * time.Millisecond; c.NoShowHorizon = time.Second })
	start := time.Now()
	if res, err := slow.Charge(t.Context(), chargeRequest(time.Now())); res.Outcome != order.OutcomeUnknown || err == nil {
		t.Errorf("Charge past the timeout = %+v, %v; want unknown", res, err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("Charge took %s past its 300ms timeout", took)
	}
}

// TestAmounts checks the conversions Adyen's own minor units need.
func TestAmounts(t *testing.T) {
	for _, tt := range []struct {
		m     order.Money
		value int64
		ok    bool
	}{
		{order.Money{Currency: "GBP", AmountMinor: 1250}, 1250, true},
		{order.Money{Currency: "JPY", AmountMinor: 500}, 500, true},
		{order.Money{Currency: "KWD", AmountMinor: 1234}, 1234, true},
		{order.Money{Currency: "ISK", AmountMinor: 12}, 1200, true},
		{order.Money{Currency: "CLP", AmountMinor: 12}, 1200, true},
		{order.Money{Currency: "CVE", AmountMinor: 1200}, 12, true},
		{order.Money{Currency: "IDR", AmountMinor: 1200}, 12, true},
		{order.Money{Currency: "IDR", AmountMinor: 1201}, 0, false},
		{order.Money{Currency: "XAU", AmountMinor: 1}, 0, false},
		{order.Money{Currency: "CLF", AmountMinor: 1}, 0, false},
		{order.Money{Currency: "ZZZ", AmountMinor: 1}, 0, false},
	} {
		v, err := adyenValue(tt.m)
		if (err == nil) != tt.ok || v != tt.value {
			t.Errorf("adyenValue(%s) = %d, %v; want %d, ok %t", tt.m, v, err, tt.value, tt.ok)
		}
		if tt.ok && minorAmount(tt.m.Currency, v) != tt.m.AmountMinor {
			t.Errorf("minorAmount(%s, %d) = %d, want %d back", tt.m.Currency, v, minorAmount(tt.m.Currency, v), tt.m.AmountMinor)
		}
	}
}

// TestCompleteAction checks the return from 3-D Secure: what /payments/details
// is sent, an automatic order captured at once, but never past the
// no-show horizon unless it waits for the shopper, and a missing
// redirectResult not sent.
func TestCompleteAction(t *testing.T) {
	s := newScripted(t)
	s.on("/payments/details", 200, map[string]any{"pspReference": testPSP, "resultCode": "Authorised"})
	s.on("/payments/"+testPSP+"/captures", 201, map[string]any{"pspReference": "MOD0000000000001", "status": "received",
		"merchantAccount": testMerchant, "paymentPspReference": testPSP})
	g := newGateway(t, s.srv.URL, &MemoryLog{}, time.Now)
	req := chargeRequest(time.Now())
	req.CustomerPresent = false // CompleteAction knows the shopper is back
	res, err := g.CompleteAction(t.Context(), req, "X6XtfGC3!Y...")
	if err != nil || res.Outcome != order.OutcomeSucceeded || res.ChargeID != testPSP {
		t.Fatalf("CompleteAction = %+v, %v; want succeeded, captured", res, err)
	}
	got := s.requests()
	if len(got) != 2 || got[0].Path != "/payments/details" || got[0].Key != req.AttemptID+":details" ||
		got[0].Body["details"].(map[string]any)["redirectResult"] != "X6XtfGC3!Y..." || got[1].Path != "/payments/"+testPSP+"/captures" {
		t.Fatalf("requests %+v; want the details under <attempt>:details, then the capture", got)
	}

	late := chargeRequest(time.Now().Add(-2 * testHorizon))
	res, err = g.CompleteAction(t.Context(), late, "X6XtfGC3!Y...")
	if err == nil || res.Outcome != order.OutcomeUnknown || res.ChargeID != testPSP {
		t.Errorf("CompleteAction past the horizon = %+v, %v; want unknown, not captured", res, err)
	}
	if n := len(s.requests()); n != 3 {
		t.Errorf("%d requests; want the late details alone, no capture", n)
	}
	// An attempt Settle holds as waiting for the shopper is never
	// technically canceled before it expires: past the horizon it is
	// captured all the same, but not once it expired.
	waiting := late
	waiting.AwaitingAction = true
	res, err = g.CompleteAction(t.Context(), waiting, "X6XtfGC3!Y...")
	if err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Errorf("CompleteAction of a waiting attempt past the horizon = %+v, %v; want succeeded, captured", res, err)
	}
	if got := s.requests(); len(got) != 5 || got[4].Path != "/payments/"+testPSP+"/captures" {
		t.Errorf("requests %+v; want the details, then the capture", got)
	}
	expired := waiting
	expired.CancelAwaitingAction = true
	if res, err = g.CompleteAction(t.Context(), expired, "X6XtfGC3!Y..."); err == nil || res.Outcome != order.OutcomeUnknown {
		t.Errorf("CompleteAction of an expired attempt past the horizon = %+v, %v; want unknown, not captured", res, err)
	}
	if n := len(s.requests()); n != 6 {
		t.Errorf("%d requests; want the expired attempt's details alone, no capture", n)
	}
	if res, err := g.CompleteAction(t.Context(), req, ""); res.Outcome != order.OutcomeNotSent || err == nil {
		t.Errorf("CompleteAction without a redirectResult = %+v, %v; want not sent", res, err)
	}
}

// TestRefusalsCascade checks that the cascade table speaks Adyen's
// refusals as this adapter reports them: each refusalReasonCode comes to
// the decision its documented meaning calls for.
func TestRefusalsCascade(t *testing.T) {
	t.Parallel()
	want := map[string]order.Cascade{
		"2": order.CascadeStop, "3": order.CascadeStop, "4": order.CascadeNext, "5": order.CascadeNever,
		"6": order.CascadeStop, "9": order.CascadeNext, "11": order.CascadeStop, "12": order.CascadeStop,
		"14": order.CascadeNever, "20": order.CascadeNever, "21": order.CascadeNext, "22": order.CascadeNever,
		"24": order.CascadeStop, "25": order.CascadeNever, "26": order.CascadeNever, "31": order.CascadeNever,
		"38": order.CascadeStepUp,
	}
	for code, w := range want {
		dc := refusalCode(code, "")
		if got := order.CascadeAfter(order.OutcomeDeclined, dc); got != w {
			t.Errorf("refusalReasonCode %s (%q): cascade %q, want %q", code, dc, got, w)
		}
	}
}
