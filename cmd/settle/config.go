package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/settlepay/settle/internal/delivery"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/reconcile"
)

// config is every setting of every command, filled from flags, then from
// the environment, then from defaults.
type config struct {
	DatabaseURL       string
	DBMaxConns        int
	Listen            string
	JSONListen        string
	ConsoleListen     string
	ShutdownTimeout   time.Duration
	LogFormat         string
	LogLevel          slog.Level
	DefaultGateway    string
	RefpspURL         string
	RefpspKey         string
	RefpspAccounts    []string
	RoutesFile        string
	GatewayTimeout    time.Duration
	ClaimGrace        time.Duration
	Schedule          []time.Duration
	BatchSize         int
	Concurrency       int
	PollInterval      time.Duration
	NoShowHorizon     time.Duration
	ActionExpiry      time.Duration
	ActionRecheckMax  time.Duration
	LookupReuse       time.Duration
	LookupWait        time.Duration
	LookupShare       float64
	RefpspRate        float64
	StripeRate        float64
	BreakerCooldown   time.Duration
	BreakerRate       float64
	BreakerMinCalls   int
	WithReconciler    bool
	ReviewRecheck     time.Duration
	Failpoints        string
	APIKeys           string
	APIKeysFile       string
	RateLimit         float64
	RateBurst         int
	MaxInFlight       int
	MaxWatches        int
	AdmissionInFlight int
	AdmissionQueue    int
	AdmissionMaxWait  time.Duration
	WatchLifetime     time.Duration
	AuthFailRate      float64
	AuthFailBurst     int
	MaxConns          int
	MaxConnsPerAddr   int
	MaxKeylessConns   int
	KeylessGrace      time.Duration
	PrefixV4          int
	PrefixV6          int
	MaxStreams        int
	MaxKeyless        int
	MaxKeylessPerAddr int
	ConnIdle          time.Duration
	ConnAge           time.Duration
	ConnAgeGrace      time.Duration
	Reflection        bool
	TLSCert           string
	TLSKey            string
	TLSClientCA       string
	Plaintext         bool
	NoAPIKeys         bool
	MetricsListen     string
	Pprof             bool
	EventWebhooks     string
	EventWebhooksFile string
	DeliveryTimeout   time.Duration
	DeliveryRetryFor  time.Duration
	DeliveryPoll      time.Duration
	DeliveryBatch     int
	DeliveryInFlight  int
	// AllowUnsafeDatabase lets a test start on a database with fsync or
	// synchronous_commit off.
	AllowUnsafeDatabase bool
	// Stripe: the gateway named "stripe" is configured when a key is set.
	StripeSecretKey     string
	StripeSecretKeyFile string
	StripeAPIBase       string
	StripeMaxRetries    int
	StripeReplayWindow  time.Duration
	StripeMulticapture  bool
	// Adyen: the gateway named "adyen" is configured when a key is set.
	AdyenAPIKey          string
	AdyenMerchantAccount string
	AdyenURL             string
	AdyenRate            float64
	AdyenNotifyUser      string
	AdyenNotifyPassword  string
	// The reports the audit reads from an Adyen account.
	AdyenReportURL      string
	AdyenReportUser     string
	AdyenReportPassword string
	AdyenReportTimeZone string
	// The webhook listener for gateways' events: off when WebhookListen is
	// empty.
	WebhookListen        string
	WebhookTLSCert       string
	WebhookTLSKey        string
	WebhookMaxBody       int
	WebhookMaxConns      int
	WebhookMaxConnsAddr  int
	WebhookTolerance     time.Duration
	WebhookPlaintext     bool
	StripeWebhookSecrets []string
	RefpspWebhookSecrets []string
	AdyenHMACKeys        []string

	// The gateway audit: settle audit, and settle reconcile's schedule.
	AuditInterval  time.Duration
	AuditWindow    time.Duration
	AuditMargin    time.Duration
	AuditMerchants []string
}

// admissionPerConn is how many calls that write may run per database
// connection by default: a call holds a connection only while its
// statements run, and waits for its gateway without one; and concurrent
// calls share commits (group commit), so that the server's throughput
// grows with the calls in flight well past the pool's size (settle bench:
// 256 clients on a pool of 16 carried the most orders per second, 1,024
// fewer, with a p99 five times as long).
const admissionPerConn = 16

// admission is the admission limits the settings say.
func (c *config) admission() grpcapi.AdmissionLimits {
	if c.AdmissionInFlight < 0 {
		return grpcapi.AdmissionLimits{}
	}
	l := grpcapi.AdmissionLimits{MaxInFlight: c.AdmissionInFlight, MaxQueue: c.AdmissionQueue, MaxWait: c.AdmissionMaxWait}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = admissionPerConn * max(c.DBMaxConns, 1)
	}
	if l.MaxQueue == 0 {
		l.MaxQueue = l.MaxInFlight
	}
	return l
}

// option is one setting: its flag, its environment variable, its default.
type option struct {
	flag, env, def, usage string
	set                   func(c *config, v string) error
}

