package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protojson"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"

	"github.com/settlepay/settle/internal/delivery"
	"github.com/settlepay/settle/internal/failpoint"
	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/reconcile"
	"github.com/settlepay/settle/internal/telemetry"
	"github.com/settlepay/settle/internal/webhook"
)

var (
	dbFlags      = []string{"database-url", "db-max-conns", "log-format", "metrics-listen", "pprof", "allow-unsafe-database"}
	gatewayFlags = []string{"default-gateway", "refpsp-url", "refpsp-key", "refpsp-accounts", "gateway-timeout",
		"stripe-secret-key", "stripe-secret-key-file", "stripe-api-base", "stripe-max-retries", "stripe-replay-window", "stripe-multicapture",
		"refpsp-request-rate", "stripe-request-rate", "lookup-share", "lookup-wait",
		"adyen-api-key", "adyen-merchant-account", "adyen-url", "adyen-request-rate", "adyen-hmac-keys", "adyen-notify-user", "adyen-notify-password",
		"adyen-report-url", "adyen-report-user", "adyen-report-password", "adyen-report-timezone"}
	reconcileFlags = []string{"reconcile-schedule", "reconcile-batch", "reconcile-concurrency", "reconcile-poll", "no-show-horizon", "review-recheck", "action-expiry", "action-recheck-max"}
	// scheduledAuditFlags are reconcile's settings of the scheduled audit
	// (no-show-horizon is among reconcileFlags).
	scheduledAuditFlags = []string{"audit-interval", "audit-window", "audit-margin", "audit-merchants"}
	deliveryFlags       = []string{"event-webhooks", "event-webhooks-file", "event-delivery-timeout", "event-retry-for", "event-delivery-poll", "event-delivery-batch", "event-delivery-in-flight"}
	serveFlags          = []string{"listen", "json-listen", "console-listen", "shutdown-timeout", "claim-grace", "with-reconciler", "failpoints", "lookup-reuse",
		"breaker-cooldown", "breaker-failure-rate", "breaker-min-calls", "routes-file",
		"api-keys", "api-keys-file", "rate-limit", "rate-burst", "max-inflight", "max-watches", "watch-lifetime",
		"admission-max-inflight", "admission-queue", "admission-max-wait",
		"auth-failure-rate", "auth-failure-burst", "max-connections", "max-connections-per-address",
		"max-keyless-connections-per-address", "keyless-grace", "address-prefix-ipv4", "address-prefix-ipv6",
		"max-concurrent-streams", "max-keyless-streams", "max-keyless-streams-per-address",
		"max-connection-idle", "max-connection-age", "max-connection-age-grace", "reflection", "tls-cert", "tls-key", "tls-client-ca", "plaintext", "no-api-keys"}
	webhookFlags = []string{"webhook-listen", "webhook-tls-cert", "webhook-tls-key", "webhook-max-body",
		"webhook-max-connections", "webhook-max-connections-per-address", "webhook-tolerance", "webhook-plaintext", "stripe-webhook-secrets", "refpsp-webhook-secrets"}
)

// commandOptions names the options each command binds; gatewaysim has its
// own flags (simFlags) and dev binds its own selection.
var commandOptions = map[string][]string{
	"migrate":    dbFlags,
	"serve":      concat(dbFlags, gatewayFlags, reconcileFlags, serveFlags, webhookFlags, deliveryFlags),
	"reconcile":  concat(dbFlags, gatewayFlags, reconcileFlags, deliveryFlags, scheduledAuditFlags, []string{"failpoints"}),
	"audit":      concat(dbFlags, gatewayFlags, auditFlags),
	"deliver":    concat(dbFlags, deliveryFlags, []string{"failpoints"}),
	"gatewaysim": nil,
}

