// Package telemetry is what Settle tells its operators: Prometheus metrics
// on their own HTTP listener (with /healthz and /readyz), OpenTelemetry
// traces when an OTLP endpoint is configured, and the observers the gateway
// adapters report their calls to.
package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Metrics holds Settle's collectors in a registry of its own.
type Metrics struct {
	Registry *prometheus.Registry
	// GRPC counts RPCs by method and code, with latency histograms.
	GRPC            *grpcprom.ServerMetrics
	gatewayCalls    *prometheus.CounterVec
	gatewaySeconds  *prometheus.HistogramVec
	reconcileChecks *prometheus.CounterVec
	authFailures    *prometheus.CounterVec
	connsClosed     *prometheus.CounterVec
	malformed       *prometheus.CounterVec
	dbFsync         prometheus.Gauge
	dbSyncCommit    *prometheus.GaugeVec
	dbWaitsStandby  prometheus.Gauge
	dbStandbys      *prometheus.GaugeVec
	deliveries      *prometheus.CounterVec
	deliveryLatency prometheus.Histogram
	gatewayEvents   *prometheus.CounterVec
	reviewItems     *prometheus.CounterVec
	eventToSettled  prometheus.Histogram
	breakerState    *prometheus.GaugeVec
	breakerOpenings *prometheus.CounterVec
	auditFindings   *prometheus.CounterVec
	auditRuns       *prometheus.CounterVec
	admitted        *prometheus.CounterVec
	admissionWait   prometheus.Histogram
	admissionRefuse *prometheus.CounterVec
}