// options is the configuration reference; `settle config` prints it.
var options = []option{
	{"database-url", "DATABASE_URL", "", "PostgreSQL URL or DSN; name every host of a cluster (postgres://db1,db2/settle): Settle writes to the one that accepts writes, and finds the new one after a failover", setString(func(c *config) *string { return &c.DatabaseURL })},
	{"db-max-conns", "SETTLE_DB_MAX_CONNS", "16", "most database connections in the pool (opened as needed; each order holds one only while a statement runs)", setInt(func(c *config) *int { return &c.DBMaxConns })},
	{"listen", "SETTLE_LISTEN", "127.0.0.1:50051", "gRPC listen address", setString(func(c *config) *string { return &c.Listen })},
	{"json-listen", "SETTLE_JSON_LISTEN", "", "HTTP address for JSON over HTTP (POST /v1/orders, …, the OpenAPI document at /v1/openapi.json), through the gRPC API's keys, limits and TLS (empty: none)", setString(func(c *config) *string { return &c.JSONListen })},
	{"console-listen", "SETTLE_CONSOLE_LISTEN", "", "HTTP address of the operator's console (HTML pages behind an ops key), through the gRPC API's keys and TLS (empty: none)", setString(func(c *config) *string { return &c.ConsoleListen })},
	{"shutdown-timeout", "SETTLE_SHUTDOWN_TIMEOUT", "15s", "how long in-flight calls may finish after SIGTERM", setDuration(func(c *config) *time.Duration { return &c.ShutdownTimeout })},
	{"log-format", "SETTLE_LOG_FORMAT", "json", "json or text", setString(func(c *config) *string { return &c.LogFormat })},
	{"log-level", "SETTLE_LOG_LEVEL", "info", "debug, info, warn or error; successful RPCs log at debug, transitions and gateway calls at info", setLevel(func(c *config) *slog.Level { return &c.LogLevel })},
	{"default-gateway", "SETTLE_DEFAULT_GATEWAY", "refpsp", "gateway for orders created without one: refpsp, stripe or adyen", setString(func(c *config) *string { return &c.DefaultGateway })},
	{"refpsp-url", "SETTLE_REFPSP_URL", "", "base URL of the refpsp gateway", setString(func(c *config) *string { return &c.RefpspURL })},
	{"refpsp-key", "SETTLE_REFPSP_KEY", "", "API key of the refpsp gateway (prefer the environment)", setString(func(c *config) *string { return &c.RefpspKey })},
	{"refpsp-accounts", "SETTLE_REFPSP_ACCOUNTS", "", "more refpsp gateway accounts, comma-separated name=URL: each is a gateway of its own name, with the key in SETTLE_REFPSP_KEY_<NAME> (else refpsp-key) and its events at /webhooks/<name>", setList(func(c *config) *[]string { return &c.RefpspAccounts })},
	{"routes-file", "SETTLE_ROUTES_FILE", "", "JSON file of merchants' route rules, a list of SetRoutes requests ({\"merchant_id\", \"rules\", \"note\"}): at start each merchant's rules become these, as a new version, unless they already are", setString(func(c *config) *string { return &c.RoutesFile })},
	{"gateway-timeout", "SETTLE_GATEWAY_TIMEOUT", "10s", "deadline of one gateway call", setDuration(func(c *config) *time.Duration { return &c.GatewayTimeout })},
	{"claim-grace", "SETTLE_CLAIM_GRACE", "5s", "added to the gateway timeout before the reconciler may look at a claimed order", setDuration(func(c *config) *time.Duration { return &c.ClaimGrace })},
	{"reconcile-schedule", "SETTLE_RECONCILE_SCHEDULE", durationsString(reconcile.DefaultSchedule), "waits before each check of an unknown outcome; NEEDS_REVIEW after the last", setDurations(func(c *config) *[]time.Duration { return &c.Schedule })},
	{"reconcile-batch", "SETTLE_RECONCILE_BATCH", "100", "orders leased per reconcile batch", setInt(func(c *config) *int { return &c.BatchSize })},
	{"reconcile-concurrency", "SETTLE_RECONCILE_CONCURRENCY", "8", "gateway lookups in flight per reconciler", setInt(func(c *config) *int { return &c.Concurrency })},
	{"reconcile-poll", "SETTLE_RECONCILE_POLL", "1s", "wait between polls when nothing is due", setDuration(func(c *config) *time.Duration { return &c.PollInterval })},
	{"no-show-horizon", "SETTLE_NO_SHOW_HORIZON", "70s", "age after which a charge the gateway has not seen can no longer arrive (gateway timeout + margin)", setDuration(func(c *config) *time.Duration { return &c.NoShowHorizon })},
	{"audit-interval", "SETTLE_AUDIT_INTERVAL", "0s", "reconcile: how often to audit each gateway account over the windows closed since its last audit (0: never; settle audit runs one on demand)", setDuration(func(c *config) *time.Duration { return &c.AuditInterval })},
	{"audit-window", "SETTLE_AUDIT_WINDOW", "24h", "length of each audit window; a window is audited once it ended no-show-horizon + audit-margin ago", setDuration(func(c *config) *time.Duration { return &c.AuditWindow })},
	{"audit-margin", "SETTLE_AUDIT_MARGIN", "5m", "how far the audit's listing of a gateway's records reaches past each end of its window (the gateways' clocks); successive windows' listings overlap by it, and findings seen twice are one", setDuration(func(c *config) *time.Duration { return &c.AuditMargin })},
	{"audit-merchants", "SETTLE_AUDIT_MERCHANTS", "default", "comma-separated merchants whose gateway accounts the scheduled audit covers", setList(func(c *config) *[]string { return &c.AuditMerchants })},
	{"review-recheck", "SETTLE_REVIEW_RECHECK", "1h", "how often an order in NEEDS_REVIEW is looked up again; a charge found then makes it PAID", setDuration(func(c *config) *time.Duration { return &c.ReviewRecheck })},
	{"action-expiry", "SETTLE_ACTION_EXPIRY", "1h", "how long a customer has to complete a 3-D Secure challenge (REQUIRES_ACTION) before the reconciler cancels the attempt and the order is PENDING again", setDuration(func(c *config) *time.Duration { return &c.ActionExpiry })},
	{"action-recheck-max", "SETTLE_ACTION_RECHECK_MAX", "5m", "longest wait between two reconciler checks of an order waiting for the customer; each waits half the attempt's age, from the first schedule step up to this", setDuration(func(c *config) *time.Duration { return &c.ActionRecheckMax })},
	{"lookup-reuse", "SETTLE_LOOKUP_REUSE", "2s", "how long the answer of a gateway lookup that settled nothing (the customer has still to act) is reused for GetOrder and ChargeOrder of the same unchanged order (0: never; one lookup per attempt is in flight either way)", setDuration(func(c *config) *time.Duration { return &c.LookupReuse })},
	{"lookup-wait", "SETTLE_LOOKUP_WAIT", "500ms", "how long a gateway lookup waits for its gateway's request budget; past it GetOrder answers the order as stored, a ChargeOrder replay UNAVAILABLE with a retry hint", setDuration(func(c *config) *time.Duration { return &c.LookupWait })},
	{"lookup-share", "SETTLE_LOOKUP_SHARE", "0.25", "part of each gateway's request rate that lookups may use; charges keep the rest", setFloat(func(c *config) *float64 { return &c.LookupShare })},
	{"refpsp-request-rate", "SETTLE_REFPSP_REQUEST_RATE", "100", "requests per second this process may send the refpsp gateway's account, charges and lookups together", setFloat(func(c *config) *float64 { return &c.RefpspRate })},
	{"stripe-request-rate", "SETTLE_STRIPE_REQUEST_RATE", "", "requests per second this process may send the Stripe account (empty: 80 with a live key, 20 with a test key, under Stripe's 100 and 25); divide by the processes sharing the account", setFloat(func(c *config) *float64 { return &c.StripeRate })},
	{"breaker-cooldown", "SETTLE_BREAKER_COOLDOWN", "10s", "how long a gateway account's open breaker sends new attempts of orders with routes to their next route, before one attempt probes the gateway", setDuration(func(c *config) *time.Duration { return &c.BreakerCooldown })},
	{"breaker-failure-rate", "SETTLE_BREAKER_FAILURE_RATE", "0.5", "share of a gateway account's charge calls within 30s (not sent, unknown, or slower than half gateway-timeout) that opens its breaker", setFloat(func(c *config) *float64 { return &c.BreakerRate })},
	{"breaker-min-calls", "SETTLE_BREAKER_MIN_CALLS", "10", "fewest charge calls within 30s that can open a gateway account's breaker", setInt(func(c *config) *int { return &c.BreakerMinCalls })},
	{"with-reconciler", "SETTLE_WITH_RECONCILER", "false", "serve: also run a reconciler in-process", setBool(func(c *config) *bool { return &c.WithReconciler })},
	{"failpoints", "SETTLE_FAILPOINTS", "", "crash tests only: failpoints that kill the process", setString(func(c *config) *string { return &c.Failpoints })},
	{"api-keys", "SETTLE_API_KEYS", "", "API keys as `<sha256 hex> <merchant> <checkout|ops> <name>`, separated by ;. An ops key reaches its merchant's orders alone; merchant * makes it platform-wide", setString(func(c *config) *string { return &c.APIKeys })},
	{"api-keys-file", "SETTLE_API_KEYS_FILE", "", "file of API keys, one per line, as in --api-keys", setString(func(c *config) *string { return &c.APIKeysFile })},
	{"rate-limit", "SETTLE_RATE_LIMIT", "200", "requests per second per API key (0: no limit)", setFloat(func(c *config) *float64 { return &c.RateLimit })},
	{"rate-burst", "SETTLE_RATE_BURST", "400", "burst of requests per API key", setInt(func(c *config) *int { return &c.RateBurst })},
	{"max-inflight", "SETTLE_MAX_INFLIGHT", "64", "calls in flight per API key (0: no limit)", setInt(func(c *config) *int { return &c.MaxInFlight })},
	{"admission-max-inflight", "SETTLE_ADMISSION_MAX_INFLIGHT", "0", "OrderService calls that write (create, charge, refund, capture, void, cancel) running at once across every API key; past it they queue, and past the queue they are refused RESOURCE_EXHAUSTED before doing anything (0: 16 × db-max-conns; -1: no admission control)", setInt(func(c *config) *int { return &c.AdmissionInFlight })},
	{"admission-queue", "SETTLE_ADMISSION_QUEUE", "0", "calls that may wait for a place past admission-max-inflight, first come first served; one waits only while its deadline leaves time for the expected wait and its own run (0: as many as admission-max-inflight)", setInt(func(c *config) *int { return &c.AdmissionQueue })},
	{"admission-max-wait", "SETTLE_ADMISSION_MAX_WAIT", "1s", "longest wait in the admission queue of a call without a deadline", setDuration(func(c *config) *time.Duration { return &c.AdmissionMaxWait })},
	{"max-watches", "SETTLE_MAX_WATCHES", "100", "WatchOrder streams open at once per API key (0: no limit); they do not count against max-inflight", setInt(func(c *config) *int { return &c.MaxWatches })},
	{"watch-lifetime", "SETTLE_WATCH_LIFETIME", "10m", "a WatchOrder stream ends (status OK) after this long even if its order is not terminal; the client watches again", setDuration(func(c *config) *time.Duration { return &c.WatchLifetime })},
	{"auth-failure-rate", "SETTLE_AUTH_FAILURE_RATE", "5", "calls with a missing or wrong API key per second per client address; past it (and the burst) they are RESOURCE_EXHAUSTED", setFloat(func(c *config) *float64 { return &c.AuthFailRate })},
	{"auth-failure-burst", "SETTLE_AUTH_FAILURE_BURST", "20", "burst of calls with a missing or wrong API key per client address", setInt(func(c *config) *int { return &c.AuthFailBurst })},
	{"max-connections", "SETTLE_MAX_CONNECTIONS", "1024", "gRPC connections open at once; more wait to be accepted", setInt(func(c *config) *int { return &c.MaxConns })},
	{"max-connections-per-address", "SETTLE_MAX_CONNECTIONS_PER_ADDRESS", "256", "gRPC connections open at once from one client address (see address-prefix-ipv4); one past it replaces the address's oldest keyless connection, or is closed at once (behind a load balancer that hides clients' addresses, every client is one address: see docs/operations.md)", setInt(func(c *config) *int { return &c.MaxConnsPerAddr })},
	{"max-keyless-connections-per-address", "SETTLE_MAX_KEYLESS_CONNECTIONS_PER_ADDRESS", "16", "gRPC connections from one client address that have not yet carried a call with a valid API key; one past it replaces the address's oldest such connection", setInt(func(c *config) *int { return &c.MaxKeylessConns })},
	{"keyless-grace", "SETTLE_KEYLESS_GRACE", "30s", "a gRPC connection that has carried no call with a valid API key this long after it opened is closed once no call is open on it (health checks included), and in any case one more keyless-grace later", setDuration(func(c *config) *time.Duration { return &c.KeylessGrace })},
	{"address-prefix-ipv4", "SETTLE_ADDRESS_PREFIX_IPV4", "32", "leading bits of an IPv4 address that make one client address, for the per-address limits", setInt(func(c *config) *int { return &c.PrefixV4 })},
	{"address-prefix-ipv6", "SETTLE_ADDRESS_PREFIX_IPV6", "64", "leading bits of an IPv6 address that make one client address, for the per-address limits", setInt(func(c *config) *int { return &c.PrefixV6 })},
	{"max-concurrent-streams", "SETTLE_MAX_CONCURRENT_STREAMS", "100", "calls open at once on one gRPC connection", setInt(func(c *config) *int { return &c.MaxStreams })},
	{"max-keyless-streams", "SETTLE_MAX_KEYLESS_STREAMS", "1024", "streams that need no API key (health Watch, reflection) open at once; client-side health checking holds one per connection", setInt(func(c *config) *int { return &c.MaxKeyless })},
	{"max-keyless-streams-per-address", "SETTLE_MAX_KEYLESS_STREAMS_PER_ADDRESS", "256", "streams that need no API key open at once from one client address", setInt(func(c *config) *int { return &c.MaxKeylessPerAddr })},
	{"max-connection-idle", "SETTLE_MAX_CONNECTION_IDLE", "5m", "a gRPC connection with no call open for this long is closed (GOAWAY)", setDuration(func(c *config) *time.Duration { return &c.ConnIdle })},
	{"max-connection-age", "SETTLE_MAX_CONNECTION_AGE", "30m", "a gRPC connection this old (±10%) is closed (GOAWAY), so clients spread over new servers", setDuration(func(c *config) *time.Duration { return &c.ConnAge })},
	{"max-connection-age-grace", "SETTLE_MAX_CONNECTION_AGE_GRACE", "1m", "how long calls on a connection closed for its age may go on", setDuration(func(c *config) *time.Duration { return &c.ConnAgeGrace })},
	{"reflection", "SETTLE_REFLECTION", "true", "serve gRPC reflection", setBool(func(c *config) *bool { return &c.Reflection })},
	{"tls-cert", "SETTLE_TLS_CERT", "", "server certificate (PEM)", setString(func(c *config) *string { return &c.TLSCert })},
	{"tls-key", "SETTLE_TLS_KEY", "", "server private key (PEM)", setString(func(c *config) *string { return &c.TLSKey })},
	{"tls-client-ca", "SETTLE_TLS_CLIENT_CA", "", "CA (PEM) that client certificates must chain to: mutual TLS", setString(func(c *config) *string { return &c.TLSClientCA })},
	{"event-webhooks", "SETTLE_EVENT_WEBHOOKS", "", "merchants' endpoints for events out (order.paid, …) as `<merchant> <https URL> <secret>[,<secret>…]`, separated by ; (several secrets while rotating; prefer the environment or the file)", setString(func(c *config) *string { return &c.EventWebhooks })},
	{"event-webhooks-file", "SETTLE_EVENT_WEBHOOKS_FILE", "", "file of merchants' event endpoints, one per line, as in --event-webhooks", setString(func(c *config) *string { return &c.EventWebhooksFile })},
	{"event-delivery-timeout", "SETTLE_EVENT_DELIVERY_TIMEOUT", "10s", "deadline of one event POST to a merchant, answer included", setDuration(func(c *config) *time.Duration { return &c.DeliveryTimeout })},
	{"event-retry-for", "SETTLE_EVENT_RETRY_FOR", "72h", "how long after its transition an event is retried before it is marked failed", setDuration(func(c *config) *time.Duration { return &c.DeliveryRetryFor })},
	{"event-delivery-poll", "SETTLE_EVENT_DELIVERY_POLL", "1s", "wait between looks for events to deliver", setDuration(func(c *config) *time.Duration { return &c.DeliveryPoll })},
	{"event-delivery-batch", "SETTLE_EVENT_DELIVERY_BATCH", "32", "events of one merchant leased at once", setInt(func(c *config) *int { return &c.DeliveryBatch })},
	{"event-delivery-in-flight", "SETTLE_EVENT_DELIVERY_IN_FLIGHT", "8", "POSTs to one merchant's endpoint at once (1: one after another); the first of each batch goes alone", setInt(func(c *config) *int { return &c.DeliveryInFlight })},
	{"stripe-secret-key", "STRIPE_SECRET_KEY", "", "Stripe secret key (sk_...); configures the gateway \"stripe\" (prefer the environment or the file)", setString(func(c *config) *string { return &c.StripeSecretKey })},
	{"stripe-secret-key-file", "STRIPE_SECRET_KEY_FILE", "", "file holding the Stripe secret key, instead of stripe-secret-key", setString(func(c *config) *string { return &c.StripeSecretKeyFile })},
	{"stripe-api-base", "STRIPE_API_BASE", "https://api.stripe.com", "Stripe API base URL (stripe-mock or a fake in tests)", setString(func(c *config) *string { return &c.StripeAPIBase })},
	{"stripe-max-retries", "SETTLE_STRIPE_MAX_RETRIES", "2", "resends of a failed Stripe call by stripe-go, under the same idempotency key, within gateway-timeout", setInt(func(c *config) *int { return &c.StripeMaxRetries })},
	{"stripe-replay-window", "SETTLE_STRIPE_REPLAY_WINDOW", "20h", "age past which the reconciler no longer replays the unconfirmed create of an attempt whose PaymentIntent id was never recorded (keys live 24h; at most 23h): NEEDS_REVIEW instead", setDuration(func(c *config) *time.Duration { return &c.StripeReplayWindow })},
	{"stripe-multicapture", "SETTLE_STRIPE_MULTICAPTURE", "false", "your Stripe account has multicapture (IC+ pricing): manual-capture orders may capture several times (final=false); without it such a capture is declined multicapture_unsupported", setBool(func(c *config) *bool { return &c.StripeMulticapture })},
	{"adyen-api-key", "ADYEN_API_KEY", "", "Adyen Checkout API key (X-API-Key); configures the gateway \"adyen\", with adyen-merchant-account and adyen-hmac-keys", setString(func(c *config) *string { return &c.AdyenAPIKey })},
	{"adyen-merchant-account", "ADYEN_MERCHANT_ACCOUNT", "", "Adyen merchant account every payment is made on", setString(func(c *config) *string { return &c.AdyenMerchantAccount })},
	{"adyen-url", "ADYEN_URL", adyen.TestBaseURL, "Adyen Checkout API base URL, ending in /v71: the test endpoint, or https://<prefix>-checkout-live.adyenpayments.com/checkout/v71 (the live URL prefix is in the Customer Area, Developers, API URLs)", setString(func(c *config) *string { return &c.AdyenURL })},
	{"adyen-report-url", "ADYEN_REPORT_URL", "", "the Customer Area's report folder of the merchant account, from which the audit downloads the daily Payment accounting reports (empty: https://ca-test.adyen.com or https://ca-live.adyen.com/reports/download/MerchantAccount/<account>, after adyen-url)", setString(func(c *config) *string { return &c.AdyenReportURL })},
	{"adyen-report-user", "ADYEN_REPORT_USER", "", "the report user (report@Company.<company>) whose basic authentication downloads the reports, with adyen-report-password (empty: adyen-api-key as X-API-Key, which then needs the report download role)", setString(func(c *config) *string { return &c.AdyenReportUser })},
	{"adyen-report-password", "ADYEN_REPORT_PASSWORD", "", "the report user's password", setString(func(c *config) *string { return &c.AdyenReportPassword })},
	{"adyen-report-timezone", "ADYEN_REPORT_TIMEZONE", "UTC", "the Adyen account's time zone setting (an IANA name such as Europe/Amsterdam), in which its reports book rows and cut days", setString(func(c *config) *string { return &c.AdyenReportTimeZone })},
	{"adyen-request-rate", "SETTLE_ADYEN_REQUEST_RATE", "100", "requests per second this process may send the Adyen account, payments, modifications and technical cancels together", setFloat(func(c *config) *float64 { return &c.AdyenRate })},
	{"metrics-listen", "SETTLE_METRICS_LISTEN", "", "HTTP address for /metrics, /healthz and /readyz (empty: none)", setString(func(c *config) *string { return &c.MetricsListen })},
	{"pprof", "SETTLE_PPROF", "false", "also serve Go's profiler at /debug/pprof/ on the metrics listener; refused unless metrics-listen is a loopback address", setBool(func(c *config) *bool { return &c.Pprof })},
	{"plaintext", "SETTLE_PLAINTEXT", "false", "serve gRPC without TLS on a non-loopback address, behind a proxy that terminates TLS (plaintext on loopback needs no flag)", setBool(func(c *config) *bool { return &c.Plaintext })},
	{"allow-unsafe-database", "SETTLE_ALLOW_UNSAFE_DATABASE", "false", "tests only: start on a database with fsync or synchronous_commit off, which can lose acknowledged commits (refused otherwise)", setBool(func(c *config) *bool { return &c.AllowUnsafeDatabase })},
	{"no-api-keys", "SETTLE_NO_API_KEYS", "false", "serve without API keys, every caller the default merchant with every role: for tests and benchmarks, refused unless listen is a loopback address", setBool(func(c *config) *bool { return &c.NoAPIKeys })},
	{"webhook-listen", "SETTLE_WEBHOOK_LISTEN", "", "HTTP address for gateways' events: POST /webhooks/stripe, /webhooks/refpsp and /webhooks/adyen (empty: none)", setString(func(c *config) *string { return &c.WebhookListen })},
	{"webhook-tls-cert", "SETTLE_WEBHOOK_TLS_CERT", "", "webhook listener's certificate (PEM): HTTPS", setString(func(c *config) *string { return &c.WebhookTLSCert })},
	{"webhook-tls-key", "SETTLE_WEBHOOK_TLS_KEY", "", "webhook listener's private key (PEM)", setString(func(c *config) *string { return &c.WebhookTLSKey })},
	{"webhook-max-body", "SETTLE_WEBHOOK_MAX_BODY", "262144", "largest event body in bytes; larger is 413", setInt(func(c *config) *int { return &c.WebhookMaxBody })},
	{"webhook-max-connections", "SETTLE_WEBHOOK_MAX_CONNECTIONS", "256", "webhook connections open at once; more wait to be accepted", setInt(func(c *config) *int { return &c.WebhookMaxConns })},
	{"webhook-max-connections-per-address", "SETTLE_WEBHOOK_MAX_CONNECTIONS_PER_ADDRESS", "32", "webhook connections one client address (IPv4 address, IPv6 /64) holds at once; more are closed at once; 0: no bound (behind a proxy: see docs/operations.md)", setInt(func(c *config) *int { return &c.WebhookMaxConnsAddr })},
	{"webhook-tolerance", "SETTLE_WEBHOOK_TOLERANCE", "5m", "oldest (or furthest ahead) signature timestamp accepted: stops replays of old events", setDuration(func(c *config) *time.Duration { return &c.WebhookTolerance })},
	{"stripe-webhook-secrets", "STRIPE_WEBHOOK_SECRETS", "", "Stripe endpoint signing secrets (whsec_...), comma-separated: two while one is rolled; enables /webhooks/stripe", setList(func(c *config) *[]string { return &c.StripeWebhookSecrets })},
	{"refpsp-webhook-secrets", "SETTLE_REFPSP_WEBHOOK_SECRETS", "", "refpsp event signing secrets of at least 32 bytes, comma-separated as stripe-webhook-secrets; enables /webhooks/refpsp", setList(func(c *config) *[]string { return &c.RefpspWebhookSecrets })},
	{"adyen-hmac-keys", "ADYEN_HMAC_KEYS", "", "Adyen notifications' HMAC keys in hex, comma-separated: two while one is rotated; enables /webhooks/adyen, and is required with adyen-api-key: Adyen reports outcomes only by notification", setList(func(c *config) *[]string { return &c.AdyenHMACKeys })},
	{"adyen-notify-user", "ADYEN_NOTIFY_USER", "", "user of the basic authentication Adyen sends with notifications (set in the Customer Area's webhook); with adyen-notify-password", setString(func(c *config) *string { return &c.AdyenNotifyUser })},
	{"adyen-notify-password", "ADYEN_NOTIFY_PASSWORD", "", "password of that basic authentication", setString(func(c *config) *string { return &c.AdyenNotifyPassword })},
	{"webhook-plaintext", "SETTLE_WEBHOOK_PLAINTEXT", "false", "serve webhooks over plain HTTP on a non-loopback address, behind a proxy that terminates TLS (plain HTTP on loopback needs no flag)", setBool(func(c *config) *bool { return &c.WebhookPlaintext })},
}

