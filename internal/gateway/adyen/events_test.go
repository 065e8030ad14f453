package adyen

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// batch is a notification batch of items, each signed with key (nil:
// unsigned).
func batch(t *testing.T, key []byte, items ...notificationItem) []byte {
	t.Helper()
	var nr struct {
		Live              string `json:"live"`
		NotificationItems []struct {
			Item notificationItem `json:"NotificationRequestItem"`
		} `json:"notificationItems"`
	}
	nr.Live = "false"
	for _, it := range items {
		if key != nil {
			it.AdditionalData = map[string]any{"hmacSignature": sign(key, &it), "paymentMethodVariant": "visa"}
		}
		nr.NotificationItems = append(nr.NotificationItems, struct {
			Item notificationItem `json:"NotificationRequestItem"`
		}{it})
	}
	b, err := json.Marshal(nr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReceiveEvents(t *testing.T) {
	key, _ := CheckHMACKey(sampleKey)
	other, _ := CheckHMACKey(otherKey)
	g := newGateway(t, "https://127.0.0.1:1", &MemoryLog{}, time.Now, func(c *Config) {
		c.NotifyUser, c.NotifyPassword = "adyen", "s3cret"
	})
	auth := map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("adyen:s3cret"))}}
	attempt := order.NewID()
	item := func(code, psp, original, ref, success string, currency string, value int64, reason string) notificationItem {
		return notificationItem{EventCode: code, PSPReference: psp, OriginalReference: original, MerchantAccountCode: testMerchant,
			MerchantReference: ref, Amount: amount{Currency: currency, Value: value}, Success: success, Reason: reason,
			EventDate: "2026-12-02T02:00:00+01:00"}
	}
	// The last item is another merchant account's: left out.
	foreign := item(EventAuthorisation, "OT00000000000001", "", "x", "true", "EUR", 1, "")
	foreign.MerchantAccountCode = "SomeoneElse"
	body := batch(t, key,
		item(EventAuthorisation, testPSP, "", attempt, "true", "ISK", 99000, "074543:1111:10/2030"),
		item(EventCapture, "CP00000000000001", testPSP, attempt+":capture", "true", "ISK", 99000, ""),
		item("REPORT_AVAILABLE", "RP00000000000001", "", "report.csv", "true", "EUR", 0, ""),
		item(EventRefundFailed, "RF00000000000001", testPSP, "refund-1", "true", "ISK", 5000, "Refund Failed"),
		foreign)
	evs, err := g.ReceiveEvents(body, auth)
	if err != nil || len(evs) != 3 {
		t.Fatalf("ReceiveEvents = %+v, %v; want the three items Settle reads", evs, err)
	}
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	want := []order.GatewayEvent{
		{Gateway: "adyen", ID: "AUTHORISATION:" + testPSP + ":true", Type: EventAuthorisation, ObjectID: testPSP, AttemptID: attempt,
			ChargeID: testPSP, Succeeded: true, Outcome: order.OutcomeSucceeded, Amount: order.Money{Currency: "ISK", AmountMinor: 990}},
		{Gateway: "adyen", ID: "CAPTURE:CP00000000000001:true", Type: EventCapture, ObjectID: "CP00000000000001", AttemptID: attempt,
			ChargeID: testPSP, Succeeded: true, Outcome: order.OutcomeSucceeded, Amount: order.Money{Currency: "ISK", AmountMinor: 990}},
		{Gateway: "adyen", ID: "REFUND_FAILED:RF00000000000001:true", Type: EventRefundFailed, ObjectID: "RF00000000000001",
			AttemptID: "refund-1", ChargeID: testPSP, About: order.EventAboutRefund, Outcome: order.OutcomeDeclined,
			DeclineCode: "refund_failed", FailedLater: true, Amount: order.Money{Currency: "ISK", AmountMinor: 50}},
	}
	for i := range want {
		if !evs[i].OccurredAt.Equal(at) {
			t.Errorf("event %d occurred at %s, want %s", i, evs[i].OccurredAt, at)
		}
		evs[i].OccurredAt = time.Time{}
		if evs[i] != want[i] {
			t.Errorf("event %d = %+v\nwant %+v", i, evs[i], want[i])
		}
	}
	if ct, b := g.Acknowledge(); string(b) != "[accepted]" || !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Acknowledge = %q, %q; want [accepted]", ct, b)
	}

	refusedSig := func(what string, body []byte, header map[string][]string) {
		t.Helper()
		if _, err := g.ReceiveEvents(body, header); !errors.Is(err, order.ErrEventSignature) {
			t.Errorf("%s: ReceiveEvents error %v, want ErrEventSignature", what, err)
		}
	}
	ok := batch(t, key, item(EventAuthorisation, testPSP, "", attempt, "false", "GBP", 1250, "Refused"))
	refusedSig("no basic auth", ok, nil)
	refusedSig("wrong password", ok, map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("adyen:guess"))}})
	refusedSig("wrong key", batch(t, other, item(EventAuthorisation, testPSP, "", attempt, "true", "GBP", 1250, "")), auth)
	refusedSig("unsigned", batch(t, nil, item(EventAuthorisation, testPSP, "", attempt, "true", "GBP", 1250, "")), auth)
	refusedSig("not json", []byte("{"), auth)
	refusedSig("no items", []byte(`{"live":"false","notificationItems":[]}`), auth)
	// One item unsigned refuses the batch: nothing of it is trusted.
	mixed := batch(t, key, item(EventAuthorisation, testPSP, "", attempt, "true", "GBP", 1250, ""))
	tampered := strings.Replace(string(mixed), `"value":1250`, `"value":1`, 1)
	refusedSig("tampered", []byte(tampered), auth)

	if evs, err := g.ReceiveEvents(ok, auth); err != nil || len(evs) != 1 || evs[0].Outcome != order.OutcomeDeclined ||
		evs[0].DeclineCode != "refused" || evs[0].Succeeded {
		t.Errorf("a refused AUTHORISATION = %+v, %v; want declined refused, no money moved", evs, err)
	}
	ignored := batch(t, key, item("REPORT_AVAILABLE", "RP00000000000001", "", "report.csv", "true", "EUR", 0, ""))
	if _, err := g.ReceiveEvents(ignored, auth); !errors.Is(err, order.ErrEventIgnored) {
		t.Errorf("a batch of ignored codes: error %v, want ErrEventIgnored", err)
	}

	// While keys rotate, either verifies.
	rotating := newGateway(t, "https://127.0.0.1:1", &MemoryLog{}, time.Now, func(c *Config) { c.HMACKeys = []string{sampleKey, otherKey} })
	if _, err := rotating.ReceiveEvents(batch(t, other, item(EventAuthorisation, testPSP, "", attempt, "true", "GBP", 1250, "")), nil); err != nil {
		t.Errorf("a batch signed with the second key: %v", err)
	}
	none := newGateway(t, "https://127.0.0.1:1", &MemoryLog{}, time.Now, func(c *Config) { c.HMACKeys = nil })
	if _, err := none.ReceiveEvents(ok, nil); !errors.Is(err, order.ErrEventSignature) {
		t.Errorf("with no HMAC key: error %v, want ErrEventSignature", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	good := Config{BaseURL: TestBaseURL, APIKey: testAPIKey, MerchantAccount: testMerchant, HMACKeys: []string{sampleKey},
		Events: &MemoryLog{}, NoShowHorizon: time.Minute}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good) = %v", err)
	}
	for _, tt := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"plain http", func(c *Config) { c.BaseURL = "http://checkout-test.adyen.com/v71" }, "must be https"},
		{"no version", func(c *Config) { c.BaseURL = "https://checkout-test.adyen.com/" }, "must end in /v71"},
		{"another version", func(c *Config) { c.BaseURL = "https://checkout-test.adyen.com/v70" }, "must end in /v71"},
		{"credentials", func(c *Config) { c.BaseURL = "https://user:" + testAPIKey + "@checkout-test.adyen.com/v71" }, "credentials"},
		{"not a URL", func(c *Config) { c.BaseURL = "checkout-test.adyen.com" }, "absolute https"},
		{"no API key", func(c *Config) { c.APIKey = "" }, "API key is required"},
		{"API key with a newline", func(c *Config) { c.APIKey = testAPIKey + "\n" }, "API key must not contain"},
		{"no merchant account", func(c *Config) { c.MerchantAccount = "" }, "merchant account is required"},
		{"key not hex", func(c *Config) { c.HMACKeys = []string{sampleKey, "zz" + sampleKey[2:]} }, "HMAC key 2 of 2: is not hexadecimal"},
		{"key short", func(c *Config) { c.HMACKeys = []string{"abcd"} }, "HMAC key 1 of 1: has 4 hexadecimal digits"},
		{"user without password", func(c *Config) { c.NotifyUser = "adyen" }, "both a user and a password"},
		{"no events", func(c *Config) { c.Events = nil }, "recorded notifications (Events) are required"},
		{"no horizon", func(c *Config) { c.NoShowHorizon = 0 }, "no-show horizon 0s must exceed the timeout"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout -1s must not be negative"},
		{"bad return URL", func(c *Config) { c.ReturnURL = "/return" }, "return URL"},
		{"plain http reports", func(c *Config) { c.ReportURL = "http://ca-live.adyen.com/reports/download/MerchantAccount/x" }, "report URL"},
		{"reports with credentials", func(c *Config) {
			c.ReportURL = "https://report:" + testAPIKey + "@ca-live.adyen.com/reports/download/MerchantAccount/x"
		}, "no credentials"},
		{"report user without password", func(c *Config) { c.ReportUser = "report@Company.Settle" }, "report user's basic authentication"},
		{"negative report timeout", func(c *Config) { c.ReportTimeout = -time.Second }, "report timeout"},
	} {
		cfg := good
		tt.mod(&cfg)
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New = %v, want an error saying %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), testAPIKey) || strings.Contains(err.Error(), sampleKey[2:]) {
			t.Errorf("%s: the error quotes a secret: %v", tt.name, err)
		}
	}
	loop := good
	loop.BaseURL = "http://127.0.0.1:8080/v71"
	if _, err := New(loop); err != nil {
		t.Errorf("plain http on loopback: %v", err)
	}
	if got := LiveBaseURL("1797a841fbb37ca7-AdyenDemo"); got != "https://1797a841fbb37ca7-AdyenDemo-checkout-live.adyenpayments.com/checkout/v71" {
		t.Errorf("LiveBaseURL = %s", got)
	}
	live := good
	live.BaseURL = LiveBaseURL("1797a841fbb37ca7-AdyenDemo")
	if _, err := New(live); err != nil {
		t.Errorf("the live URL: %v", err)
	}
}
