package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/lab/pgcluster"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// runDev runs everything in one process: a throwaway PostgreSQL, the
// migrations, the gateway simulator, the gRPC API and a reconciler.
func runDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "keep the database here across runs (default: a temp dir, removed on exit)")
	standby := fs.Bool("standby", false, "also start a synchronous standby streaming from the throwaway PostgreSQL, and connect to both (the production topology, on one machine)")
	citus := fs.Bool("citus", false, "run on a throwaway Citus cluster (a coordinator and two workers, tables distributed by merchant) instead; needs scripts/citus-install")
	simAddr := fs.String("sim-addr", "127.0.0.1:0", "listen address of the gateway simulator")
	simOpts := simFlags(fs)
	hookAddr := fs.String("event-receiver-addr", "127.0.0.1:0", "listen address of the development receiver of events out (the default merchant's endpoint)")
	// dev makes its own keys, so it has no --no-api-keys.
	devFlags := slices.DeleteFunc(concat([]string{"gateway-timeout", "metrics-listen", "refpsp-request-rate", "lookup-share", "lookup-wait"}, reconcileFlags, serveFlags, webhookFlags, deliveryFlags), func(n string) bool { return n == "no-api-keys" })
	load := bindConfig(fs, getenv, devFlags...)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	cfg.LogFormat, cfg.DefaultGateway, cfg.RefpspKey = "text", "sim", "dev"
	// The simulator pushes its events to Settle's webhook listener, signed
	// with a secret new each run.
	if cfg.WebhookListen == "" {
		cfg.WebhookListen = "127.0.0.1:8090"
	}
	if len(cfg.RefpspWebhookSecrets) == 0 {
		cfg.RefpspWebhookSecrets = []string{newDevKey("whsec_dev_")}
	}
	if simOpts.Events.URL == "" {
		simOpts.Events.URL = "http://" + cfg.WebhookListen + "/webhooks/refpsp"
	}
	simOpts.Events.Secrets = cfg.RefpspWebhookSecrets
	// Both keys are the default merchant's: the ops key is scoped to it,
	// the one merchant dev serves (a platform-wide key would name *).
	checkoutKey, opsKey := newDevKey("sk_dev_checkout_"), newDevKey("sk_dev_ops_")
	cfg.APIKeys = fmt.Sprintf("%s %s checkout dev-checkout; %s %s ops dev-ops",
		grpcapi.HashKey(checkoutKey), order.DefaultMerchant, grpcapi.HashKey(opsKey), order.DefaultMerchant)

	// The default merchant's webhook endpoint: a receiver in this process
	// that verifies each delivery and prints a line for it.
	hookSecret := newDevKey("evsec_dev_")
	hookLis, err := new(net.ListenConfig).Listen(ctx, "tcp", *hookAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *hookAddr, err)
	}
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
			fmt.Fprintln(stderr, "webhook receiver stopped:", err)
		}
	}()
	defer hookSrv.Close()
	hookURL := "http://" + hookLis.Addr().String() + "/events"
	if cfg.EventWebhooks == "" && cfg.EventWebhooksFile == "" {
		cfg.EventWebhooks = fmt.Sprintf("%s %s %s", order.DefaultMerchant, hookURL, hookSecret)
		cfg.DeliveryPoll = 200 * time.Millisecond
	}
	opts, err := cfg.serverOptions()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := cfg.logger(stderr)

	if *standby && (*citus || *dataDir != "") {
		return errors.New("--standby goes with neither --citus nor --data-dir: the pair is always throwaway")
	}
	if *citus {
		if *dataDir != "" {
			return errors.New("--data-dir and --citus: the Citus cluster is always throwaway")
		}
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

	simLis, err := new(net.ListenConfig).Listen(ctx, "tcp", *simAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *simAddr, err)
	}
	simDone := make(chan error, 1)
	go func() { simDone <- sim.New(*simOpts).Serve(ctx, simLis) }()
	cfg.RefpspURL = "http://" + simLis.Addr().String()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}

	a, err := newApp(ctx, cfg, log, "sim", nil, getenv)
	if err != nil {
		return err
	}
	defer a.close()
	err = a.serve(ctx, func() (net.Listener, error) {
		lis, err := new(net.ListenConfig).Listen(ctx, "tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		printDevHelp(stdout, lis.Addr().String(), cfg.RefpspURL, cfg.DatabaseURL, checkoutKey, opsKey,
			cfg.WebhookListen, cfg.RefpspWebhookSecrets[0], hookURL)
		return lis, nil
	}, true, opts)
	if simErr := <-simDone; err == nil {
		err = simErr
	}
	return err
}

func printDevHelp(w io.Writer, addr, simURL, dbURL, checkoutKey, opsKey, webhookAddr, webhookSecret, hookURL string) {
	fmt.Fprintf(w, `
Settle is running (Ctrl-C stops everything).
  gRPC:      %[1]s   (reflection on; try: grpcurl -plaintext %[1]s list)
  gateway:   %[2]s   (simulator; ledger: curl %[2]s/v1/ledger)
  database:  %[3]s
  webhooks:  http://%[6]s/webhooks/refpsp   (the simulator pushes its events here)
  export SETTLE_REFPSP_WEBHOOK_SECRET=%[7]s   # signs refpsp events (see README: webhooks)
  events:    %[8]s   (the default merchant's endpoint for events out;
             each delivery prints a line below; list them: curl %[8]s)

Development API keys (new each run):
  export SETTLE_KEY=%[4]s      # checkout: OrderService
  export SETTLE_OPS_KEY=%[5]s           # ops: OpsService

Create an order, charge it, look at it:
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"merchant_reference":"order-1001","amount":{"currency":"GBP","amount_minor":1250},"payment_method":"tok_ok"}' %[1]s settle.v1.OrderService/CreateOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"order_id":"<id from above>","request_id":"checkout-1001-a"}' %[1]s settle.v1.OrderService/ChargeOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"merchant_reference":"order-1001"}' %[1]s settle.v1.OrderService/GetOrder
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_OPS_KEY" %[1]s settle.v1.OpsService/Stats

Payment method tokens of the simulator: tok_ok, tok_decline, tok_timeout, tok_5xx_after_charge,
tok_drop_after_charge, tok_slow_<ms>, tok_refuse (429), tok_reject (422). Charged with tok_refund_timeout,
tok_refund_5xx, tok_refund_drop, tok_refund_decline or tok_refund_fail_later, an order's refunds meet that fault.

Events out (order.paid, refund.succeeded, …): each delivery prints a "webhook" line here; list what arrived, or pull them:
  curl %[8]s
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_KEY" -d '{"page_size":10}' %[1]s settle.v1.OrderService/ListEvents
  grpcurl -plaintext -H "authorization: Bearer $SETTLE_OPS_KEY" -d '{"merchant_id":"default","event_id":"<evt_ id>"}' %[1]s settle.v1.OpsService/ResendEvent

`, addr, simURL, dbURL, checkoutKey, opsKey, webhookAddr, webhookSecret, hookURL)
}