// secretOptions are the options, and a command's own flags, whose values
// -print-config redacts.
var secretOptions = map[string]bool{
	"refpsp-key": true, "stripe-secret-key": true, "event-webhooks": true,
	"stripe-webhook-secrets": true, "refpsp-webhook-secrets": true, "sim-events-secrets": true,
	"adyen-api-key": true, "adyen-hmac-keys": true, "adyen-notify-password": true, "adyen-report-password": true,
}

// errPrinted ends a command whose -print-config has printed its
// configuration: the command exits 0 without starting.
var errPrinted = errors.New("configuration printed")

// bindConfig registers the named options on fs, and -print-config. The
// returned function, called after fs.Parse, fills the config from flags,
// environment and defaults, in that order of precedence; defaults are the
// command's own where defs names one (dev's), the reference's otherwise.
// With -print-config it prints the effective configuration to out, secrets
// redacted, and returns errPrinted: the options, then the command's own
// flags on fs (dev's -sim-*, say), given or default.
func bindConfig(fs *flag.FlagSet, getenv func(string) string, defs map[string]string, names ...string) func() (*config, error) {
	given := map[string]*string{}
	def := func(o option) string {
		if d, ok := defs[o.flag]; ok {
			return d
		}
		return o.def
	}
	for _, o := range options {
		if !slices.Contains(names, o.flag) {
			continue
		}
		v := new(string)
		given[o.flag] = v
		usage := fmt.Sprintf("%s (env %s, default %q)", o.usage, o.env, def(o))
		set := func(s string) error { *v = s; return nil }
		if o.def == "true" || o.def == "false" {
			fs.BoolFunc(o.flag, usage, set) // --with-reconciler as well as --with-reconciler=true
		} else {
			fs.Func(o.flag, usage, set)
		}
	}
	printConfig := fs.Bool("print-config", false, "print the effective configuration (flags, environment, defaults; secrets redacted) and exit")
	return func() (*config, error) {
		c := &config{}
		var errs []error
		var effective []string
		for _, o := range options {
			v, ok := given[o.flag]
			if !ok {
				v = new(string)
			}
			val, source := *v, "--"+o.flag
			if val == "" {
				val, source = getenv(o.env), o.env
			}
			if val == "" {
				val, source = def(o), "default"
			}
			if ok || (val != "" && source != "default") {
				effective = append(effective, fmt.Sprintf("%s=%s	(%s)", o.flag, redact(o.flag, val), source))
			}
			if val == "" {
				continue
			}
			if err := o.set(c, val); err != nil {
				if source == "default" {
					source = "default of " + o.flag
				}
				errs = append(errs, fmt.Errorf("%s: %w", source, err))
			}
		}
		if *printConfig {
			set := map[string]bool{}
			fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
			fs.VisitAll(func(f *flag.Flag) {
				if _, shared := given[f.Name]; shared || f.Name == "print-config" {
					return
				}
				val, source := redact(f.Name, f.Value.String()), "default"
				if set[f.Name] {
					source = "--" + f.Name
					if secretOptions[f.Name] {
						val = "(redacted)" // a flag.Func shows no value
					}
				}
				effective = append(effective, fmt.Sprintf("%s=%s	(%s)", f.Name, val, source))
			})
			tw := tabwriter.NewWriter(fs.Output(), 0, 4, 2, ' ', 0)
			for _, l := range effective {
				fmt.Fprintln(tw, l)
			}
			tw.Flush()
			return nil, errPrinted
		}
		return c, errors.Join(errs...)
	}
}

