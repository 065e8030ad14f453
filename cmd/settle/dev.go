package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/pgcluster"
	"github.com/settlepay/settle/internal/postgres"
)

// devDefaults are dev's own defaults, which settle dev -h shows.
var devDefaults = map[string]string{
	// The simulator pushes its events to Settle's webhook listener.
	"webhook-listen": "127.0.0.1:8090",
	// JSON over HTTP beside gRPC; -json-listen 127.0.0.1:0 picks a free
	// port, which the banner names.
	"json-listen": "127.0.0.1:8091",
	// The operator's console, logged in with the ops key the banner
	// prints; -console-listen 127.0.0.1:0 picks a free port.
	"console-listen": "127.0.0.1:8092",
	// Metrics on a free port; the banner says which.
	"metrics-listen": "127.0.0.1:0",
	// Events out reach the development receiver within a blink.
	"event-delivery-poll": "200ms",
	// An unknown outcome whose lookups keep failing (tok_lookup_fails)
	// reaches NEEDS_REVIEW in about two minutes, not a day.
	"reconcile-schedule": "5s,15s,30s,1m",
}

// runDev runs everything in one process: a throwaway PostgreSQL, the
// migrations, two gateway simulators (sim, and sim2: another account with
// its own ledger, for routes), the gRPC API and a reconciler. Every
// listener is bound before anything starts, so a taken port ends dev at
// once; the banner is printed once every one of them serves.
func runDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "keep the database here across runs (default: a temp dir, removed on exit)")
	standby := fs.Bool("standby", false, "also start a synchronous standby streaming from the throwaway PostgreSQL, and connect to both (the production topology, on one machine)")
	citus := fs.Bool("citus", false, "run on a throwaway Citus cluster (a coordinator and two workers, tables distributed by merchant) instead; needs scripts/citus-install")
	simAddr := fs.String("sim-addr", "127.0.0.1:0", "listen address of the gateway simulator")
	sim2Addr := fs.String("sim2-addr", "127.0.0.1:0", "listen address of the second gateway simulator, another account with its own ledger and the same -sim-* faults (orders with \"gateway\":\"sim2\", or routes over sim and sim2)")
	simOpts := simFlags(fs)
	adyenAddr := fs.String("adyen-addr", "127.0.0.1:0", "listen address of the fake Adyen (orders with \"gateway\":\"adyen\"); none when ADYEN_API_KEY names a real account")
	hookAddr := fs.String("event-receiver-addr", "127.0.0.1:0", "listen address of the development receiver of events out (the default merchant's endpoint)")
	keysFile := fs.String("keys-file", defaultDevKeysFile(getenv), "file of dev's own API keys, written at the first start and reused by every later one; unused when -api-keys or -api-keys-file is given")
	// dev makes its own keys, so it has no --no-api-keys, and always runs a
	// reconciler.
	devFlags := slices.DeleteFunc(concat([]string{"metrics-listen", "pprof"}, gatewayFlags, reconcileFlags, serveFlags, webhookFlags, deliveryFlags),
		func(n string) bool {
			// dev's gateways are the simulators, at the addresses it binds.
			return n == "no-api-keys" || n == "with-reconciler" || n == "default-gateway" || n == "refpsp-url" || n == "refpsp-key" || n == "refpsp-accounts"
		})
	load := bindConfig(fs, getenv, devDefaults, devFlags...)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		if errors.Is(err, errPrinted) {
			return err
		}
		return fmt.Errorf("configuration: %w", err)
	}
	if err := checkSim(simOpts); err != nil {
		return err
	}
	cfg.LogFormat, cfg.DefaultGateway, cfg.RefpspKey = "text", "sim", "dev"
	// The simulator pushes its events to Settle's webhook listener, signed
	// with a secret new each run.
	if len(cfg.RefpspWebhookSecrets) == 0 {
		cfg.RefpspWebhookSecrets = []string{newDevKey("whsec_dev_")}
	}
	simOpts.Events.Secrets = cfg.RefpspWebhookSecrets
	// Both keys are the default merchant's: the ops key is scoped to it,
	// the one merchant dev serves (a platform-wide key would name *).
	var keys devKeys
	if cfg.APIKeys == "" && cfg.APIKeysFile == "" {
		if keys, err = loadDevKeys(*keysFile); err != nil {
			return err
		}
		cfg.APIKeys = fmt.Sprintf("%s %s checkout dev-checkout; %s %s ops dev-ops",
			grpcapi.HashKey(keys.checkout), order.DefaultMerchant, grpcapi.HashKey(keys.ops), order.DefaultMerchant)
	}
	hookSecret := newDevKey("evsec_dev_")
	customEvents := cfg.EventWebhooks != "" || cfg.EventWebhooksFile != ""
	if !customEvents {
		// A placeholder that passes the checks below; the receiver's
		// address replaces it once bound.
		cfg.EventWebhooks = fmt.Sprintf("%s http://127.0.0.1:1/events %s", order.DefaultMerchant, hookSecret)
	}
	if _, err := cfg.serverOptions(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if *standby && (*citus || *dataDir != "") {
		return errors.New("--standby goes with neither --citus nor --data-dir: the pair is always throwaway")
	}
	if *citus && *dataDir != "" {
		return errors.New("--data-dir and --citus: the Citus cluster is always throwaway")
	}

	// Every listener, before anything starts.
	var ls listeners
	defer ls.close()
	hookLis, err := bind(ctx, "events receiver", *hookAddr, "event-receiver-addr")
	if err != nil {
		return err
	}
	defer hookLis.Close()
	simLis, err := bind(ctx, "simulator", *simAddr, "sim-addr")
	if err != nil {
		return err
	}
	defer simLis.Close()
	sim2Lis, err := bind(ctx, "second simulator", *sim2Addr, "sim2-addr")
	if err != nil {
		return err
	}
	defer sim2Lis.Close()
	// The fake Adyen, unless the user brought a real account.
	var adyenLis net.Listener
	var fakeAdyen adyenfake.Config
	if cfg.AdyenAPIKey == "" {
		if adyenLis, err = bind(ctx, "fake Adyen", *adyenAddr, "adyen-addr"); err != nil {
			return err
		}
		defer adyenLis.Close()
		fakeAdyen = adyenfake.Config{APIKey: newDevKey("AQE_dev_"), MerchantAccount: "SettleDevECOM", HMACKey: newDevHex(32)}
		cfg.AdyenAPIKey, cfg.AdyenMerchantAccount, cfg.AdyenHMACKeys = fakeAdyen.APIKey, fakeAdyen.MerchantAccount, []string{fakeAdyen.HMACKey}
		cfg.AdyenURL = "http://" + adyenLis.Addr().String() + "/v71"
	}
	if err := ls.bindServer(ctx, cfg); err != nil {
		return err
	}
	if err := ls.bindMetrics(ctx, cfg); err != nil {
		return err
	}
	cfg.RefpspURL = "http://" + simLis.Addr().String()
	if simOpts.Events.URL == "" {
		simOpts.Events.URL = "http://" + ls.webhooks.Addr().String() + "/webhooks/refpsp"
	}
	// sim2 is a refpsp account of its own name: its events come to
	// /webhooks/sim2, signed with the same secrets. The accounts are dev's,
	// as refpsp-url is: SETTLE_REFPSP_ACCOUNTS does not reach dev.
	cfg.RefpspAccounts = []string{"sim2=http://" + sim2Lis.Addr().String()}
	sim2Opts := *simOpts
	sim2Opts.Events.URL = "http://" + ls.webhooks.Addr().String() + "/webhooks/sim2"
	fakeAdyen.NotifyURL = "http://" + ls.webhooks.Addr().String() + "/webhooks/adyen"
	hookURL := "http://" + hookLis.Addr().String() + "/events"
	if !customEvents {
		cfg.EventWebhooks = fmt.Sprintf("%s %s %s", order.DefaultMerchant, hookURL, hookSecret)
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	opts, err := cfg.serverOptions()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := cfg.logger(stderr)

	// A server of dev's that fails ends dev.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)

	// The default merchant's webhook endpoint: a receiver in this process
	// that verifies each delivery and prints a line for it.
	var printMu sync.Mutex
	hooks := receiver.New([]string{hookSecret}, func(d receiver.Delivery) {
		sig := "signature ok"
		if !d.Verified {
			sig = "SIGNATURE INVALID"
		}
		printMu.Lock()
		defer printMu.Unlock()
		if d.RefundID != "" {
			fmt.Fprintf(stdout, "webhook  %s  %-22s order %s  refund %s  %s  (%s)\n", d.EventID, d.Type, d.OrderID, d.RefundID, d.State, sig)
			return
		}
		fmt.Fprintf(stdout, "webhook  %s  %-22s order %s  %s  (%s)\n", d.EventID, d.Type, d.OrderID, d.State, sig)
	})
	hookSrv := &http.Server{Handler: hooks, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hookSrv.Serve(hookLis); !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("events receiver %s: %w", hookLis.Addr(), err))
		}
	}()
	defer hookSrv.Close()
	for _, s := range []struct {
		name string
		opts sim.Options
		lis  net.Listener
	}{{"simulator", *simOpts, simLis}, {"second simulator", sim2Opts, sim2Lis}} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := sim.New(s.opts).Serve(ctx, s.lis); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("%s %s: %w", s.name, s.lis.Addr(), err))
			}
		}()
		defer func() { fail(nil); <-done }()
	}
	if adyenLis != nil {
		fakeAdyen.Log = log.With("component", "fake-adyen")
		fa, err := adyenfake.New(fakeAdyen)
		if err != nil {
			return err
		}
		adyenDone := make(chan struct{})
		go func() {
			defer close(adyenDone)
			if err := fa.Serve(ctx, adyenLis); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("fake Adyen %s: %w", adyenLis.Addr(), err))
			}
		}()
		defer func() { fail(nil); <-adyenDone }()
	}

	if *citus {
		fmt.Fprintln(stdout, "starting a throwaway Citus cluster (a coordinator and two workers)...")
		cc, err := pgcluster.StartCitus(ctx, pgcluster.CitusOptions{})
		if err != nil {
			return err
		}
		defer cc.Stop()
		if err := cc.CreateDatabase(ctx, "settle", ""); err != nil {
			return err
		}
		cfg.DatabaseURL = cc.URL("settle")
	} else {
		fmt.Fprintln(stdout, "starting a throwaway PostgreSQL...")
		opts := pgcluster.Options{DataDir: *dataDir}
		if *standby {
			// Every commit waits for the standby, which can be promoted
			// without losing one; the primary can be rewound to follow it.
			opts.Rewindable, opts.Config = true, []string{"synchronous_standby_names=*"}
		}
		cluster, err := pgcluster.Start(ctx, opts)
		if err != nil {
			return err
		}
		defer cluster.Stop()
		cfg.DatabaseURL = cluster.URL("postgres")
		if *standby {
			fmt.Fprintln(stdout, "starting its synchronous standby...")
			sb, err := cluster.StartStandby(ctx, "standby")
			if err != nil {
				return err
			}
			defer sb.Stop()
			cfg.DatabaseURL = pgcluster.URLs("postgres", cluster, sb)
		}
	}
	migratePool, err := postgres.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	err = postgres.Migrate(ctx, migratePool)
	migratePool.Close()
	if err != nil {
		return err
	}

	a, err := newApp(ctx, cfg, log, "sim", nil, getenv)
	if err != nil {
		return err
	}
	defer a.close()
	// The default route over dev's accounts: an order with routes to
	// several tries sim, then sim2, then the fake Adyen, whatever order
	// the checkout gave (docs/api.md, "Route rules").
	dflt := []string{"sim", "sim2"}
	if a.gateways[adyen.DefaultName] != nil {
		dflt = append(dflt, adyen.DefaultName)
	}
	a.routeSeeds = append(a.routeSeeds, routeSeed{merchant: order.DefaultMerchant, actor: "dev", note: "settle dev's default route",
		rules: []order.RouteRule{{Name: "dev-default", Gateways: dflt}}})
	err = a.serve(ctx, &ls, true, opts, func(ls *listeners) {
		b := devBanner{
			GRPC: ls.grpc.Addr().String(), JSON: ls.json.Addr().String(), DatabaseURL: cfg.DatabaseURL,
			SimURL: cfg.RefpspURL, Sim2URL: "http://" + sim2Lis.Addr().String(),
			Webhooks: ls.webhooks.Addr().String(), WebhookSecret: cfg.RefpspWebhookSecrets[0], EventsURL: hookURL,
			Keys: keys, KeysFile: *keysFile, Metrics: ls.metrics.Addr().String(), Stripe: a.gateways["stripe"] != nil,
		}
		if adyenLis != nil {
			b.FakeAdyen = cfg.AdyenURL
		}
		if ls.console != nil {
			b.Console = ls.console.Addr().String()
		}
		if customEvents {
			b.EventsURL = ""
		}
		b.print(stdout)
	})
	if f := failed(ctx); f != nil {
		return f
	}
	return err
}

