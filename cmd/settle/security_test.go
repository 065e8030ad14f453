package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/grpcapi"
)

// TestServeTransportAndKeyRefusals: plaintext off loopback needs
// --plaintext (TLS terminated by a proxy); serving without API keys needs
// --no-api-keys, which is refused off loopback whatever else is set.
func TestServeTransportAndKeyRefusals(t *testing.T) {
	t.Parallel()
	keys := grpcapi.HashKey("sk_test_checkout") + " default checkout web"
	for _, tt := range []struct {
		name string
		args []string
		keys string
		want string // "" for no refusal: serve goes on and fails on the database
	}{
		{"plaintext on 0.0.0.0", []string{"--listen", "0.0.0.0:0"}, keys, "refusing to serve plaintext"},
		{"plaintext on a private address", []string{"--listen", "10.1.2.3:50051"}, keys, "refusing to serve plaintext"},
		{"half a TLS pair", []string{"--listen", "0.0.0.0:0", "--tls-cert", "c.pem"}, keys, "tls-cert and tls-key go together"},
		{"--plaintext and TLS", []string{"--listen", "0.0.0.0:0", "--plaintext", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, keys, "plaintext and tls-cert"},
		{"--plaintext with keys", []string{"--listen", "0.0.0.0:0", "--plaintext"}, keys, ""},
		{"--plaintext without keys", []string{"--listen", "0.0.0.0:0", "--plaintext"}, "", "no API keys"},
		{"--no-api-keys on 0.0.0.0", []string{"--listen", "0.0.0.0:0", "--plaintext", "--no-api-keys"}, "", "refusing --no-api-keys on 0.0.0.0:0"},
		{"--no-api-keys on [::]", []string{"--listen", "[::]:0", "--plaintext", "--no-api-keys"}, "", "refusing --no-api-keys"},
		{"--no-api-keys on a private address", []string{"--listen", "10.1.2.3:50051", "--plaintext", "--no-api-keys"}, "", "refusing --no-api-keys"},
		{"no keys on loopback", []string{"--listen", "127.0.0.1:0"}, "", "no API keys"},
		{"--no-api-keys on loopback", []string{"--listen", "127.0.0.1:0", "--no-api-keys"}, "", ""},
		{"--no-api-keys on localhost", []string{"--listen", "localhost:0", "--no-api-keys"}, "", ""},
		{"--no-api-keys and keys", []string{"--listen", "127.0.0.1:0", "--no-api-keys"}, keys, "choose one"},
		{"keys on loopback", []string{"--listen", "127.0.0.1:0"}, keys, ""},
		// The JSON listener is the same API: held to the same rules.
		{"JSON plaintext on 0.0.0.0", []string{"--listen", "127.0.0.1:0", "--json-listen", "0.0.0.0:0"}, keys, "refusing to serve plain HTTP on json-listen 0.0.0.0:0"},
		{"JSON --plaintext with keys", []string{"--listen", "127.0.0.1:0", "--json-listen", "0.0.0.0:0", "--plaintext"}, keys, ""},
		{"JSON --no-api-keys on 0.0.0.0", []string{"--listen", "127.0.0.1:0", "--json-listen", "0.0.0.0:0", "--plaintext", "--no-api-keys"}, "", "refusing --no-api-keys on 0.0.0.0:0"},
		{"JSON not host:port", []string{"--listen", "127.0.0.1:0", "--json-listen", "8091"}, keys, "json-listen \"8091\" is not host:port"},
		{"JSON on loopback", []string{"--listen", "127.0.0.1:0", "--json-listen", "127.0.0.1:0"}, keys, ""},
		{"console plaintext on 0.0.0.0", []string{"--listen", "127.0.0.1:0", "--console-listen", "0.0.0.0:0"}, keys, "refusing to serve the console over plain HTTP on console-listen 0.0.0.0:0"},
		{"console --plaintext with keys", []string{"--listen", "127.0.0.1:0", "--console-listen", "0.0.0.0:0", "--plaintext"}, keys, ""},
		{"console --no-api-keys", []string{"--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--no-api-keys"}, "", "refusing console-listen with --no-api-keys"},
		{"console not host:port", []string{"--listen", "127.0.0.1:0", "--console-listen", "8092"}, keys, "console-listen \"8092\" is not host:port"},
		{"console on loopback", []string{"--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0"}, keys, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/unused?connect_timeout=1", "SETTLE_REFPSP_URL": "http://127.0.0.1:1",
				"SETTLE_REFPSP_KEY": "k", "SETTLE_API_KEYS": tt.keys}
			var out bytes.Buffer
			// With no database, serve waits for one until its context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := run(ctx, append([]string{"serve"}, tt.args...), mapEnv(env), &out, &out)
			if tt.want == "" {
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(out.String(), "waiting for a writable database") {
					t.Fatalf("%v: %v, want no refusal, and then waiting for the database", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v: %v, want a refusal with %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestDevRefusesPlaintextOffLoopback: settle dev serves plaintext, so a
// non-loopback --listen needs --plaintext, refused before anything starts.
func TestDevRefusesPlaintextOffLoopback(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(context.Background(), []string{"dev", "--listen", "0.0.0.0:0"}, mapEnv(nil), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "refusing to serve plaintext") {
		t.Fatalf("dev on 0.0.0.0: %v, want a refusal to serve plaintext", err)
	}
	if err := run(context.Background(), []string{"dev", "--no-api-keys"}, mapEnv(nil), &out, &out); err == nil || !strings.Contains(err.Error(), "no-api-keys") {
		t.Fatalf("dev --no-api-keys: %v, want an unknown flag: dev makes its own keys", err)
	}
}

// TestPprofOnlyOnLoopback: the profiler serves goroutine dumps, so --pprof
// is refused unless the metrics listener is on loopback, by every command
// that has it.
func TestPprofOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/unused?connect_timeout=1", "SETTLE_REFPSP_URL": "http://127.0.0.1:1",
		"SETTLE_REFPSP_KEY": "k", "SETTLE_NO_API_KEYS": "true"}
	for _, cmd := range []string{"serve", "reconcile"} {
		for _, tt := range []struct {
			metrics string
			refused bool
		}{
			{"0.0.0.0:9090", true},
			{":9090", true},
			{"10.1.2.3:9090", true},
			{"", true}, // no metrics listener: nothing for the profiler to be on
			{"127.0.0.1:0", false},
			{"[::1]:0", false},
		} {
			var out bytes.Buffer
			// Not refused, the command waits for the database until the
			// context ends.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := run(ctx, []string{cmd, "--pprof", "--metrics-listen", tt.metrics}, mapEnv(env), &out, &out)
			cancel()
			refused := err != nil && strings.Contains(err.Error(), "refusing --pprof")
			if refused != tt.refused {
				t.Errorf("%s --pprof --metrics-listen %q: %v, refused %v, want %v", cmd, tt.metrics, err, refused, tt.refused)
			}
		}
	}
}

// TestDuplicateKeyHashRefused: one key configured for two merchants or two
// roles would act as whichever line came last; serve refuses it at start,
// naming the lines but not the whole hash.
func TestDuplicateKeyHashRefused(t *testing.T) {
	t.Parallel()
	hash := grpcapi.HashKey("sk_test_shared")
	for name, keys := range map[string]string{
		"two merchants": hash + " merchant-a checkout a-web; " + hash + " merchant-b checkout b-web",
		"two roles":     hash + " merchant-a checkout a-web; " + hash + " merchant-a ops a-ops",
		"upper case":    hash + " merchant-a checkout a-web; " + strings.ToUpper(hash) + " merchant-a ops a-ops",
	} {
		env := map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/unused?connect_timeout=1", "SETTLE_REFPSP_URL": "http://127.0.0.1:1",
			"SETTLE_REFPSP_KEY": "k", "SETTLE_API_KEYS": keys}
		var out bytes.Buffer
		err := run(context.Background(), []string{"serve"}, mapEnv(env), &out, &out)
		if err == nil || !strings.Contains(err.Error(), "the same key") || !strings.Contains(err.Error(), "a-web") {
			t.Errorf("%s: %v, want a refusal naming the duplicate", name, err)
			continue
		}
		if msg := strings.ToLower(err.Error() + out.String()); strings.Contains(msg, hash[:16]) {
			t.Errorf("%s: the refusal prints the hash: %v", name, err)
		}
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
