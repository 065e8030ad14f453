package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestAuditCommand: settle audit audits the latest closed window of a
// gateway account and prints the run: clean for a simulator that holds
// nothing, and for the fake Adyen, whose reports the wired adapter reads;
// a run is recorded either way.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(gw.Close)
	env := map[string]string{"DATABASE_URL": postgrestest.URL(t), "SETTLE_REFPSP_URL": gw.URL, "SETTLE_REFPSP_KEY": "sk_sim",
		"SETTLE_LOG_FORMAT": "text", "SETTLE_ALLOW_UNSAFE_DATABASE": "true"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"audit", "-gateway", "refpsp", "-audit-window", "1h"}, mapEnv(env), &stdout, &stderr); err != nil {
		t.Fatalf("settle audit: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "gateway refpsp") || !strings.Contains(out, "clean: no finding") {
		t.Fatalf("settle audit printed %q, want a clean run of refpsp", out)
	}
	// The Adyen account, as settle wires it, is covered: its listing
	// reads the fake's daily reports.
	fake, err := adyenfake.New(adyenfake.Config{APIKey: "AQE-audit-command", MerchantAccount: "SettleAuditECOM"})
	if err != nil {
		t.Fatal(err)
	}
	adyenSrv := httptest.NewServer(fake)
	t.Cleanup(func() { adyenSrv.Close(); fake.Close() })
	env["ADYEN_API_KEY"], env["ADYEN_MERCHANT_ACCOUNT"], env["ADYEN_URL"] = "AQE-audit-command", "SettleAuditECOM", adyenSrv.URL+"/v71"
	env["ADYEN_HMAC_KEYS"] = strings.Repeat("ab", 32)
	stdout.Reset()
	if err := run(context.Background(), []string{"audit", "-gateway", "adyen", "-audit-window", "1h"}, mapEnv(env), &stdout, &stderr); err != nil {
		t.Fatalf("settle audit -gateway adyen: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "gateway adyen") || !strings.Contains(out, "clean: no finding") {
		t.Fatalf("settle audit -gateway adyen printed %q, want a clean, covered run", out)
	}
	err = run(context.Background(), []string{"audit", "-gateway", "nowhere"}, mapEnv(env), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no such gateway account") {
		t.Fatalf("settle audit of an unknown account: %v", err)
	}
}

// TestScheduledAuditIsConfigured: settle reconcile takes the scheduled
// audit's settings, and refuses wrong ones at start, naming them.
func TestScheduledAuditIsConfigured(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres:///x", "SETTLE_REFPSP_URL": "http://127.0.0.1:1", "SETTLE_REFPSP_KEY": "k"}
	for _, args := range [][]string{{"-audit-interval", "-1s"}, {"-audit-interval", "1h", "-audit-window", "0s"},
		{"-audit-interval", "1h", "-audit-margin", "-1m"}} {
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"reconcile"}, args...), mapEnv(env), &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), "configuration:") || !strings.Contains(err.Error(), strings.TrimPrefix(args[len(args)-2], "-")) {
			t.Errorf("reconcile %v: %v, want a configuration error naming %s", args, err, args[len(args)-2])
		}
	}
}