// NewMetrics returns the metrics, registered with the Go and process
// collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		GRPC: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}))),
		gatewayCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_gateway_calls_total", Help: "Gateway calls by gateway, operation (charge, lookup) and outcome.",
		}, []string{"gateway", "op", "outcome"}),
		gatewaySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "settle_gateway_call_seconds", Help: "Latency of gateway calls.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"gateway", "op"}),
		reconcileChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_reconcile_checks_total", Help: "Reconciler checks by result: succeed, fail, escalate or recheck.",
		}, []string{"result"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_auth_failures_total", Help: "Calls refused for their API key (missing, unknown or of the wrong role), by result: rejected, or limited (past the peer's failure budget).",
		}, []string{"result"}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_grpc_connections_closed_total", Help: "gRPC connections closed by the per-address limits, by reason: address_limit (past max-connections-per-address), keyless_evicted (an address's oldest keyless connection, past max-keyless-connections-per-address) or keyless_grace (no call with a valid API key within keyless-grace).",
		}, []string{"reason"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_grpc_malformed_requests_total", Help: "Requests that were not valid protobuf messages, by method (answered INVALID_ARGUMENT).",
		}, []string{"grpc_method"}),
		dbFsync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settle_db_fsync", Help: "1 when the database forces its writes to disk (fsync on), as last read.",
		}),
		dbSyncCommit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "settle_db_synchronous_commit", Help: "1 for the database's synchronous_commit setting, as last read.",
		}, []string{"setting"}),
		dbWaitsStandby: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "settle_db_commits_wait_for_standby", Help: "1 when synchronous_standby_names is set and Settle's commits wait for the standbys it names (synchronous_commit on, remote_write or remote_apply), as last read: with no synchronous standby streaming, commits then hang.",
		}),
		dbStandbys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "settle_db_standbys", Help: "Standbys streaming from the database, by sync_state: sync (a commit waits for them), async, or unknown (the role lacks pg_monitor).",
		}, []string{"sync_state"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_event_deliveries_total", Help: "Deliveries of events to merchants by result: delivered, retry (to be tried again), untried (put back after another event's failure) or failed (retries exhausted).",
		}, []string{"result"}),
		deliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "settle_event_delivery_latency_seconds", Help: "Time from an event's commit to its delivery (database time).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600, 72 * 3600},
		}),
		gatewayEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_gateway_events_total", Help: "Gateway events received, by gateway, type and result (woken, review, capture_failed, ignored, unknown_object, duplicate, bad_signature, malformed, too_large, ignored_type, error).",
		}, []string{"gateway", "type", "result"}),
		reviewItems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_review_items_raised_total", Help: "Review items raised for a person, by kind (possible_double_charge: a success reported for an attempt its order does not hold; capture_failed: a failure reported for the operation that paid an order; refund_failed: a failure reported for a refund that succeeded).",
		}, []string{"kind"}),
		eventToSettled: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "settle_event_to_settled_seconds", Help: "Time from a gateway event making an order due to the reconciler settling it.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "settle_gateway_breaker_state", Help: "State of each gateway account's breaker in this process: 0 closed, 1 half-open (one attempt probes the gateway), 2 open (new attempts of orders with routes go to another route).",
		}, []string{"gateway"}),
		breakerOpenings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_gateway_breaker_openings_total", Help: "Times each gateway account's breaker opened in this process (from closed, or again after a failed probe).",
		}, []string{"gateway"}),
		auditFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_audit_findings_total", Help: "New findings of the gateway audit, by gateway account and class (DUPLICATE, MISSING_IN_SETTLE, MISSING_ON_GATEWAY, AMOUNT_MISMATCH, CURRENCY_MISMATCH, STATUS_MISMATCH, REFUND_MISMATCH, FOREIGN); a finding seen again by an overlapping window is not counted again.",
		}, []string{"gateway", "class"}),
		auditRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_audit_runs_total", Help: "Audit runs finished, by gateway account and result: clean, findings, or not_covered (the gateway offers no listing).",
		}, []string{"gateway", "result"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_admission_admitted_total", Help: "Calls under admission control (OrderService's calls that write) admitted to run, by method.",
		}, []string{"grpc_method"}),
		admissionWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "settle_admission_wait_seconds", Help: "Time admitted calls waited in the admission queue for a place (0 when one was free).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		admissionRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "settle_admission_refused_total", Help: "Calls refused RESOURCE_EXHAUSTED by admission control before doing anything, by method and reason: queue_full (every place taken and the queue full), deadline (the deadline leaves less than the expected wait and duration) or waited (the call queued until its deadline left no time to run).",
		}, []string{"grpc_method", "reason"}),
	}
	m.Registry.MustRegister(m.admitted, m.admissionWait, m.admissionRefuse, m.auditFindings, m.auditRuns, m.GRPC, m.gatewayCalls, m.gatewaySeconds, m.reconcileChecks, m.authFailures, m.connsClosed, m.malformed,
		m.gatewayEvents, m.reviewItems, m.eventToSettled, m.breakerState, m.breakerOpenings,
		m.deliveries, m.deliveryLatency, m.dbFsync, m.dbSyncCommit, m.dbWaitsStandby, m.dbStandbys,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// AuditFound counts the new findings of an audit step of a gateway
// account.
func (m *Metrics) AuditFound(gateway string, classes []string) {
	for _, c := range classes {
		m.auditFindings.WithLabelValues(gateway, c).Inc()
	}
}

// AuditRun counts a finished audit run of a gateway account by its
// result: clean, findings or not_covered.
func (m *Metrics) AuditRun(gateway, result string) {
	m.auditRuns.WithLabelValues(gateway, result).Inc()
}

// ReconcileCheck counts one reconciler check by its result.
func (m *Metrics) ReconcileCheck(result string) { m.reconcileChecks.WithLabelValues(result).Inc() }

// GatewayEvent counts one gateway event by gateway, type and result; a
// result that raised a review item also counts the item by its kind.
func (m *Metrics) GatewayEvent(gateway, eventType, result string) {
	m.gatewayEvents.WithLabelValues(gateway, eventType, result).Inc()
	switch order.GatewayEventResult(result) {
	case order.EventReview:
		m.reviewItems.WithLabelValues("possible_double_charge").Inc()
	case order.EventReviewCaptureFailed:
		m.reviewItems.WithLabelValues("capture_failed").Inc()
	case order.EventReviewRefundFailed:
		m.reviewItems.WithLabelValues("refund_failed").Inc()
	case order.EventWoken, order.EventIgnored, order.EventUnknownObject, order.EventDuplicate, order.EventDispute,
		order.EventDisputeStale:
		// No item raised; the listener's own results (bad_signature, …)
		// are no GatewayEventResult.
	}
}

// BreakerState records gateway's breaker entering state
// (order.BreakerConfig.OnState), counting each opening.
func (m *Metrics) BreakerState(gateway string, state order.BreakerState) {
	m.breakerState.WithLabelValues(gateway).Set(float64(state))
	if state == order.BreakerOpen {
		m.breakerOpenings.WithLabelValues(gateway).Inc()
	} else {
		// The series exists from the start, at 0.
		m.breakerOpenings.WithLabelValues(gateway).Add(0)
	}
}

// EventSettled observes how long after a gateway event made it due an
// order was settled.
func (m *Metrics) EventSettled(d time.Duration) { m.eventToSettled.Observe(d.Seconds()) }

// Admitted counts one call of method admitted by admission control after
// waiting waited.
func (m *Metrics) Admitted(method string, waited time.Duration) {
	m.admitted.WithLabelValues(method).Inc()
	m.admissionWait.Observe(waited.Seconds())
}

// AdmissionRefused counts one call of method refused by admission
// control, by reason.
func (m *Metrics) AdmissionRefused(method, reason string) {
	m.admissionRefuse.WithLabelValues(method, reason).Inc()
}

// AuthFailure counts one call refused for its API key: result is
// "rejected" or "limited".
func (m *Metrics) AuthFailure(result string) { m.authFailures.WithLabelValues(result).Inc() }

// ConnectionClosed counts one gRPC connection closed by the per-address
// limits, by reason.
func (m *Metrics) ConnectionClosed(reason string) { m.connsClosed.WithLabelValues(reason).Inc() }

// MalformedRequest counts one request to method (a full method name) that
// was not a valid protobuf message.
func (m *Metrics) MalformedRequest(method string) { m.malformed.WithLabelValues(method).Inc() }

// Durability records what the database promises about a commit, as last
// read: fsync, synchronous_commit, whether commits wait for synchronous
// standbys (waitsForStandby), and the standbys streaming from it
// (synchronous, asynchronous, and of unknown state).
func (m *Metrics) Durability(fsync bool, synchronousCommit string, waitsForStandby bool, sync, async, unknown int) {
	m.dbFsync.Set(gauge(fsync))
	m.dbWaitsStandby.Set(gauge(waitsForStandby))
	m.dbSyncCommit.Reset()
	m.dbSyncCommit.WithLabelValues(synchronousCommit).Set(1)
	m.dbStandbys.WithLabelValues("sync").Set(float64(sync))
	m.dbStandbys.WithLabelValues("async").Set(float64(async))
	m.dbStandbys.WithLabelValues("unknown").Set(float64(unknown))
}

// gauge is a flag as a gauge's value: 1 for true, 0 for false.
func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// EventDelivery counts one recorded delivery of an event to a merchant and, when delivered,
// observes its latency from commit.
func (m *Metrics) EventDelivery(r order.DeliveryRecord) {
	switch {
	case r.Failed:
		m.deliveries.WithLabelValues("failed").Inc()
	default:
		m.deliveries.WithLabelValues(string(r.Outcome)).Inc()
	}
	if r.Outcome == order.DeliveryDelivered {
		m.deliveryLatency.Observe(r.Latency.Seconds())
	}
}

// BacklogFunc reads each merchant's undelivered events.
type BacklogFunc func(context.Context) ([]order.DeliveryBacklog, error)

// WatchDeliveries exports each merchant's undelivered events and the age of
// the oldest, read when scraped.
func (m *Metrics) WatchDeliveries(backlog BacklogFunc) {
	m.Registry.MustRegister(&deliveryCollector{backlog: backlog})
}

var (
	pendingDesc       = prometheus.NewDesc("settle_events_pending", "Undelivered events by merchant.", []string{"merchant"}, nil)
	oldestPendingDesc = prometheus.NewDesc("settle_events_oldest_pending_seconds", "Age of the oldest undelivered event by merchant (0 when none).", []string{"merchant"}, nil)
	backlogUpDesc     = prometheus.NewDesc("settle_event_backlog_up", "1 when the event delivery backlog could be read at this scrape.", nil, nil)
)

type deliveryCollector struct{ backlog BacklogFunc }

func (c *deliveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestPendingDesc
	ch <- backlogUpDesc
}

func (c *deliveryCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBudget)
	defer cancel()
	bl, err := c.backlog(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogUpDesc, prometheus.GaugeValue, 1)
	for _, b := range bl {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(b.Pending), b.MerchantID)
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, b.Oldest.Seconds(), b.MerchantID)
	}
}