// redact hides a secret option's value, and the password of a database
// URL or DSN, for -print-config.
func redact(flag, v string) string {
	switch {
	case v == "":
		return ""
	case secretOptions[flag]:
		return "(redacted)"
	case flag == "database-url":
		if u, err := url.Parse(v); err == nil && u.Scheme != "" {
			return u.Redacted()
		}
		return dsnPassword.ReplaceAllString(v, "${1}xxxxx")
	}
	return v
}

// dsnPassword is the password of a key=value DSN.
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)

// validate checks the settings that every command shares.
func (c *config) validate() error {
	var errs []error
	check := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, errors.New(msg))
		}
	}
	check(c.DBMaxConns >= 1 && c.DBMaxConns <= 1000, "db-max-conns must be between 1 and 1000")
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q is not host:port", c.Listen))
	}
	if c.JSONListen != "" {
		if _, _, err := net.SplitHostPort(c.JSONListen); err != nil {
			errs = append(errs, fmt.Errorf("json-listen %q is not host:port", c.JSONListen))
		}
	}
	if c.ConsoleListen != "" {
		if _, _, err := net.SplitHostPort(c.ConsoleListen); err != nil {
			errs = append(errs, fmt.Errorf("console-listen %q is not host:port", c.ConsoleListen))
		}
	}
	check(c.ShutdownTimeout > 0, "shutdown-timeout must be positive")
	// The benchmark's gateway marks every charge paid without asking
	// anyone: a server that took it from a stray setting would hand out
	// goods for nothing. Only the lab's bench-server sets it.
	check(c.DefaultGateway != "instant", "default-gateway instant (every charge paid, no gateway asked) belongs to the benchmark, not to a server: use refpsp, stripe or adyen")
	check(c.LogFormat == "json" || c.LogFormat == "text", "log-format must be json or text")
	check(c.GatewayTimeout > 0, "gateway-timeout must be positive")
	check(c.ClaimGrace >= 0, "claim-grace must not be negative")
	check(len(c.Schedule) > 0, "reconcile-schedule must have at least one step")
	check(c.BatchSize >= 1 && c.BatchSize <= 10000, "reconcile-batch must be between 1 and 10000")
	check(c.Concurrency >= 1 && c.Concurrency <= 1000, "reconcile-concurrency must be between 1 and 1000")
	check(c.PollInterval > 0, "reconcile-poll must be positive")
	check(c.ReviewRecheck > 0, "review-recheck must be positive")
	check(c.AuditInterval >= 0, "audit-interval must not be negative (0: no scheduled audit)")
	check(c.AuditWindow > 0, "audit-window must be positive")
	check(c.AuditMargin > 0, "audit-margin must be positive")
	check(c.AuditInterval == 0 || len(c.AuditMerchants) > 0, "audit-merchants must name a merchant when audit-interval is set")
	check(c.ActionExpiry > 0, "action-expiry must be positive")
	check(c.ActionRecheckMax > 0, "action-recheck-max must be positive")
	check(c.LookupReuse >= 0 && c.LookupReuse <= time.Minute, "lookup-reuse must be between 0 and 1m: a reused answer hides the customer's for that long")
	check(c.LookupWait > 0 && c.LookupWait <= c.GatewayTimeout, "lookup-wait must be positive and at most gateway-timeout")
	check(c.LookupShare > 0 && c.LookupShare < 1, "lookup-share must be between 0 and 1 (exclusive): charges keep the rest")
	check(c.RefpspRate > 0, "refpsp-request-rate must be positive")
	check(c.BreakerCooldown > 0, "breaker-cooldown must be positive")
	check(c.BreakerRate > 0 && c.BreakerRate <= 1, "breaker-failure-rate must be above 0 and at most 1")
	check(c.BreakerMinCalls >= 1 && c.BreakerMinCalls <= 100, "breaker-min-calls must be between 1 and 100")
	check(c.StripeRate >= 0, "stripe-request-rate must not be negative (empty: from the key's mode)")
	check(c.NoShowHorizon > c.GatewayTimeout, "no-show-horizon must exceed gateway-timeout: a charge can arrive until the call times out")
	check(c.RateBurst >= 1, "rate-burst must be at least 1")
	check(c.MaxInFlight >= 0, "max-inflight must not be negative")
	check(c.MaxWatches >= 0, "max-watches must not be negative")
	check(c.AdmissionInFlight >= -1, "admission-max-inflight must be -1 (off), 0 (16 × db-max-conns) or more")
	check(c.AdmissionQueue >= 0, "admission-queue must not be negative (0: as many as admission-max-inflight)")
	check(c.AdmissionMaxWait > 0, "admission-max-wait must be positive")
	check(c.WatchLifetime > 0, "watch-lifetime must be positive")
	check(c.AuthFailRate > 0, "auth-failure-rate must be positive")
	check(c.AuthFailBurst >= 1, "auth-failure-burst must be at least 1")
	check(c.MaxConns >= 1, "max-connections must be at least 1")
	check(c.MaxStreams >= 1 && c.MaxStreams <= 10000, "max-concurrent-streams must be between 1 and 10000")
	check(c.MaxKeyless >= 1, "max-keyless-streams must be at least 1")
	check(c.MaxKeylessPerAddr >= 1 && c.MaxKeylessPerAddr <= c.MaxKeyless, "max-keyless-streams-per-address must be between 1 and max-keyless-streams")
	check(c.MaxConnsPerAddr >= 1 && c.MaxConnsPerAddr <= c.MaxConns, "max-connections-per-address must be between 1 and max-connections")
	check(c.MaxKeylessConns >= 1 && c.MaxKeylessConns <= c.MaxConnsPerAddr, "max-keyless-connections-per-address must be between 1 and max-connections-per-address")
	check(c.KeylessGrace > 0, "keyless-grace must be positive")
	check(c.PrefixV4 >= 1 && c.PrefixV4 <= 32, "address-prefix-ipv4 must be between 1 and 32")
	check(c.PrefixV6 >= 1 && c.PrefixV6 <= 128, "address-prefix-ipv6 must be between 1 and 128")
	check(c.ConnIdle > 0 && c.ConnAge > 0 && c.ConnAgeGrace > 0, "max-connection-idle, max-connection-age and max-connection-age-grace must be positive")
	check((c.TLSCert == "") == (c.TLSKey == ""), "tls-cert and tls-key go together")
	check(c.TLSClientCA == "" || c.TLSCert != "", "tls-client-ca needs tls-cert and tls-key")
	check(!c.Plaintext || c.TLSCert == "", "plaintext and tls-cert contradict each other: choose one")
	// The profiler serves goroutine dumps (every call's stack) and CPU
	// profiles on demand: never to the network.
	if c.Pprof && !isLoopback(c.MetricsListen) {
		errs = append(errs, fmt.Errorf("refusing --pprof on metrics-listen %q, which is not a loopback address: the profiler serves goroutine dumps and profiles to whoever asks; serve metrics on a loopback address to profile", c.MetricsListen))
	}
	check(c.StripeSecretKey == "" || c.StripeSecretKeyFile == "", "set stripe-secret-key or stripe-secret-key-file, not both")
	check(c.StripeMaxRetries >= 0 && c.StripeMaxRetries <= 10, "stripe-max-retries must be between 0 and 10")
	check(c.StripeReplayWindow > 0 && c.StripeReplayWindow <= stripe.MaxReplayWindow, "stripe-replay-window must be positive and at most 23h: Stripe keeps idempotency keys for 24h")
	check(c.DeliveryTimeout > 0, "event-delivery-timeout must be positive")
	check(c.DeliveryRetryFor > 0, "event-retry-for must be positive")
	check(c.DeliveryPoll > 0, "event-delivery-poll must be positive")
	check(c.DeliveryBatch >= 1 && c.DeliveryBatch <= 1000, "event-delivery-batch must be between 1 and 1000")
	check(c.DeliveryInFlight >= 1 && c.DeliveryInFlight <= 256, "event-delivery-in-flight must be between 1 and 256")
	if c.WebhookListen != "" {
		if _, _, err := net.SplitHostPort(c.WebhookListen); err != nil {
			errs = append(errs, fmt.Errorf("webhook-listen %q is not host:port", c.WebhookListen))
		}
		check(len(c.StripeWebhookSecrets)+len(c.RefpspWebhookSecrets)+len(c.AdyenHMACKeys) > 0,
			"webhook-listen needs stripe-webhook-secrets, refpsp-webhook-secrets or adyen-hmac-keys: an event is accepted only when signed")
	}
	check((c.WebhookTLSCert == "") == (c.WebhookTLSKey == ""), "webhook-tls-cert and webhook-tls-key go together")
	check(c.WebhookMaxBody >= 1024 && c.WebhookMaxBody <= 16<<20, "webhook-max-body must be between 1024 and 16777216")
	check(c.WebhookMaxConns >= 1, "webhook-max-connections must be at least 1")
	check(c.WebhookMaxConnsAddr >= 0, "webhook-max-connections-per-address must not be negative")
	check(c.WebhookTolerance > 0, "webhook-tolerance must be positive")
	for i, s := range c.StripeWebhookSecrets {
		if err := stripe.CheckWebhookSecret(s); err != nil {
			errs = append(errs, fmt.Errorf("stripe-webhook-secrets (STRIPE_WEBHOOK_SECRETS): secret %d of %d: %w", i+1, len(c.StripeWebhookSecrets), err))
		}
	}
	check(c.AdyenRate > 0, "adyen-request-rate must be positive")
	if c.AdyenAPIKey != "" {
		check(c.AdyenMerchantAccount != "", "adyen-api-key needs adyen-merchant-account (ADYEN_MERCHANT_ACCOUNT): the merchant account every payment is made on")
		check(len(c.AdyenHMACKeys) > 0, "adyen-api-key needs adyen-hmac-keys (ADYEN_HMAC_KEYS): Adyen reports every outcome only by notification, and Settle accepts one only when signed")
	}
	check(c.AdyenAPIKey != "" || len(c.AdyenHMACKeys)+len(c.AdyenMerchantAccount) == 0,
		"adyen-merchant-account or adyen-hmac-keys is set without adyen-api-key (ADYEN_API_KEY)")
	check((c.AdyenNotifyUser == "") == (c.AdyenNotifyPassword == ""), "adyen-notify-user and adyen-notify-password go together")
	check((c.AdyenReportUser == "") == (c.AdyenReportPassword == ""), "adyen-report-user and adyen-report-password go together")
	if _, err := time.LoadLocation(c.AdyenReportTimeZone); err != nil || c.AdyenReportTimeZone == "" || c.AdyenReportTimeZone == "Local" {
		errs = append(errs, fmt.Errorf("adyen-report-timezone (ADYEN_REPORT_TIMEZONE) %q is not a time zone name such as Europe/Amsterdam", c.AdyenReportTimeZone))
	}
	for i, k := range c.AdyenHMACKeys {
		if _, err := adyen.CheckHMACKey(k); err != nil {
			errs = append(errs, fmt.Errorf("adyen-hmac-keys (ADYEN_HMAC_KEYS): key %d of %d: %w", i+1, len(c.AdyenHMACKeys), err))
		}
	}
	if _, err := c.refpspAccounts(); err != nil {
		errs = append(errs, err)
	}
	for i, s := range c.RefpspWebhookSecrets {
		if err := refpsp.CheckEventSecret(s); err != nil {
			errs = append(errs, fmt.Errorf("refpsp-webhook-secrets (SETTLE_REFPSP_WEBHOOK_SECRETS): secret %d of %d: %w", i+1, len(c.RefpspWebhookSecrets), err))
		}
	}
	return errors.Join(errs...)
}

