package grpcapi

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/telemetry"
)

// MaxMessageBytes bounds a request: Settle's requests are a few hundred bytes.
const MaxMessageBytes = 64 << 10

// streamWorkers is the number of goroutines kept to run calls on.
const streamWorkers = 64

// Store is what the API reads beyond the order service.
type Store interface {
	OpsStore
	Watcher
	EventStore
}

// Server is Settle's gRPC server with its health service.
type Server struct {
	*grpc.Server
	Health *health.Server
	hub    *watchHub
	fails  *authFailures
	conns  *connTracker
	json   *jsonServer // nil without Options.JSON
	// transcoder serves JSON calls in process (see InProcess).
	transcoder http.Handler
}

// Options are the server's security settings.
type Options struct {
	// Keys are the API keys. With none, every caller is the default
	// merchant with every role: for loopback listeners only.
	Keys []Key
	// Limits bound each API key's calls.
	Limits Limits
	// Admission bounds the calls that write, across every key, by the
	// server's capacity (see AdmissionLimits); zero is no bound.
	Admission AdmissionLimits
	// Conn bounds connections and streams before any key is checked.
	Conn ConnLimits
	// AuthFailures bound and sample failed authentication per peer.
	AuthFailures AuthFailureLimits
	// WatchLifetime ends a WatchOrder stream (status OK) after this long
	// even if its order is not terminal; the client watches again. Zero
	// is DefaultWatchLifetime.
	WatchLifetime time.Duration
	// NoReflection turns server reflection off.
	NoReflection bool
	// Creds secures the transport (TLS, mTLS); nil is plaintext.
	Creds credentials.TransportCredentials
	// Metrics, when set, counts RPCs by method and code.
	Metrics *telemetry.Metrics
	// Tracing, when set, traces each RPC.
	Tracing *telemetry.Tracing
	// JSON, when set, makes the server able to serve JSON over HTTP as
	// well (ServeJSON), through the same interceptors.
	JSON *JSONOptions
	// Auditor, when set, serves OpsService's RunAudit and ListAuditRuns.
	Auditor *audit.Auditor
}

// NewServer returns a server with OrderService, OpsService, health and
// reflection registered. Each call is logged (never its payload); callers
// are authenticated by API key and limited per key; a panic in a handler
// becomes Internal and is logged.
//
// The JSON routes (ServeJSON, InProcess) are built from the
// services' google.api.http annotations, which are compiled in: routes
// that cannot be built are a defect of the build, and NewServer panics.
func NewServer(svc *order.Service, store Store, checker Checker, log *slog.Logger, opts Options) *Server {
	recoverer := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	countFailure, countClosed := func(string) {}, func(string) {}
	if opts.Metrics != nil {
		countFailure, countClosed = opts.Metrics.AuthFailure, opts.Metrics.ConnectionClosed
	}
	conn := opts.Conn.withDefaults()
	conns := newConnTracker(conn, countClosed)
	fails := newAuthFailures(opts.AuthFailures, conns.addressing, log, countFailure)
	authn := &authenticator{keys: opts.Keys, fails: fails, addressing: conns.addressing,
		keyless: newKeylessStreams(conn.MaxKeylessStreams, conn.MaxKeylessStreamsPerAddress)}
	limit := &limiter{limits: opts.Limits, keys: map[string]*keyLimit{}}
	var observe admissionObserver
	if opts.Metrics != nil {
		observe = admissionObserver{admitted: opts.Metrics.Admitted, refused: opts.Metrics.AdmissionRefused}
	}
	// Calls are logged after authentication: a call refused for its key is
	// counted and logged by authFailures, a line per peer and interval, so
	// that a flood of keyless calls cannot flood the log. Health checks and
	// reflection are not logged (callLog).
	calls := callLog{log: log}
	unary := []grpc.UnaryServerInterceptor{recovery.UnaryServerInterceptor(recoverer), authn.unary(limit)}
	// Admission comes after the key's own limits, so that one merchant's
	// flood is refused by its key's limits before it takes the server's
	// places, and before the log: a refusal is counted, never logged, so
	// that an overload does not flood the log too.
	if opts.Admission.MaxInFlight > 0 {
		unary = append(unary, newAdmission(opts.Admission, observe, time.Now).unary)
	}
	unary = append(unary, calls.unary, idempotencyKey)
	stream := []grpc.StreamServerInterceptor{recovery.StreamServerInterceptor(recoverer), authn.stream(limit), calls.stream}
	if opts.Metrics != nil {
		unary = append([]grpc.UnaryServerInterceptor{opts.Metrics.GRPC.UnaryServerInterceptor()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{opts.Metrics.GRPC.StreamServerInterceptor()}, stream...)
	}
	serverOpts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		// Calls run on long-lived workers rather than a new goroutine each:
		// a call's stack grows to tens of kilobytes (interceptors, pgx), and
		// copying it while it grows cost ~6% of the server's CPU under
		// load (settle bench -profile). More calls than workers still get
		// their own goroutines.
		grpc.NumStreamWorkers(streamWorkers),
		// Requests are decoded by the handlers' decoder (see decode.go).
		grpc.ForceServerCodecV2(newRawCodec()),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		// The listener's connections are tied to their calls through the
		// stats handler (see connTracker).
		grpc.StatsHandler(conns),
	}
	serverOpts = append(serverOpts, conn.serverOptions()...)
	if opts.Tracing != nil {
		serverOpts = append(serverOpts, grpc.StatsHandler(otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(opts.Tracing.Provider), otelgrpc.WithPropagators(opts.Tracing.Propagator))))
	}
	if opts.Creds != nil {
		serverOpts = append(serverOpts, grpc.Creds(opts.Creds))
	}
	gs := grpc.NewServer(serverOpts...)
	reg := decodingRegistrar{Server: gs, d: decoder{log: log, metrics: opts.Metrics}}
	hub := &watchHub{}
	watchLifetime := opts.WatchLifetime
	if watchLifetime <= 0 {
		watchLifetime = DefaultWatchLifetime
	}
	settlev1.RegisterOrderServiceServer(reg, &orderServer{svc: svc, hub: hub, watcher: store, events: store, log: log, watchLifetime: watchLifetime})
	settlev1.RegisterOpsServiceServer(reg, &opsServer{svc: svc, store: store, events: store, checker: checker, auditor: opts.Auditor, log: log})
	h := health.NewServer()
	healthpb.RegisterHealthServer(reg, h)
	if !opts.NoReflection {
		reflection.Register(reg)
	}
	if opts.Metrics != nil {
		opts.Metrics.GRPC.InitializeMetrics(gs)
	}
	tc, err := newTranscoder(gs)
	if err != nil {
		panic(err)
	}
	srv := &Server{Server: gs, Health: h, hub: hub, fails: fails, conns: conns, transcoder: tc}
	if opts.JSON != nil {
		srv.json = newJSONServer(tc, conn, *opts.JSON, countClosed)
	}
	return srv
}

// OrderChanged wakes the WatchOrder streams of order id; "" wakes them all
// (after notifications may have been missed).
func (s *Server) OrderChanged(id string) { s.hub.wake(id) }

// WatchHealth sets the health status from ping every interval until ctx
// ends: SERVING while the database answers, NOT_SERVING while it does not.
func (s *Server) WatchHealth(ctx context.Context, ping func(context.Context) error, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, interval)
		err := ping(pctx)
		cancel()
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		for _, svc := range []string{"", settlev1.OrderService_ServiceDesc.ServiceName, settlev1.OpsService_ServiceDesc.ServiceName} {
			s.Health.SetServingStatus(svc, st)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