// devKeys are dev's own API keys; zero when the user brought their own.
type devKeys struct{ checkout, ops string }

// defaultDevKeysFile is where dev keeps its keys: settle/dev-keys in the
// user's configuration directory ($XDG_CONFIG_HOME, or ~/.config); "" when
// there is no home to keep them in.
func defaultDevKeysFile(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "settle", "dev-keys")
}

// loadDevKeys reads dev's keys from path, or, the first time, makes them
// and writes them there (mode 0600), so that every later start, and every
// shell that exported them, keeps working. Two devs starting at once
// agree on one file: it appears whole or not at all. An empty path keeps
// no file: the keys are new each run.
func loadDevKeys(path string) (devKeys, error) {
	k := devKeys{checkout: newDevKey("sk_dev_checkout_"), ops: newDevKey("sk_dev_ops_")}
	if path == "" {
		return k, nil
	}
	if k, err := readDevKeys(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return k, fmt.Errorf("dev keys file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dev-keys-*")
	if err != nil {
		return k, fmt.Errorf("dev keys file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = fmt.Fprintf(tmp, "# settle dev's API keys, made once and reused; delete this file for new ones.\ncheckout %s\nops %s\n", k.checkout, k.ops)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link never replaces a file: of two devs, the second reads
		// the first's keys.
		if err = os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
			return readDevKeys(path)
		}
	}
	if err != nil {
		return k, fmt.Errorf("dev keys file: %w", err)
	}
	return k, nil
}

func readDevKeys(path string) (devKeys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return devKeys{}, err
	}
	var k devKeys
	for line := range strings.Lines(string(b)) {
		role, key, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch role {
		case "checkout":
			k.checkout = key
		case "ops":
			k.ops = key
		}
	}
	if k.checkout == "" || k.ops == "" {
		return k, fmt.Errorf("dev keys file %s: want a line \"checkout <key>\" and a line \"ops <key>\"; delete it for new keys", path)
	}
	return k, nil
}