// parse parses args for a command with the named options and validates.
func parse(name string, args []string, getenv func(string) string, stderr io.Writer, names ...string) (*config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("settle "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	load := bindConfig(fs, getenv, nil, names...)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	cfg, err := load()
	if err == nil {
		err = cfg.validate()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("configuration: %w", err)
	}
	return cfg, fs, nil
}

// app is what serve, reconcile and dev share: the database, the gateways
// and the armed failpoints.
type app struct {
	cfg      *config
	log      *slog.Logger
	pool     *pgxpool.Pool
	store    *postgres.Store
	gateways map[string]order.Gateway
	// receivers are the adapters that read their gateway's events, by
	// the name of the webhook path their events come to.
	receivers map[string]order.EventReceiver
	// accounts names the gateway account of a webhook path whose name is
	// not the account's (webhook.Config.Accounts).
	accounts map[string]string
	// infos describes each gateway account for GetRoutes.
	infos map[string]order.AccountInfo
	// routeSeeds are the route rules serve makes the merchants' at start
	// (routes-file; settle dev's default route).
	routeSeeds []routeSeed
	// budgets holds the gateway accounts' request budgets by gateway.
	budgets map[string]*order.Budget
	// breakers are the gateway accounts' breakers, which every Service of
	// the process shares.
	breakers   *order.Breakers
	failpoints failpoint.Set
	metrics    *telemetry.Metrics
	tracing    *telemetry.Tracing
	// dbReady is set once waitForDatabase has reached the database.
	dbReady atomic.Bool
	// durability is the last reading, to log the status line on change.
	durabilityMu sync.Mutex
	durability   postgres.Durability
}

// newApp opens the database pool (without connecting: waitForDatabase
// does) and sets up the gateways, each adapter reporting its calls to the
// metrics and traces, and verifying its own events: the refpsp adapter is
// registered as refpspName, and lab adds gateways only the lab runs (the
// benchmark's instant gateway), each built with its observer; it is nil
// for the product's commands. The gateways are the adapters themselves,
// every capability of theirs in sight of the charge path.
func newApp(ctx context.Context, cfg *config, log *slog.Logger, refpspName string, lab map[string]func(gateway.Observer) order.Gateway, getenv func(string) string) (*app, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("configuration: DATABASE_URL (or --database-url) is required")
	}
	fps, err := failpoint.Parse(cfg.Failpoints)
	if err != nil {
		return nil, fmt.Errorf("configuration: SETTLE_FAILPOINTS: %w", err)
	}
	tracing, err := telemetry.NewTracing(ctx, getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: tracing: %w", err)
	}
	metrics := telemetry.NewMetrics()
	// The pool first (it connects only when used): the Adyen adapter's
	// lookups read the notifications the store recorded.
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, int32(cfg.DBMaxConns))
	if err != nil {
		return nil, err
	}
	built := false
	defer func() {
		if !built {
			pool.Close()
		}
	}()
	store := postgres.NewStore(pool)
	gateways := map[string]order.Gateway{}
	// The webhook listener's gateways, by the path their events come to:
	// those whose signing secrets are set, each reading its own events.
	receivers := map[string]order.EventReceiver{}
	accounts := map[string]string{}
	// What GetRoutes shows of each account: never its credentials.
	infos := map[string]order.AccountInfo{}
	// Each gateway account's request budget, which the API's lookups and
	// charges and the reconciler's lookups share; the lab's gateways have
	// none.
	budgets := map[string]*order.Budget{}
	extra, err := cfg.refpspAccounts()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	// refpsp accounts: the one of refpsp-url, named refpspName with its
	// events at /webhooks/refpsp, and those of refpsp-accounts, each under
	// its own name.
	type refpspAt struct{ name, path, url, key string }
	var refpsps []refpspAt
	if cfg.RefpspURL != "" {
		refpsps = append(refpsps, refpspAt{refpspName, "refpsp", cfg.RefpspURL, cfg.RefpspKey})
	}
	for _, x := range extra {
		refpsps = append(refpsps, refpspAt{x.name, x.name, x.url, cmp.Or(getenv(refpspAccountKey(x.name)), cfg.RefpspKey)})
	}
	for _, r := range refpsps {
		gw, err := refpsp.New(refpsp.Config{BaseURL: r.url, APIKey: r.key, Timeout: cfg.GatewayTimeout,
			Observer:     metrics.GatewayObserver(r.name, tracing.Tracer()),
			EventSecrets: cfg.RefpspWebhookSecrets, EventTolerance: cfg.WebhookTolerance})
		if err != nil {
			return nil, fmt.Errorf("configuration: %s: %w", r.name, err)
		}
		gateways[r.name] = gw
		infos[r.name] = order.AccountInfo{Kind: "refpsp", Fingerprint: fingerprint(r.key), ThreeDS: true}
		if len(cfg.RefpspWebhookSecrets) > 0 {
			receivers[r.path] = gw
		}
		if r.path != r.name {
			accounts[r.path] = r.name
		}
		if budgets[r.name], err = cfg.budget(cfg.RefpspRate); err != nil {
			return nil, fmt.Errorf("configuration: %s: %w", r.name, err)
		}
	}
	stripeKey, err := cfg.stripeSecretKey()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if stripeKey != "" {
		gw, err := stripe.New(stripe.Config{
			SecretKey:         stripeKey,
			BaseURL:           cfg.StripeAPIBase,
			Timeout:           cfg.GatewayTimeout,
			MaxNetworkRetries: cfg.StripeMaxRetries,
			ReplayWindow:      cfg.StripeReplayWindow,
			Multicapture:      cfg.StripeMulticapture,
			Logger:            log.With("gateway", "stripe"),
			Observer:          metrics.GatewayObserver("stripe", tracing.Tracer()),
			WebhookSecrets:    cfg.StripeWebhookSecrets,
			WebhookTolerance:  cfg.WebhookTolerance,
		})
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		gateways["stripe"] = gw
		infos["stripe"] = order.AccountInfo{Kind: "stripe", Fingerprint: fingerprint(stripeKey), ThreeDS: true}
		if len(cfg.StripeWebhookSecrets) > 0 {
			receivers["stripe"] = gw
		}
		if budgets["stripe"], err = cfg.budget(cfg.stripeRate(stripeKey)); err != nil {
			return nil, fmt.Errorf("configuration: stripe: %w", err)
		}
	}
	if len(cfg.StripeWebhookSecrets) > 0 && receivers["stripe"] == nil {
		return nil, errors.New("configuration: stripe-webhook-secrets is set, but no stripe gateway is configured to read its events (set STRIPE_SECRET_KEY)")
	}
	if len(cfg.RefpspWebhookSecrets) > 0 && len(refpsps) == 0 {
		return nil, errors.New("configuration: refpsp-webhook-secrets is set, but no refpsp gateway is configured to read its events (set SETTLE_REFPSP_URL or SETTLE_REFPSP_ACCOUNTS)")
	}
	if cfg.AdyenAPIKey != "" {
		zone, err := time.LoadLocation(cfg.AdyenReportTimeZone)
		if err != nil {
			return nil, fmt.Errorf("configuration: adyen-report-timezone: %w", err)
		}
		gw, err := adyen.New(adyen.Config{
			BaseURL: cfg.AdyenURL, APIKey: cfg.AdyenAPIKey, MerchantAccount: cfg.AdyenMerchantAccount,
			HMACKeys: cfg.AdyenHMACKeys, NotifyUser: cfg.AdyenNotifyUser, NotifyPassword: cfg.AdyenNotifyPassword,
			Timeout: cfg.GatewayTimeout, NoShowHorizon: cfg.NoShowHorizon, Events: store,
			Observer:  metrics.GatewayObserver(adyen.DefaultName, tracing.Tracer()),
			ReportURL: cfg.AdyenReportURL, ReportUser: cfg.AdyenReportUser, ReportPassword: cfg.AdyenReportPassword,
			ReportTimeZone: zone,
		})
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		gateways[adyen.DefaultName], receivers[adyen.DefaultName] = gw, gw
		infos[adyen.DefaultName] = order.AccountInfo{Kind: "adyen", Fingerprint: fingerprint(cfg.AdyenAPIKey), ThreeDS: true}
		if budgets[adyen.DefaultName], err = cfg.budget(cfg.AdyenRate); err != nil {
			return nil, fmt.Errorf("configuration: adyen: %w", err)
		}
	}
	for name, build := range lab {
		gateways[name] = build(metrics.GatewayObserver(name, tracing.Tracer()))
	}
	if _, ok := gateways[cfg.DefaultGateway]; !ok {
		return nil, fmt.Errorf("configuration: default gateway %q is not configured (set SETTLE_REFPSP_URL, STRIPE_SECRET_KEY or ADYEN_API_KEY)", cfg.DefaultGateway)
	}
	// One breaker per gateway account, shared by the process's Services.
	breakers, err := order.NewBreakers(slices.Collect(maps.Keys(gateways)), order.BreakerConfig{
		FailureRate: cfg.BreakerRate, MinCalls: cfg.BreakerMinCalls, Cooldown: cfg.BreakerCooldown,
		SlowCall: cfg.GatewayTimeout / 2, ProbeLease: cfg.GatewayTimeout + cfg.ClaimGrace, OnState: metrics.BreakerState,
	})
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	seeds, err := cfg.routeSeeds()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	built = true
	a := &app{routeSeeds: seeds, cfg: cfg, log: log, pool: pool, store: store, gateways: gateways, receivers: receivers, accounts: accounts, infos: infos,
		budgets: budgets, breakers: breakers, failpoints: fps, metrics: metrics, tracing: tracing}
	// The metrics count every merchant's orders.
	metrics.WatchStore(func(ctx context.Context) (order.Stats, error) { return a.store.Stats(ctx, order.AnyMerchant) }, pool)
	metrics.WatchDisputes(func(ctx context.Context) (order.DisputeCounts, error) {
		return a.store.CountDisputes(ctx, order.DisputeDueWithin)
	})
	return a, nil
}