// webhookEndpoints returns the merchants' webhook endpoints, from webhooks
// and the file webhooks-file names.
func (c *config) eventEndpoints() ([]delivery.Endpoint, error) {
	text := c.EventWebhooks
	if c.EventWebhooksFile != "" {
		b, err := os.ReadFile(c.EventWebhooksFile)
		if err != nil {
			return nil, fmt.Errorf("read event webhooks file: %w", err)
		}
		text += "\n" + string(b)
	}
	return delivery.ParseEndpoints(text)
}

// stripeSecretKey returns the Stripe secret key, from stripe-secret-key or
// from the file stripe-secret-key-file names; "" when neither is set.
func (c *config) stripeSecretKey() (string, error) {
	if c.StripeSecretKeyFile == "" {
		return c.StripeSecretKey, nil
	}
	b, err := os.ReadFile(c.StripeSecretKeyFile)
	if err != nil {
		return "", fmt.Errorf("stripe-secret-key-file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("stripe-secret-key-file %s is empty", c.StripeSecretKeyFile)
	}
	return key, nil
}

func (c *config) reconcileConfig(failpoint func(string)) reconcile.Config {
	return reconcile.Config{
		Schedule:      c.Schedule,
		BatchSize:     c.BatchSize,
		Concurrency:   c.Concurrency,
		PollInterval:  c.PollInterval,
		LookupTimeout: c.GatewayTimeout,
		NoShowHorizon: c.NoShowHorizon,
		ReviewCadence: c.ReviewRecheck,
		ActionExpiry:  c.ActionExpiry,
		Failpoint:     failpoint,

		ActionRecheckMax: c.ActionRecheckMax,
	}
}

// refpspAccount is one more refpsp gateway account of refpsp-accounts.
type refpspAccount struct{ name, url string }

// accountName is what a gateway account of refpsp-accounts may be named:
// a path segment of its webhook, a label of its metrics.
var accountName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// refpspAccounts parses refpsp-accounts. Names are new: not refpsp, stripe,
// adyen or instant, nor another account's.
func (c *config) refpspAccounts() ([]refpspAccount, error) {
	var out []refpspAccount
	seen := map[string]bool{"refpsp": true, "stripe": true, "adyen": true, "instant": true}
	for i, v := range c.RefpspAccounts {
		name, raw, _ := strings.Cut(v, "=")
		bad := func(why string) error {
			return fmt.Errorf("refpsp-accounts (SETTLE_REFPSP_ACCOUNTS): account %d of %d %s", i+1, len(c.RefpspAccounts), why)
		}
		if !accountName.MatchString(name) {
			return nil, bad(fmt.Sprintf("is named %q: want name=URL, the name lower-case letters, digits, - or _ (at most 32)", name))
		}
		if seen[name] {
			return nil, bad(fmt.Sprintf("is named %q, which names another gateway", name))
		}
		seen[name] = true
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, bad(fmt.Sprintf("(%s) has no http or https URL", name))
		}
		out = append(out, refpspAccount{name: name, url: raw})
	}
	return out, nil
}

