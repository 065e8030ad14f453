package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
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