// routeSeed is one merchant's route rules to seed at start.
type routeSeed struct {
	merchant, note, actor string
	rules                 []order.RouteRule
}

// routeSeeds reads routes-file: a JSON list of SetRoutes requests (their
// expected_version unused).
func (c *config) routeSeeds() ([]routeSeed, error) {
	if c.RoutesFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.RoutesFile)
	if err != nil {
		return nil, fmt.Errorf("routes-file: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("routes-file %s: want a JSON list of SetRoutes requests: %w", c.RoutesFile, err)
	}
	var out []routeSeed
	for i, r := range raw {
		var req settlev1.SetRoutesRequest
		if err := protojson.Unmarshal(r, &req); err != nil {
			return nil, fmt.Errorf("routes-file %s: entry %d: %w", c.RoutesFile, i+1, err)
		}
		rules, err := grpcapi.RouteRulesFromProto(req.GetRules())
		if err != nil {
			return nil, fmt.Errorf("routes-file %s: entry %d: %w", c.RoutesFile, i+1, err)
		}
		out = append(out, routeSeed{merchant: req.GetMerchantId(), note: req.GetNote(), actor: "routes-file", rules: rules})
	}
	return out, nil
}

// seedRoutes makes each seed's rules its merchant's, unless they are.
func (a *app) seedRoutes(ctx context.Context, svc *order.Service) error {
	for _, r := range a.routeSeeds {
		made, err := svc.SeedRoutes(ctx, r.merchant, r.rules, r.actor, r.note)
		if err != nil {
			return fmt.Errorf("route rules of merchant %q: %w", r.merchant, err)
		}
		if made {
			a.log.InfoContext(ctx, "route rules seeded", "merchant_id", r.merchant, "rules", len(r.rules), "actor", r.actor)
		}
	}
	return nil
}