// refpspAccountKey is the environment variable of an account's API key.
func refpspAccountKey(name string) string {
	return "SETTLE_REFPSP_KEY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Stripe's rate limits per account (docs.stripe.com/rate-limits): 100
// requests per second in live mode, 25 in test mode (a sandbox). The
// defaults leave a fifth for the dashboard, other tools and the burst.
const (
	stripeLiveRate = 80
	stripeTestRate = 20
)

// budget returns the request budget of the gateway account the process
// sends at most rate requests per second to.
func (c *config) budget(rate float64) (*order.Budget, error) {
	return order.NewBudget(order.BudgetConfig{Rate: rate, LookupShare: c.LookupShare, LookupWait: c.LookupWait})
}

// stripeRate is the Stripe account's request rate: stripe-request-rate,
// or the default of the key's mode.
func (c *config) stripeRate(key string) float64 {
	switch {
	case c.StripeRate > 0:
		return c.StripeRate
	case strings.Contains(key, "_test_"):
		return stripeTestRate
	}
	return stripeLiveRate
}

func (c *config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// printReference prints the configuration reference for a terminal: each
// option's flag, environment variable and default on one line, its
// meaning below, wrapped to 100 columns.
func printReference(w io.Writer) {
	for _, o := range options {
		def := o.def
		if def == "" {
			def = "none"
		}
		if head := fmt.Sprintf("--%s  (env %s, default %s)", o.flag, o.env, def); len(head) <= 100 {
			fmt.Fprintln(w, head)
		} else {
			fmt.Fprintf(w, "--%s  (env %s)\n    default %s\n", o.flag, o.env, def)
		}
		line := "   "
		for word := range strings.FieldsSeq(o.usage) {
			if len(line)+1+len(word) > 100 && line != "   " {
				fmt.Fprintln(w, line)
				line = "   "
			}
			line += " " + word
		}
		fmt.Fprintln(w, line)
	}
}

// printReferenceTable prints the configuration table that
// docs/operations.md shows (settle config -markdown).
func printReferenceTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "| flag\t| environment\t| default\t| meaning\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|")
	for _, o := range options {
		fmt.Fprintf(tw, "| --%s\t| %s\t| %s\t| %s\t|\n", o.flag, o.env, o.def, o.usage)
	}
	tw.Flush()
}

