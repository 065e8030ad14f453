package delivery_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/settlepay/settle/internal/delivery"
)

// The merchant's side, as docs/api.md documents it: this block, between its
// markers, is in docs/api.md word for word (TestDocSnippet).

// --- snippet: verify ---

// VerifySettleSignature checks a Settle webhook delivery: header is its
// Settle-Signature header, body the request body exactly as received, and
// secret your signing secret. Deliveries older than tolerance are refused,
// so that a captured one cannot be replayed later.
func VerifySettleSignature(header string, body []byte, secret string, tolerance time.Duration) error {
	var ts int64
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == 0 {
		return errors.New("settle webhook: no timestamp")
	}
	if age := time.Since(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return errors.New("settle webhook: timestamp outside the tolerance")
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("settle webhook: no valid signature")
}

// --- end snippet ---

// TestDocSnippet: the verification snippet of docs/api.md is the one tested
// here.
func TestDocSnippet(t *testing.T) {
	src, err := os.ReadFile("verify_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(src), "// --- snippet: verify ---\n\n")
	snippet, _, _ := strings.Cut(rest, "\n// --- end snippet ---")
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if snippet == "" || !strings.Contains(string(doc), snippet) {
		t.Fatal("docs/api.md does not hold the verification snippet of verify_test.go word for word")
	}
}

// TestSignatureRoundTrip: a header signed with two secrets (a rotation)
// verifies with either; another secret, another body, or an old
// timestamp does not.
func TestSignatureRoundTrip(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"order.paid"}`)
	h := delivery.SignatureValue([]string{"old-secret-0123456789", "new-secret-0123456789"}, time.Now(), body)
	for _, s := range []string{"old-secret-0123456789", "new-secret-0123456789"} {
		if err := VerifySettleSignature(h, body, s, 5*time.Minute); err != nil {
			t.Errorf("secret %s: %v", s, err)
		}
	}
	if err := VerifySettleSignature(h, body, "other-secret-0123456789", 5*time.Minute); err == nil {
		t.Error("verified with a secret it was not signed with")
	}
	if err := VerifySettleSignature(h, []byte(`{"id":"evt_1","type":"order.canceled"}`), "old-secret-0123456789", 5*time.Minute); err == nil {
		t.Error("verified another body")
	}
	old := delivery.SignatureValue([]string{"old-secret-0123456789"}, time.Now().Add(-time.Hour), body)
	if err := VerifySettleSignature(old, body, "old-secret-0123456789", 5*time.Minute); err == nil {
		t.Error("verified an hour-old delivery")
	}
}

func TestParseEndpoints(t *testing.T) {
	eps, err := delivery.ParseEndpoints("m1 https://example.com/hook secret-one-0123456789,secret-two-0123456789; m2 http://127.0.0.1:9/h secret-three-0123456")
	if err != nil || len(eps) != 2 || len(eps[0].Secrets) != 2 || eps[1].URL != "http://127.0.0.1:9/h" {
		t.Fatalf("%+v %v", eps, err)
	}
	for _, bad := range []string{
		"m1 http://example.com/hook secret-one-0123456789", // plaintext off loopback
		"m1 https://example.com/hook short",                // short secret
		"m1 https://example.com/hook",                      // no secret
		"m1 https://a/h secret-one-0123456789; m1 https://b/h secret-one-0123456789",
	} {
		_, err := delivery.ParseEndpoints(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
		} else if strings.Contains(err.Error(), "secret-one-0123456789") || strings.Contains(err.Error(), " short") {
			t.Errorf("%q: error quotes a secret: %v", bad, err)
		}
	}
}

// TestStandardSignature: the webhook-signature of a delivery signed with
// two secrets (a rotation: one in the spec's whsec_ form, one plain)
// verifies with either through the spec's own library; another secret,
// another body or another event id does not.
func TestStandardSignature(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, 24)
	spec := "whsec_" + base64.StdEncoding.EncodeToString(key)
	plain := "plain-secret-0123456789"
	body := []byte(`{"id":"evt_1","type":"order.paid"}`)
	now := time.Now()
	h := http.Header{}
	h.Set(delivery.HeaderWebhookID, "evt_1")
	h.Set(delivery.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(delivery.HeaderWebhookSignature, delivery.StandardSignature([]string{spec, plain}, "evt_1", now, body))
	if got := strings.Count(h.Get(delivery.HeaderWebhookSignature), "v1,"); got != 2 {
		t.Fatalf("%d signatures, want one per secret: %q", got, h.Get(delivery.HeaderWebhookSignature))
	}
	bySpec, err := standardwebhooks.NewWebhook(spec)
	if err != nil {
		t.Fatal(err)
	}
	byPlain, err := standardwebhooks.NewWebhookRaw([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	other, err := standardwebhooks.NewWebhookRaw([]byte("other-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	for name, wh := range map[string]*standardwebhooks.Webhook{"whsec_ secret": bySpec, "plain secret": byPlain} {
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := wh.Verify([]byte(`{"id":"evt_1","type":"order.canceled"}`), h); err == nil {
			t.Errorf("%s: verified another body", name)
		}
	}
	if err := other.Verify(body, h); err == nil {
		t.Error("verified with a secret it was not signed with")
	}
	h.Set(delivery.HeaderWebhookID, "evt_2")
	if err := bySpec.Verify(body, h); err == nil {
		t.Error("verified under another event id")
	}
}