// fingerprint is what the API shows of a credential: the first 12 hex
// digits of its SHA-256, which tells two keys apart and reveals neither.
func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// close flushes traces and closes the pool.
func (a *app) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.log.Warn("flush traces", "error", err)
	}
	a.pool.Close()
}

// bind listens on addr for the listener named what ("gRPC", "webhook",
// …). Its error is one line naming the listener, the address and the
// cause, and, when the address is taken, the flag that picks another.
func bind(ctx context.Context, what, addr, flagName string) (net.Listener, error) {
	lis, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err == nil {
		return lis, nil
	}
	cause := err
	var op *net.OpError
	if errors.As(err, &op) {
		cause = op.Err
	}
	var se *os.SyscallError
	if errors.As(cause, &se) {
		cause = se.Err
	}
	hint := ""
	if errors.Is(err, syscall.EADDRINUSE) {
		hint = fmt.Sprintf(" (another settle running? pick another address with -%s)", flagName)
	}
	return nil, fmt.Errorf("%s listener %s: %w%s", what, addr, cause, hint)
}

// listeners are the sockets of a server, each nil until bound (and nil
// when not configured). A server binds every one of them before it says
// it is serving.
type listeners struct {
	grpc, json, console, webhooks, metrics net.Listener
}

// bindMetrics binds the metrics listener, when an address is configured
// and it is not bound yet.
func (ls *listeners) bindMetrics(ctx context.Context, cfg *config) (err error) {
	if ls.metrics == nil && cfg.MetricsListen != "" {
		ls.metrics, err = bind(ctx, "metrics", cfg.MetricsListen, "metrics-listen")
	}
	return err
}

// bindServer binds the gRPC listener and, when their addresses are
// configured, the JSON, console and webhook listeners, unless bound
// already.
func (ls *listeners) bindServer(ctx context.Context, cfg *config) (err error) {
	if ls.grpc == nil {
		if ls.grpc, err = bind(ctx, "gRPC", cfg.Listen, "listen"); err != nil {
			return err
		}
	}
	if ls.json == nil && cfg.JSONListen != "" {
		if ls.json, err = bind(ctx, "JSON", cfg.JSONListen, "json-listen"); err != nil {
			return err
		}
	}
	if ls.console == nil && cfg.ConsoleListen != "" {
		if ls.console, err = bind(ctx, "console", cfg.ConsoleListen, "console-listen"); err != nil {
			return err
		}
	}
	if ls.webhooks == nil && cfg.WebhookListen != "" {
		ls.webhooks, err = bind(ctx, "webhook", cfg.WebhookListen, "webhook-listen")
	}
	return err
}

// close closes every bound listener; closing one a server has closed
// already does no harm.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.grpc, ls.json, ls.console, ls.webhooks, ls.metrics} {
		if l != nil {
			l.Close()
		}
	}
}

