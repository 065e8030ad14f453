package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// TestDocsConfigTable keeps the operator's guide's configuration table
// equal to what the binary knows.
func TestDocsConfigTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(doc), "<!-- config:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- config:end -->")
	if !ok1 || !ok2 {
		t.Fatal("docs/operations.md has no config:begin/config:end markers")
	}
	var want bytes.Buffer
	printReferenceTable(&want)
	if table != want.String() {
		t.Fatalf("docs/operations.md's configuration table is stale; replace it with the output of `settle config -markdown`:\n%s", want.String())
	}
}

// TestWebhookSecretsAreCheckedAtStart: an inbound webhook secret too short
// (refpsp: under 32 bytes) or not of Stripe's form stops the server at
// start, with an error naming the setting and not the secret; the secrets
// `settle dev` makes pass.
func TestWebhookSecretsAreCheckedAtStart(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_WEBHOOK_LISTEN": "127.0.0.1:0",
		"SETTLE_REFPSP_WEBHOOK_SECRETS": "a", "STRIPE_WEBHOOK_SECRETS": "whsec_" + strings.Repeat("A", 32) + ",sk_test_notawebhooksecret"}
	var out bytes.Buffer
	err := run(context.Background(), []string{"serve"}, mapEnv(env), &out, &out)
	if err == nil {
		t.Fatal("serve started with a one-byte refpsp secret and a Stripe API key for a signing secret")
	}
	for _, want := range []string{"configuration:", "refpsp-webhook-secrets (SETTLE_REFPSP_WEBHOOK_SECRETS): secret 1 of 1", "at least 32",
		"stripe-webhook-secrets (STRIPE_WEBHOOK_SECRETS): secret 2 of 2", `starts with "whsec_"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret 1 of 2") || strings.Contains(err.Error(), "sk_test_notawebhooksecret") {
		t.Errorf("error %q refuses the valid Stripe secret or holds the refused one", err)
	}

	err = run(context.Background(), []string{"dev", "--refpsp-webhook-secrets", "short"}, mapEnv(nil), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "refpsp-webhook-secrets") {
		t.Fatalf("dev with a short refpsp secret: %v, want an error naming refpsp-webhook-secrets", err)
	}
	for range 100 {
		if err := refpsp.CheckEventSecret(newDevKey("whsec_dev_")); err != nil {
			t.Fatalf("settle dev's own refpsp secret: %v", err)
		}
	}
}

// TestSimAuthorizationLifetimeMustBePositive: gatewaysim and dev refuse a
// -sim-authorization-lifetime the simulator would quietly replace with its
// seven days, naming the flag, before anything starts.
func TestSimAuthorizationLifetimeMustBePositive(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "-1m"} {
		err := runGatewaySim(t.Context(), []string{"-addr", "127.0.0.1:0", "-sim-authorization-lifetime", v},
			func(string) string { return "" }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--sim-authorization-lifetime must be positive") {
			t.Errorf("gatewaysim -sim-authorization-lifetime %s = %v; want refused, naming the flag", v, err)
		}
	}
}

// TestRefpspAccountsAreCheckedAtStart: refpsp-accounts names new gateways
// by name=URL; a name already taken, a name that is no path segment or an
// account without an http URL stops the server at start, naming the
// setting and the account.
func TestRefpspAccountsAreCheckedAtStart(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"sim2=http://127.0.0.1:1,sim2=http://127.0.0.1:2": `account 2 of 2 is named "sim2", which names another gateway`,
		"stripe=http://127.0.0.1:1":                       `account 1 of 1 is named "stripe", which names another gateway`,
		"Sim/2=http://127.0.0.1:1":                        `account 1 of 1 is named "Sim/2"`,
		"sim2=127.0.0.1:1":                                "account 1 of 1 (sim2) has no http or https URL",
		"sim2":                                            "account 1 of 1 (sim2) has no http or https URL",
	} {
		env := map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_ACCOUNTS": v}
		err := run(context.Background(), []string{"serve"}, mapEnv(env), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "refpsp-accounts (SETTLE_REFPSP_ACCOUNTS): "+want) {
			t.Errorf("serve with refpsp-accounts %q = %v; want refused with %q", v, err, want)
		}
	}
	// The flag, too.
	err := run(context.Background(), []string{"serve", "-refpsp-accounts", "Sim/2=http://127.0.0.1:1"},
		mapEnv(map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_REFPSP_URL": "http://127.0.0.1:1"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `refpsp-accounts (SETTLE_REFPSP_ACCOUNTS): account 1 of 1 is named "Sim/2"`) {
		t.Errorf("serve -refpsp-accounts Sim/2=… = %v; want refused naming the account", err)
	}
	good := config{RefpspAccounts: []string{"sim2=http://127.0.0.1:1", "eu-acq_1=https://psp.example/v1"}}
	got, err := good.refpspAccounts()
	if err != nil || len(got) != 2 || got[1] != (refpspAccount{"eu-acq_1", "https://psp.example/v1"}) {
		t.Errorf("refpspAccounts(%q) = %v, %v", good.RefpspAccounts, got, err)
	}
	if k := refpspAccountKey("eu-acq_1"); k != "SETTLE_REFPSP_KEY_EU_ACQ_1" {
		t.Errorf("key variable of eu-acq_1 = %s", k)
	}
}

// TestRoutesFile: routes-file is a JSON list of SetRoutes requests, read
// into each merchant's rules; a file that is not one is refused at start,
// naming the file and the entry.
func TestRoutesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := dir + "/routes.json"
	if err := os.WriteFile(good, []byte(`[
  {"merchant_id": "shop-a", "note": "from the repo", "rules": [
    {"name": "eur", "currencies": ["EUR"], "gateways": ["adyen", "refpsp"]},
    {"name": "rest", "split": [{"gateway": "refpsp", "weight": 9}, {"gateway": "stripe", "weight": 1}], "capture_mode": "CAPTURE_MODE_MANUAL"}]},
  {"merchant_id": "shop-b", "rules": []}
]`), 0o600); err != nil {
		t.Fatal(err)
	}
	seeds, err := (&config{RoutesFile: good}).routeSeeds()
	if err != nil || len(seeds) != 2 || seeds[0].merchant != "shop-a" || seeds[0].note != "from the repo" ||
		len(seeds[0].rules) != 2 || seeds[0].rules[1].Split[1] != (order.WeightedGateway{Gateway: "stripe", Weight: 1}) ||
		seeds[0].rules[1].Capture != order.CaptureManual || seeds[1].merchant != "shop-b" || len(seeds[1].rules) != 0 {
		t.Fatalf("routeSeeds = %+v, %v", seeds, err)
	}
	for body, want := range map[string]string{
		`{"merchant_id": "shop-a"}`:                    "want a JSON list of SetRoutes requests",
		`[{"merchant_id": "shop-a", "rulez": []}]`:     "entry 1",
		`[{}, {"rules": [{"capture_mode": "LATER"}]}]`: "entry 2",
	} {
		bad := dir + "/bad.json"
		if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := (&config{RoutesFile: bad}).routeSeeds(); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), want) {
			t.Errorf("routes-file %s: %v, want refused naming the file and %q", body, err, want)
		}
	}
}

// TestAdmissionDefaults: admission control's places follow the database
// pool unless set, its queue the places, and -1 turns it off.
func TestAdmissionDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env                 map[string]string
		wantInFlight, wantQ int
	}{
		{map[string]string{}, 16 * 16, 16 * 16},
		{map[string]string{"SETTLE_DB_MAX_CONNS": "4"}, 64, 64},
		{map[string]string{"SETTLE_ADMISSION_MAX_INFLIGHT": "10", "SETTLE_ADMISSION_QUEUE": "3"}, 10, 3},
		{map[string]string{"SETTLE_ADMISSION_MAX_INFLIGHT": "-1"}, 0, 0},
	} {
		tc.env["DATABASE_URL"] = "postgres:///x"
		cfg, _, err := parse("serve", nil, func(k string) string { return tc.env[k] }, io.Discard, commandOptions["serve"]...)
		if err != nil {
			t.Fatal(err)
		}
		if l := cfg.admission(); l.MaxInFlight != tc.wantInFlight || l.MaxQueue != tc.wantQ {
			t.Errorf("%v: admission %+v, want %d in flight and %d queued", tc.env, l, tc.wantInFlight, tc.wantQ)
		}
	}
	_, _, err := parse("serve", nil, func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_ADMISSION_MAX_INFLIGHT": "-2"}[k]
	}, io.Discard, commandOptions["serve"]...)
	if err == nil || !strings.Contains(err.Error(), "admission-max-inflight") {
		t.Errorf("admission-max-inflight -2: %v, want refused naming the setting", err)
	}
}
