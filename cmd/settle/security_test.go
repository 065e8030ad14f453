package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeRefusesExposedPlaintext: outside dev, a non-loopback listener
// needs TLS and API keys unless --insecure says otherwise.
func TestServeRefusesExposedPlaintext(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres:///unused", "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "k"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "0.0.0.0:50051"}, "refusing to serve plaintext"},
		{[]string{"serve", "--listen", "10.1.2.3:50051"}, "refusing to serve plaintext"},
		{[]string{"serve", "--listen", "0.0.0.0:50051", "--tls-cert", "c.pem"}, "tls-cert and tls-key go together"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tt.args, mapEnv(env), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
	// With --insecure it gets past the check (and fails later, on the database).
	var out bytes.Buffer
	err := run(context.Background(), []string{"serve", "--listen", "0.0.0.0:0", "--insecure"}, mapEnv(env), &out, &out)
	if err == nil || strings.Contains(err.Error(), "refusing") {
		t.Errorf("--insecure: %v, want a database error, not a refusal", err)
	}
}

func TestAPIKeysAreHashesNotKeys(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres:///unused", "SETTLE_REFPSP_URL": "http://127.0.0.1:1",
		"SETTLE_API_KEYS": "sk_live_raw_key_pasted_by_mistake default checkout web"}
	var out bytes.Buffer
	err := run(context.Background(), []string{"serve"}, mapEnv(env), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("got %v, want a refusal explaining keys are configured as SHA-256 hashes", err)
	}
	if strings.Contains(err.Error(), "sk_live_raw_key") || strings.Contains(out.String(), "sk_live_raw_key") {
		t.Fatalf("the error echoes the key: %v", err)
	}
}