// failed returns the failure that ended ctx through its cancel-cause
// function, or nil when ctx ended (or not) for its parent's reasons.
func failed(ctx context.Context) error {
	err := context.Cause(ctx)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// serveUntil runs serve in g until it returns: an end before gctx's
// (the server stopped unasked, or failed) is an error named what, and
// ends gctx; an end after it is the shutdown asked for.
func serveUntil(gctx context.Context, g *errgroup.Group, what string, serve func() error) {
	g.Go(func() error {
		err := serve()
		select {
		case <-gctx.Done():
			return nil // stopped as asked
		default:
		}
		if err == nil {
			err = errors.New("stopped unasked")
		}
		return fmt.Errorf("%s: %w", what, err)
	})
}

// serveMetrics serves /metrics, /healthz and /readyz on lis until ctx
// ends; nil lis (no metrics address) serves nothing. A failure of the
// listener is handed to fail.
func (a *app) serveMetrics(ctx context.Context, lis net.Listener, ready func(context.Context) error, fail func(error)) {
	if lis == nil {
		return
	}
	h := a.metrics.Handler(ready)
	if a.cfg.Pprof {
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		h = mux
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			fail(fmt.Errorf("metrics listener %s: %w", lis.Addr(), err))
		}
	}()
	a.log.Info("serving metrics", "addr", lis.Addr().String())
}

// serveWebhooks serves the gateways' events on lis until ctx ends; nil
// lis (no webhook address) serves nothing; g owns the server's goroutine,
// and a failure of the listener is handed to fail.
func (a *app) serveWebhooks(ctx context.Context, lis net.Listener, g *sync.WaitGroup, fail func(error)) error {
	if lis == nil {
		return nil
	}
	tlsCfg, err := a.cfg.webhookTLS()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// The Service records the events: one about a dispute is applied to
	// it (read first at a gateway that can be read), any other goes to
	// the store.
	svc, err := a.service()
	if err != nil {
		return err
	}
	h := webhook.New(svc, webhook.Config{
		Gateways: a.receivers,
		Accounts: a.accounts,
		MaxBody:  int64(a.cfg.WebhookMaxBody),
		OnEvent:  a.metrics.GatewayEvent,
	}, a.log)
	lim := webhook.DefaultLimits
	lim.MaxConnections = a.cfg.WebhookMaxConns
	lim.MaxConnectionsPerAddress = a.cfg.WebhookMaxConnsAddr
	g.Go(func() {
		if err := webhook.Serve(ctx, lis, h, lim, tlsCfg, a.cfg.ShutdownTimeout); err != nil {
			fail(fmt.Errorf("webhook listener %s: %w", lis.Addr(), err))
		}
	})
	a.log.Info("serving gateway events", "addr", lis.Addr().String(), "tls", tlsCfg != nil,
		"stripe", len(a.cfg.StripeWebhookSecrets) > 0, "refpsp", len(a.cfg.RefpspWebhookSecrets) > 0, "adyen", len(a.cfg.AdyenHMACKeys) > 0)
	return nil
}

func (a *app) reconciler() (*reconcile.Reconciler, error) {
	cfg := a.cfg.reconcileConfig(a.failpoints.Hit)
	cfg.OnCheck = a.metrics.ReconcileCheck
	cfg.OnEventSettled = a.metrics.EventSettled
	cfg.Budgets = a.budgets
	return reconcile.New(a.store, a.gateways, cfg, a.log)
}

// service returns the charge path on the app's store and gateways, with
// the gateways' request budgets, which the reconciler shares.
func (a *app) service() (*order.Service, error) {
	return order.NewService(a.store, a.gateways, order.Config{
		DefaultGateway: a.cfg.DefaultGateway,
		GatewayTimeout: a.cfg.GatewayTimeout,
		Grace:          a.cfg.ClaimGrace,
		FirstRecheck:   a.cfg.Schedule[0],
		Failpoint:      a.failpoints.Hit,
		LookupReuse:    a.cfg.LookupReuse,
		Budgets:        a.budgets,
		Unconfigured:   a.unconfigured(),
		Accounts:       a.infos,
		Breakers:       a.breakers,
	}, a.log)
}