// StatsFunc reads the order statistics.
type StatsFunc func(context.Context) (order.Stats, error)

// expiringWithin is order.ExpiringWithin as settle_authorizations_expiring's
// label says it.
var expiringWithin = strconv.Itoa(int(order.ExpiringWithin.Hours())) + "h"

// WatchStore exports the orders by state, the oldest CHARGING order's age,
// the reconcile backlog, the refunds, captures and voids by state, the
// authorizations near their capture_before, and the pool's use, read when
// scraped.
func (m *Metrics) WatchStore(stats StatsFunc, pool *pgxpool.Pool) {
	m.Registry.MustRegister(&storeCollector{stats: stats, pool: pool})
}

var (
	ordersDesc          = prometheus.NewDesc("settle_orders", "Orders by state.", []string{"state"}, nil)
	oldestDesc          = prometheus.NewDesc("settle_oldest_charging_seconds", "Age of the oldest CHARGING order's state (0 when none).", nil, nil)
	refundsDesc         = prometheus.NewDesc("settle_refunds", "Refunds by state.", []string{"state"}, nil)
	oldestRefundingDesc = prometheus.NewDesc("settle_oldest_refunding_seconds",
		"Age of the oldest REFUNDING refund (0 when none).", nil, nil)
	capturesDesc = prometheus.NewDesc("settle_captures", "Captures by state.", []string{"state"}, nil)
	voidsDesc    = prometheus.NewDesc("settle_voids", "Voids by state.", []string{"state"}, nil)
	expiringDesc = prometheus.NewDesc("settle_authorizations_expiring",
		"AUTHORIZED orders whose capture_before is within the window (label within), or has passed.", []string{"within"}, nil)
	backlogDesc  = prometheus.NewDesc("settle_reconcile_backlog", "CHARGING orders whose check is due.", nil, nil)
	poolDesc     = prometheus.NewDesc("settle_db_pool_connections", "Database pool connections by state.", []string{"state"}, nil)
	poolMaxDesc  = prometheus.NewDesc("settle_db_pool_max_connections", "Size of the database pool.", nil, nil)
	statsUpDesc  = prometheus.NewDesc("settle_stats_up", "1 when the order statistics could be read at this scrape.", nil, nil)
	waitDesc     = prometheus.NewDesc("settle_db_pool_acquire_wait_seconds_total", "Time spent waiting for a pool connection.", nil, nil)
	scrapeBudget = 5 * time.Second
)