// devBanner is what dev prints once every listener serves.
type devBanner struct {
	GRPC, SimURL, DatabaseURL string
	// Sim2URL is the second simulator's, the gateway sim2.
	Sim2URL string
	// JSON is the JSON over HTTP listener's address.
	JSON string
	// Console is the console's address; empty when it is off.
	Console                 string
	Webhooks, WebhookSecret string
	// EventsURL is the development receiver of events out; empty when
	// the user configured endpoints of their own.
	EventsURL string
	// Keys are dev's own keys, from KeysFile; zero when the user's
	// -api-keys (or -api-keys-file) are in force.
	Keys     devKeys
	KeysFile string
	Metrics  string
	// Stripe says the gateway "stripe" is configured (STRIPE_SECRET_KEY).
	Stripe bool
	// FakeAdyen is the fake Adyen's base URL; empty when ADYEN_API_KEY
	// names a real account.
	FakeAdyen string
}

// consoleLine is the banner's console line, ending in a newline.
func (b devBanner) consoleLine() string {
	if b.Console == "" {
		return "  console:   off   (-console-listen 127.0.0.1:8092 turns it on)\n"
	}
	return "  console:   http://" + b.Console + "/   (log in with the ops key below)\n"
}

func (b devBanner) print(w io.Writer) {
	fmt.Fprintf(w, `
Settle is running (Ctrl-C stops everything).
  gRPC:      %[1]s   (reflection on; try: grpcurl -plaintext %[1]s list)
  json:      http://%[7]s   (JSON over HTTP; OpenAPI: curl http://%[7]s/v1/openapi.json)
%[9]s  gateway:   %[2]s   (simulator, "gateway":"sim", the default; ledger: curl %[2]s/v1/ledger)
  sim2:      %[8]s   (a second simulator, another account: "gateway":"sim2"; ledger: curl %[8]s/v1/ledger)
  database:  %[3]s
  webhooks:  http://%[4]s/webhooks/refpsp   (the simulator pushes its events here; sim2 to /webhooks/sim2)
  export SETTLE_REFPSP_WEBHOOK_SECRET=%[5]s   # signs refpsp events (see docs/api.md: webhooks)
  metrics:   http://%[6]s/metrics   (also /healthz and /readyz; pick the address with -metrics-listen)
`, b.GRPC, b.SimURL, b.DatabaseURL, b.Webhooks, b.WebhookSecret, b.Metrics, b.JSON, b.Sim2URL, b.consoleLine())
	if b.Stripe {
		fmt.Fprintln(w, `  stripe:    configured from STRIPE_SECRET_KEY: create orders with "gateway":"stripe"`)
	} else {
		fmt.Fprintln(w, `  stripe:    off; set STRIPE_SECRET_KEY=sk_test_... for orders with "gateway":"stripe"`)
	}
	if b.FakeAdyen != "" {
		fmt.Fprintf(w, "  adyen:     %s   (fake Adyen: create orders with \"gateway\":\"adyen\"; its notifications come to /webhooks/adyen)\n", b.FakeAdyen)
	} else {
		fmt.Fprintln(w, `  adyen:     configured from ADYEN_API_KEY: create orders with "gateway":"adyen"`)
	}
	if b.EventsURL != "" {
		fmt.Fprintf(w, `  events:    %[1]s   (the default merchant's endpoint for events out;
             each delivery prints a line below; list them: curl %[1]s)
`, b.EventsURL)
	}
	if b.Keys.checkout == "" {
		fmt.Fprintln(w, "\nAPI keys: yours, from -api-keys / -api-keys-file (dev made none).")
	} else {
		kept := "kept in " + b.KeysFile + "; the same at every start"
		if b.KeysFile == "" {
			kept = "new each run: no -keys-file"
		}
		fmt.Fprintf(w, `
Development API keys (%s):
  export SETTLE_KEY=%s      # checkout: OrderService
  export SETTLE_OPS_KEY=%s           # ops: OpsService
`, kept, b.Keys.checkout, b.Keys.ops)
	}
	fmt.Fprintf(w, `
Create an order, charge it, look at it:
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"merchant_reference":"order-1001","amount":{"currency":"GBP","amount_minor":1250},"payment_method":"tok_ok"}' %[1]s settle.v1.OrderService/CreateOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"order_id":"<id from above>","request_id":"checkout-1001-a"}' %[1]s settle.v1.OrderService/ChargeOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"merchant_reference":"order-1001"}' %[1]s settle.v1.OrderService/GetOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_OPS_KEY" %[1]s settle.v1.OpsService/Stats

Route an order over sim, sim2 and adyen: the charge goes to the first route, and only a
proven non-charge (here sim's processing_error) cascades to the next (docs/api.md: routes):
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"merchant_reference":"order-1002","amount":{"currency":"GBP","amount_minor":1250},"routes":[{"gateway":"sim","payment_method":"tok_decline_processing_error"},{"gateway":"sim2","payment_method":"tok_ok"},{"gateway":"adyen","payment_method":"tok_ok"}],"request_id":"checkout-1002-a"}' %[1]s settle.v1.OrderService/CreateAndChargeOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_OPS_KEY" -d '{"order_id":"<id from above>"}' %[1]s settle.v1.OpsService/GetOrderHistory

Payment method tokens of the simulators, sim and sim2 (any other is declined "unknown_token"):
  %[2]s
Tokens of the fake Adyen ("gateway":"adyen"; every payment is authorized, then captured by Settle):
  %[4]s
Charged with tok_refund_timeout, tok_refund_5xx, tok_refund_drop, tok_refund_decline,
tok_refund_fail_later or tok_refund_lookup_fails (answers after the deadline, every lookup
fails: NEEDS_REVIEW), an order's refunds meet that fault.

Events out (order.paid, refund.succeeded, …): each delivery prints a "webhook" line here; list what arrived, or pull them:
  curl %[3]s
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"page_size":10}' %[1]s settle.v1.OrderService/ListEvents
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_OPS_KEY" -d '{"merchant_id":"default","event_id":"<evt_ id>"}' %[1]s settle.v1.OpsService/ResendEvent

`, b.GRPC, strings.Join(devTokens, "\n  "), b.EventsURL, strings.Join(devAdyenTokens, "\n  "))
}

