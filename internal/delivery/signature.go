package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the header that carries a delivery's signatures.
const SignatureHeader = "Settle-Signature"

// Sign returns the HMAC-SHA256, in hex, of "<unix seconds of t>.<body>"
// under secret.
func Sign(secret string, t time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(t.Unix(), 10) + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// SignatureValue is the Settle-Signature header of body sent at t: the
// timestamp, then one v1 signature per secret, so that a merchant rotating
// its secret accepts deliveries signed with either while both are
// configured.
func SignatureValue(secrets []string, t time.Time, body []byte) string {
	var b strings.Builder
	b.WriteString("t=" + strconv.FormatInt(t.Unix(), 10))
	for _, s := range secrets {
		b.WriteString(",v1=" + Sign(s, t, body))
	}
	return b.String()
}

// Verify checks a Settle-Signature header against body and any of
// secrets, refusing a timestamp more than tolerance away from now. It is
// the snippet in docs/api.md for Settle's own receivers (settle dev, the chaos
// harness).
func Verify(header string, body []byte, secrets []string, tolerance time.Duration) error {
	var (
		ts   int64
		sigs []string
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == 0 {
		return errors.New("no timestamp")
	}
	if age := time.Since(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return errors.New("timestamp outside the tolerance")
	}
	for _, secret := range secrets {
		want, _ := hex.DecodeString(Sign(secret, time.Unix(ts, 0), body))
		for _, s := range sigs {
			if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return errors.New("no valid signature")
}

// The Standard Webhooks headers (https://www.standardwebhooks.com), sent
// beside Settle-Signature: the event id (the same on every try), the time
// of this try, and one "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per
// secret, separated by spaces while a secret is rotated.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// standardKey is the key a secret signs the Standard Webhooks signature
// with: for a secret in the spec's form, "whsec_" and the base64 of at
// least MinSecretLen bytes, those bytes; for any other secret, its own
// bytes (what the spec's libraries take as a raw key), so that secrets
// configured before this header keep working unchanged.
func standardKey(secret string) []byte {
	if s, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err := base64.StdEncoding.DecodeString(s); err == nil && len(key) >= MinSecretLen {
			return key
		}
	}
	return []byte(secret)
}

// StandardSignature is the webhook-signature header of the event id with
// body sent at t: one v1 signature per secret.
func StandardSignature(secrets []string, id string, t time.Time, body []byte) string {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		mac := hmac.New(sha256.New, standardKey(s))
		mac.Write([]byte(id + "." + strconv.FormatInt(t.Unix(), 10) + "."))
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}