// deliverer returns the webhook delivery worker for the configured
// endpoints, and exports their backlog as metrics.
func (a *app) deliverer() (*delivery.Deliverer, error) {
	eps, err := a.cfg.eventEndpoints()
	if err != nil {
		return nil, err
	}
	d, err := delivery.New(a.store, delivery.Config{
		Endpoints:    eps,
		Timeout:      a.cfg.DeliveryTimeout,
		PerMerchant:  a.cfg.DeliveryBatch,
		InFlight:     a.cfg.DeliveryInFlight,
		PollInterval: a.cfg.DeliveryPoll,
		RetryFor:     a.cfg.DeliveryRetryFor,
		OnRecord:     a.metrics.EventDelivery,
		Failpoint:    a.failpoints.Hit,
	}, a.log)
	if err != nil {
		return nil, err
	}
	if len(eps) > 0 {
		// The worker's merchants, those with an endpoint, are the backlog's:
		// a merchant that pulls its events has none waiting.
		a.metrics.WatchDeliveries(d.Backlog)
	}
	return d, nil
}

// unconfigured names the product's gateways this server lacks, with the
// setting that configures each (dev's refpsp is its simulator, "sim").
func (a *app) unconfigured() map[string]string {
	hints := map[string]string{}
	if a.gateways["stripe"] == nil {
		hints["stripe"] = "STRIPE_SECRET_KEY (or --stripe-secret-key-file)"
	}
	if a.gateways["refpsp"] == nil && a.gateways["sim"] == nil {
		hints["refpsp"] = "SETTLE_REFPSP_URL and SETTLE_REFPSP_KEY"
	}
	if a.gateways[adyen.DefaultName] == nil {
		hints[adyen.DefaultName] = "ADYEN_API_KEY, ADYEN_MERCHANT_ACCOUNT and ADYEN_HMAC_KEYS"
	}
	return hints
}

// serve waits for the database, then runs the gRPC API (and a reconciler,
// when asked) until ctx ends or one of its listeners fails; then it lets
// in-flight calls finish within the shutdown timeout. The metrics listener
// answers from the start, /readyz saying not ready until the database is
// reached; the gRPC and webhook ports are bound only then, unless ls holds
// them bound already (dev binds everything first). serving, when not nil,
// is called once every listener is bound and served.
func (a *app) serve(ctx context.Context, ls *listeners, withReconciler bool, opts grpcapi.Options, serving func(*listeners)) error {
	defer ls.close()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	svc, err := a.service()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	rec, err := a.reconciler()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	opts.Metrics = a.metrics
	if a.tracing.Exporting() {
		opts.Tracing = a.tracing
	}
	var del *delivery.Deliverer
	if withReconciler {
		if del, err = a.deliverer(); err != nil {
			return fmt.Errorf("configuration: %w", err)
		}
	}
	if opts.Auditor, err = a.auditor(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	srv := grpcapi.NewServer(svc, a.store, rec, a.log, opts)

	// The background loops run on their own context, which ends only once
	// the gRPC server has stopped: calls finishing during the shutdown
	// still see health checks and order notifications.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	defer func() { stopBG(); bg.Wait() }()
	// Ready also means that a new client can connect: behind a load
	// balancer, a server whose every connection place is held sends the
	// balancer's new clients elsewhere. gRPC health stays with the
	// database alone, for the clients already connected are served.
	ready := func(ctx context.Context) error {
		if err := srv.Accepting(); err != nil {
			return err
		}
		return a.ready(ctx)
	}
	if err := ls.bindMetrics(ctx, a.cfg); err != nil {
		return err
	}
	a.serveMetrics(bgCtx, ls.metrics, ready, fail)
	if err := a.waitForDatabase(ctx); err != nil {
		return err
	}
	if err := a.seedRoutes(ctx, svc); err != nil {
		return err
	}
	if err := ls.bindServer(ctx, a.cfg); err != nil {
		return err
	}
	lis := ls.grpc
	bg.Go(func() { a.watchDurability(bgCtx) })
	bg.Go(func() { a.store.KeepStatistics(bgCtx, a.log, time.Second) })
	bg.Go(func() { srv.WatchHealth(bgCtx, a.ready, 2*time.Second) })
	bg.Go(func() { a.store.ListenOrders(bgCtx, a.log, srv.OrderChanged, func() { srv.OrderChanged("") }) })
	if withReconciler {
		// Run ends with bgCtx, which is no failure to report.
		bg.Go(func() { _ = rec.Run(bgCtx) })
		bg.Go(func() { _ = del.Run(bgCtx) })
		bg.Go(func() { a.store.ListenDue(bgCtx, a.log, rec.Wake, func() { rec.Wake("") }) })
	}
	if err := a.serveWebhooks(bgCtx, ls.webhooks, &bg, fail); err != nil {
		return err
	}

	// The server runs until ctx ends or it fails; either way the second
	// goroutine stops it, letting in-flight calls finish within the
	// shutdown timeout.
	g, gctx := errgroup.WithContext(ctx)
	serveUntil(gctx, g, "serve gRPC", func() error { return srv.Serve(lis) })
	if ls.json != nil {
		serveUntil(gctx, g, "serve JSON over HTTP", func() error { return srv.ServeJSON(ls.json) })
	}
	if ls.console != nil {
		cs, err := a.console(srv, ls.console)
		if err != nil {
			return fmt.Errorf("configuration: %w", err)
		}
		bg.Go(func() { cs.console.Run(bgCtx) })
		serveUntil(gctx, g, "serve the console", func() error { return cs.serve(ls.console) })
		// The console's pages are answered before the API stops: its
		// actions are API calls.
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), a.cfg.ShutdownTimeout)
			defer cancel()
			if err := cs.http.Shutdown(sctx); err != nil {
				cs.http.Close()
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		a.log.Info("shutting down: letting in-flight calls finish", "timeout", a.cfg.ShutdownTimeout)
		srv.Health.Shutdown()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(a.cfg.ShutdownTimeout):
			a.log.Warn("shutdown timeout: stopping calls still in flight")
			srv.Stop()
		}
		return nil
	})
	a.log.Info("serving gRPC", "addr", lis.Addr().String(), "reconciler", withReconciler)
	if ls.json != nil {
		a.log.Info("serving JSON over HTTP", "addr", ls.json.Addr().String(), "tls", opts.JSON.TLS != nil)
	}
	if ls.console != nil {
		a.log.Info("serving the console", "addr", ls.console.Addr().String())
	}
	if serving != nil {
		serving(ls)
	}
	err = g.Wait()
	if f := failed(ctx); f != nil {
		return f
	}
	return err
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, _, err := parse("serve", args, getenv, stderr, commandOptions["serve"]...)
	if err != nil {
		return err
	}
	return serveWith(ctx, cfg, nil, getenv, stderr)
}