// devAdyenTokens are the fake Adyen's tokens, as the banner lists them.
var devAdyenTokens = []string{
	"tok_ok                  authorized, captured: PAID (AUTHORIZED with capture MANUAL)",
	"tok_decline             refused",
	"tok_3ds                 3-D Secure: REQUIRES_ACTION; the page's notification settles it",
	"tok_timeout             authorized, answers after the deadline: CHARGING, then the AUTHORISATION notification settles it",
	"tok_silent              as tok_ok, and no notification ever: after the no-show horizon a technical cancel, then NEEDS_REVIEW",
	"tok_received            resultCode Received: CHARGING until the notification",
	"tok_capture_fail        its captures fail (CAPTURE_FAILED): a review item",
}

// devTokens are the simulator's charge tokens, as the banner lists them.
var devTokens = []string{
	"tok_ok                  paid",
	"tok_decline             declined card_declined",
	"tok_decline_<code>      declined <code>; a technical one (tok_decline_processing_error) cascades to an order's next route",
	"tok_3ds                 3-D Secure: REQUIRES_ACTION with a page to open (customer_present: true)",
	"tok_timeout             charged, answers after the deadline: CHARGING, then the simulator's event settles it",
	"tok_timeout_silent      charged, answers after the deadline, no event: the reconciler settles it",
	"tok_lookup_fails        charged, answers after the deadline, every lookup fails: NEEDS_REVIEW",
	"tok_5xx_after_charge    charged, answers 500",
	"tok_drop_after_charge   charged, drops the connection",
	"tok_slow_<ms>           charged, answers after <ms> milliseconds",
	"tok_refuse              429, nothing charged",
	"tok_reject              422, nothing charged",
	"tok_random              like tok_ok, under the -sim-rate-* faults",
}