func setString(p func(*config) *string) func(*config, string) error {
	return func(c *config, v string) error { *p(c) = v; return nil }
}

func setInt(p func(*config) *int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p(c) = n
		return nil
	}
}

func setLevel(p func(*config) *slog.Level) func(*config, string) error {
	return func(c *config, v string) error {
		if err := p(c).UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("%q is not debug, info, warn or error", v)
		}
		return nil
	}
}

func setFloat(p func(*config) *float64) func(*config, string) error {
	return func(c *config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return fmt.Errorf("%q is not a number of at least 0", v)
		}
		*p(c) = f
		return nil
	}
}

func setBool(p func(*config) *bool) func(*config, string) error {
	return func(c *config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p(c) = b
		return nil
	}
}

func setDuration(p func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 10s or 2m", v)
		}
		*p(c) = d
		return nil
	}
}

func setList(p func(*config) *[]string) func(*config, string) error {
	return func(c *config, v string) error { *p(c) = splitList(v); return nil }
}

func setDurations(p func(*config) *[]time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		var ds []time.Duration
		for s := range strings.SplitSeq(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil || d <= 0 {
				return fmt.Errorf("%q is not a comma-separated list of positive durations", v)
			}
			ds = append(ds, d)
		}
		*p(c) = ds
		return nil
	}
}

func durationsString(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
		if strings.HasSuffix(s[i], "m0s") {
			s[i] = strings.TrimSuffix(s[i], "0s")
		}
		if strings.HasSuffix(s[i], "h0m") {
			s[i] = strings.TrimSuffix(s[i], "0m")
		}
	}
	return strings.Join(s, ",")
}