// serveWith is serve once configured, with the lab's gateways added (nil
// for serve itself; see runBenchServer).
func serveWith(ctx context.Context, cfg *config, lab map[string]func(gateway.Observer) order.Gateway, getenv func(string) string, stderr io.Writer) error {
	opts, err := cfg.serverOptions()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log := cfg.logger(stderr)
	a, err := newApp(ctx, cfg, log, "refpsp", lab, getenv)
	if err != nil {
		return err
	}
	defer a.close()
	return a.serve(ctx, &listeners{}, cfg.WithReconciler, opts, nil)
}

func runReconcile(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, _, err := parse("reconcile", args, getenv, stderr, commandOptions["reconcile"]...)
	if err != nil {
		return err
	}
	log := cfg.logger(stderr)
	a, err := newApp(ctx, cfg, log, "refpsp", nil, getenv)
	if err != nil {
		return err
	}
	defer a.close()
	rec, err := a.reconciler()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	del, err := a.deliverer()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	audits, err := a.auditScheduler()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var ls listeners
	if err := ls.bindMetrics(ctx, cfg); err != nil {
		return err
	}
	defer ls.close()
	a.serveMetrics(ctx, ls.metrics, a.ready, fail)
	if err := a.waitForDatabase(ctx); err != nil {
		return err
	}
	go a.watchDurability(ctx)
	log.Info("reconciling and delivering events", "batch", cfg.BatchSize, "poll", cfg.PollInterval)
	// Gateways' events wake the reconciler through the database.
	lctx, stop := context.WithCancel(ctx)
	listened := make(chan struct{})
	go func() { a.store.ListenDue(lctx, log, rec.Wake, func() { rec.Wake("") }); close(listened) }()
	defer func() { stop(); <-listened }()
	var g errgroup.Group
	g.Go(func() error { return rec.Run(ctx) })
	g.Go(func() error { return del.Run(ctx) })
	if audits != nil {
		g.Go(func() error { return audits.Run(ctx) })
	}
	err = g.Wait()
	if f := failed(ctx); f != nil {
		return f
	}
	return err
}