type storeCollector struct {
	stats StatsFunc
	pool  *pgxpool.Pool
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ordersDesc, oldestDesc, backlogDesc, poolDesc, poolMaxDesc, statsUpDesc, waitDesc,
		refundsDesc, oldestRefundingDesc, capturesDesc, voidsDesc, expiringDesc} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ps := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(ps.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(ps.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(ps.MaxConns()))
	ch <- prometheus.MustNewConstMetric(waitDesc, prometheus.CounterValue, ps.AcquireDuration().Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBudget)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 1)
	for _, s := range order.States {
		ch <- prometheus.MustNewConstMetric(ordersDesc, prometheus.GaugeValue, float64(st.ByState[s]), string(s))
	}
	age := 0.0
	if !st.OldestCharging.IsZero() {
		age = time.Since(st.OldestCharging).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
	for _, s := range order.RefundStates {
		ch <- prometheus.MustNewConstMetric(refundsDesc, prometheus.GaugeValue, float64(st.Refunds.ByState[s]), string(s))
	}
	refundAge := 0.0
	if !st.Refunds.OldestRefunding.IsZero() {
		refundAge = time.Since(st.Refunds.OldestRefunding).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestRefundingDesc, prometheus.GaugeValue, refundAge)
	for _, s := range order.CaptureStates {
		ch <- prometheus.MustNewConstMetric(capturesDesc, prometheus.GaugeValue, float64(st.Holds.CapturesByState[s]), string(s))
	}
	for _, s := range order.VoidStates {
		ch <- prometheus.MustNewConstMetric(voidsDesc, prometheus.GaugeValue, float64(st.Holds.VoidsByState[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(expiringDesc, prometheus.GaugeValue, float64(st.Holds.Expiring), expiringWithin)
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(st.Backlog))
}

// Handler serves /metrics, /healthz (the process answers) and /readyz (the
// database answers).
func (m *Metrics) Handler(ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			// The reason stays in the process: a database error may
			// name hosts and users.
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}

// GatewayObserver returns the observer of the gateway wired as name: its
// adapter (refpsp.Config.Observer, stripe.Config.Observer) reports each
// call to it, which counts, times and traces the call. Spans carry the
// order and attempt (or refund) ids, never the payment method.
func (m *Metrics) GatewayObserver(name string, tracer trace.Tracer) *GatewayObserver {
	return &GatewayObserver{name: name, m: m, tracer: tracer}
}

// GatewayObserver is a gateway.Observer for one gateway.
type GatewayObserver struct {
	name   string
	m      *Metrics
	tracer trace.Tracer
}

var _ gateway.Observer = (*GatewayObserver)(nil)

// isLookup says whether op asks about an earlier call, or reads a page of
// the gateway's records, whose error means the gateway could not say
// (counted as outcome "error").
func isLookup(op string) bool {
	switch op {
	case gateway.OpLookup, gateway.OpLookupRefund, gateway.OpLookupCapture, gateway.OpLookupVoid,
		gateway.OpListCharges, gateway.OpListRefunds:
		return true
	}
	return false
}

// Start starts the call's span; the function it returns counts and times
// the call and ends the span.
func (o *GatewayObserver) Start(ctx context.Context, call gateway.Call) (context.Context, func(order.Result, error)) {
	ctx, span := o.tracer.Start(ctx, "gateway."+call.Op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("settle.gateway", o.name),
		attribute.String("settle.order_id", call.OrderID),
		attribute.String("settle.attempt_id", call.AttemptID),
	))
	start := time.Now()
	return ctx, func(res order.Result, err error) {
		defer span.End()
		o.m.gatewaySeconds.WithLabelValues(o.name, call.Op).Observe(time.Since(start).Seconds())
		outcome := string(res.Outcome)
		if err != nil && isLookup(call.Op) {
			outcome = "error"
		}
		o.m.gatewayCalls.WithLabelValues(o.name, call.Op, outcome).Inc()
		span.SetAttributes(attribute.String("settle.outcome", outcome))
		if err != nil {
			span.SetStatus(codes.Error, outcome)
		}
	}
}

// DisputeCountsFunc reads the disputes' counts (postgres.Store.CountDisputes
// over order.DisputeDueWithin).
type DisputeCountsFunc func(context.Context) (order.DisputeCounts, error)

// disputesDueWithin is order.DisputeDueWithin as settle_disputes_due_soon's
// label says it.
var disputesDueWithin = strconv.Itoa(int(order.DisputeDueWithin.Hours())) + "h"

var (
	disputesDesc    = prometheus.NewDesc("settle_disputes", "Disputes by status.", []string{"status"}, nil)
	disputesDueDesc = prometheus.NewDesc("settle_disputes_due_soon",
		"Disputes waiting on the merchant's response (NEEDS_RESPONSE) whose due_by is within the window (label within), or has passed.",
		[]string{"within"}, nil)
	disputesUpDesc = prometheus.NewDesc("settle_disputes_up", "1 when the dispute counts could be read at this scrape.", nil, nil)
)

// WatchDisputes exports the disputes by status and those due soon with no
// response, read when scraped.
func (m *Metrics) WatchDisputes(counts DisputeCountsFunc) {
	m.Registry.MustRegister(&disputeCollector{counts: counts})
}

type disputeCollector struct {
	counts DisputeCountsFunc
}

func (c *disputeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{disputesDesc, disputesDueDesc, disputesUpDesc} {
		ch <- d
	}
}

func (c *disputeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBudget)
	defer cancel()
	n, err := c.counts(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(disputesUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(disputesUpDesc, prometheus.GaugeValue, 1)
	for _, s := range order.DisputeStatuses {
		ch <- prometheus.MustNewConstMetric(disputesDesc, prometheus.GaugeValue, float64(n.ByStatus[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(disputesDueDesc, prometheus.GaugeValue, float64(n.DueSoon), disputesDueWithin)
}
