package adyen

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
)

// nodeDir holds the Node script that signs and validates notifications
// with the HmacValidator of Adyen's own Node library (@adyen/api-library,
// pinned in its package.json and package-lock.json; .ci/run installs it
// with npm ci).
const nodeDir = "testdata/node"

// The HMAC keys of the samples: Adyen's documented example key, and
// another.
const (
	sampleKey = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	otherKey  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// adyenHMAC runs the Node script on items with key: for each, the
// signature Adyen's library computes and whether it accepts the item's
// hmacSignature. Without node or the installed library it skips, or
// fails when CI=true.
func adyenHMAC(t *testing.T, key string, items []*notificationItem) []struct {
	Signature string `json:"signature"`
	Valid     bool   `json:"valid"`
} {
	t.Helper()
	missing := func(msg string) {
		msg += ": install it with `npm ci` in internal/gateway/adyen/" + nodeDir
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@adyen", "api-library")); err != nil {
		missing("@adyen/api-library is not installed")
	}
	in, err := json.Marshal(map[string]any{"key": key, "items": items})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, "hmac.js")
	cmd.Dir = nodeDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node hmac.js: %v\n%s", err, stderr.String())
	}
	var res []struct {
		Signature string `json:"signature"`
		Valid     bool   `json:"valid"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(items) {
		t.Fatalf("node hmac.js answered %q (%v); want one result per item", out, err)
	}
	return res
}

// sampleItems are notifications of every code the adapter reads, with and
// without originalReference and reason, and with characters the signing
// string separates with.
func sampleItems() []*notificationItem {
	return []*notificationItem{
		{PSPReference: "7914073381342284", MerchantAccountCode: "TestMerchant", MerchantReference: "TestPayment-1407325143704",
			Amount: amount{Currency: "EUR", Value: 1130}, EventCode: EventAuthorisation, Success: "true"},
		{PSPReference: "QFQTPCQ8HXSKGK82", OriginalReference: "9913140798220028", MerchantAccountCode: "SettleGB",
			MerchantReference: "0193a0b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b:capture", Amount: amount{Currency: "GBP", Value: 1250},
			EventCode: EventCapture, Success: "true", EventDate: "2026-12-02T01:00:00+01:00"},
		{PSPReference: "8515208516304269", OriginalReference: "8313547924770610", MerchantAccountCode: "SettleGB",
			MerchantReference: "ref with spaces: and colons", Amount: amount{Currency: "JPY", Value: 0},
			EventCode: EventTechnicalCancel, Success: "false", Reason: "Refused"},
		{PSPReference: "ABCDEF0123456789", OriginalReference: "9913140798220028", MerchantAccountCode: "SettleGB",
			MerchantReference: "r-1", Amount: amount{Currency: "KWD", Value: 12345}, EventCode: EventRefundFailed, Success: "true",
			Reason: "Refund Failed"},
	}
}

// TestSignaturesAgreeWithAdyensLibrary checks the adapter's signer and
// verifier against Adyen's own HmacValidator: the same signature for
// every sample, and the same verdict on valid, tampered and wrongly keyed
// ones.
func TestSignaturesAgreeWithAdyensLibrary(t *testing.T) {
	key, err := CheckHMACKey(sampleKey)
	if err != nil {
		t.Fatal(err)
	}
	items := sampleItems()
	// Adyen's documented example signature of the first sample.
	if got, want := sign(key, items[0]), "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0="; got != want {
		t.Fatalf("signature of Adyen's example = %s, want %s", got, want)
	}
	theirs := adyenHMAC(t, sampleKey, items)
	for i, it := range items {
		if got := sign(key, it); got != theirs[i].Signature {
			t.Errorf("item %d: the adapter signs %s, Adyen's library %s", i, got, theirs[i].Signature)
		}
		// The fake Adyen's signer, which signs the conformance suite's
		// notifications, must agree too.
		fake := adyenfake.Sign(key, adyenfake.SigningString(it.PSPReference, it.OriginalReference, it.MerchantAccountCode,
			it.MerchantReference, it.Amount.Value, it.Amount.Currency, it.EventCode, it.Success))
		if fake != theirs[i].Signature {
			t.Errorf("item %d: the fake signs %s, Adyen's library %s", i, fake, theirs[i].Signature)
		}
	}

	// Valid, tampered and wrongly keyed samples: both must agree.
	other, _ := CheckHMACKey(otherKey)
	var cases []*notificationItem
	var names []string
	for i, it := range sampleItems() {
		valid := *it
		valid.AdditionalData = map[string]any{"hmacSignature": sign(key, it)}
		tampered := valid
		tampered.Amount.Value++
		success := valid
		success.Success = map[string]string{"true": "false", "false": "true"}[valid.Success]
		reference := valid
		reference.MerchantReference += "x"
		wrongKey := *it
		wrongKey.AdditionalData = map[string]any{"hmacSignature": sign(other, it)}
		unsigned := *it
		junk := *it
		junk.AdditionalData = map[string]any{"hmacSignature": "bm90IGEgc2lnbmF0dXJl"}
		for name, c := range map[string]notificationItem{"valid": valid, "amount tampered": tampered, "success flipped": success,
			"reference tampered": reference, "wrong key": wrongKey, "unsigned": unsigned, "junk signature": junk} {
			cases = append(cases, &c)
			names = append(names, name+" "+string(rune('0'+i)))
		}
	}
	theirs = adyenHMAC(t, sampleKey, cases)
	for i, c := range cases {
		ours := verified([][]byte{key}, c)
		if ours != theirs[i].Valid {
			t.Errorf("%s: the adapter says valid=%t, Adyen's library %t", names[i], ours, theirs[i].Valid)
		}
		if want := names[i][:len("valid ")] == "valid "; ours != want {
			t.Errorf("%s: valid=%t, want %t", names[i], ours, want)
		}
	}
	// While a key is rotated, either key verifies.
	rotated := *items[1]
	rotated.AdditionalData = map[string]any{"hmacSignature": sign(other, items[1])}
	if !verified([][]byte{key, other}, &rotated) || verified([][]byte{key}, &rotated) {
		t.Error("a notification signed with the second of two keys must verify with both configured, and not with the first alone")
	}
}