// runDeliver runs the webhook delivery worker alone: it needs the
// database and the endpoints, not the gateways.
func runDeliver(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, _, err := parse("deliver", args, getenv, stderr, commandOptions["deliver"]...)
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("configuration: DATABASE_URL (or --database-url) is required")
	}
	log := cfg.logger(stderr)
	fps, err := failpoint.Parse(cfg.Failpoints)
	if err != nil {
		return fmt.Errorf("configuration: SETTLE_FAILPOINTS: %w", err)
	}
	tracing, err := telemetry.NewTracing(ctx, getenv)
	if err != nil {
		return fmt.Errorf("configuration: tracing: %w", err)
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, int32(cfg.DBMaxConns))
	if err != nil {
		return err
	}
	a := &app{cfg: cfg, log: log, pool: pool, store: postgres.NewStore(pool), failpoints: fps,
		metrics: telemetry.NewMetrics(), tracing: tracing}
	defer a.close()
	del, err := a.deliverer()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var ls listeners
	if err := ls.bindMetrics(ctx, cfg); err != nil {
		return err
	}
	defer ls.close()
	a.serveMetrics(ctx, ls.metrics, a.ready, fail)
	if err := a.waitForDatabase(ctx); err != nil {
		return err
	}
	go a.watchDurability(ctx)
	log.Info("delivering events", "poll", cfg.DeliveryPoll)
	err = del.Run(ctx)
	if f := failed(ctx); f != nil {
		return f
	}
	return err
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, fs, err := parse("migrate", args, getenv, stderr, commandOptions["migrate"]...)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "up" && fs.Arg(0) != "status") {
		return errors.New("usage: settle migrate up|status")
	}
	if cfg.DatabaseURL == "" {
		return errors.New("configuration: DATABASE_URL (or --database-url) is required")
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if fs.Arg(0) == "status" {
		return postgres.PrintStatus(ctx, pool, stdout)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrated: the database is up to date")
	return nil
}

func runGatewaySim(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle gatewaysim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address")
	opts := simFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Events.URL != "" && len(opts.Events.Secrets) == 0 {
		return errors.New("configuration: --sim-events-url needs --sim-events-secrets")
	}
	if err := checkSim(opts); err != nil {
		return err
	}
	lis, err := bind(ctx, "simulator", *addr, "addr")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "gateway simulator on http://%s (ledger: /v1/ledger)\n", lis.Addr())
	return sim.New(*opts).Serve(ctx, lis)
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// simFlags registers the simulator's options on fs.
func simFlags(fs *flag.FlagSet) *sim.Options {
	o := &sim.Options{}
	fs.BoolVar(&o.Dedupe, "sim-dedupe", false, "simulator: a repeated reference returns its first charge")
	fs.DurationVar(&o.ClientTimeout, "sim-timeout-wait", 30*time.Second, "simulator: how long tok_timeout keeps a charged request waiting")
	fs.Uint64Var(&o.Seed, "sim-seed", 1, "simulator: seed of the random faults")
	fs.DurationVar(&o.AuthorizationLifetime, "sim-authorization-lifetime", sim.DefaultAuthorizationLifetime,
		"simulator: how long an authorization (manual capture) is held before it lapses, its capture_before; tok_lapse_<ms> sets its own")
	fs.Float64Var(&o.Random.Decline, "sim-rate-decline", 0, "simulator: rate of declines for tok_ok/tok_random")
	fs.Float64Var(&o.Random.Timeout, "sim-rate-timeout", 0, "simulator: rate of timeouts after charging")
	fs.Float64Var(&o.Random.FiveXXAfterCharge, "sim-rate-5xx-after-charge", 0, "simulator: rate of 500s after charging")
	fs.Float64Var(&o.Random.DropAfterCharge, "sim-rate-drop-after-charge", 0, "simulator: rate of dropped connections after charging")
	fs.Float64Var(&o.Random.FiveXXNoCharge, "sim-rate-5xx", 0, "simulator: rate of 503s without charging")
	fs.Float64Var(&o.Random.Slow, "sim-rate-slow", 0, "simulator: rate of slow answers (charge made after the wait)")
	fs.DurationVar(&o.Random.SlowMax, "sim-slow-max", 2*time.Second, "simulator: longest slow answer")
	fs.StringVar(&o.Events.URL, "sim-events-url", "", "simulator: URL to push an event to for every charge (Settle's /webhooks/refpsp); empty: none")
	fs.Func("sim-events-secrets", "simulator: comma-separated secrets that sign the events", func(v string) error {
		o.Events.Secrets = splitList(v)
		return nil
	})
	fs.DurationVar(&o.Events.Delay, "sim-events-delay", 0, "simulator: wait before an event is sent")
	fs.DurationVar(&o.Events.Reorder, "sim-events-reorder", 0, "simulator: random extra wait up to this, so events arrive out of order")
	fs.Float64Var(&o.Events.Duplicate, "sim-events-duplicate", 0, "simulator: rate of events delivered twice")
	fs.Float64Var(&o.Events.Loss, "sim-events-loss", 0, "simulator: rate of events never delivered")
	return o
}

// checkSim refuses simulator options that it would otherwise quietly
// replace with its defaults.
func checkSim(o *sim.Options) error {
	if o.AuthorizationLifetime <= 0 {
		return fmt.Errorf("configuration: --sim-authorization-lifetime must be positive (e.g. %s), not %s", sim.DefaultAuthorizationLifetime, o.AuthorizationLifetime)
	}
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
