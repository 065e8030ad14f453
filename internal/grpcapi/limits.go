package grpcapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// MaxHeaderBytes bounds a request's header list (its metadata, uncompressed).
// A real call's headers are a few hundred bytes (authorization, timeout,
// trace context, user agent); anything near the 64 KiB message cap is an
// attack. The HTTP/2 framer stops reading and closes the connection as soon
// as a header block outgrows this, before any interceptor sees it.
const MaxHeaderBytes = 16 << 10

// ConnLimits bound what one listener accepts before any API key is checked.
// A zero field takes its value from DefaultConnLimits.
type ConnLimits struct {
	// MaxConnections is the most connections the listener holds open; more
	// wait in the kernel's accept queue until one closes.
	MaxConnections int
	// MaxConnectionsPerAddress is the most connections open at once from
	// one client address (see AddressPrefixV4): a connection past it
	// takes the place of the address's oldest keyless connection, or is
	// closed as soon as it is accepted when there is none.
	MaxConnectionsPerAddress int
	// MaxKeylessConnectionsPerAddress is the most keyless connections
	// from one client address: those that have not yet carried a call
	// with a valid API key (every connection starts keyless). A new
	// connection past it takes the place of the address's oldest keyless
	// connection, which is closed.
	MaxKeylessConnectionsPerAddress int
	// KeylessGrace is how long a connection may stay keyless: then it is
	// closed as soon as no call is open on it, and in any case one more
	// KeylessGrace later.
	KeylessGrace time.Duration
	// AddressPrefixV4 and AddressPrefixV6 say what one client address is:
	// the connections whose IPv4 addresses share their first
	// AddressPrefixV4 bits (32: one IP) or whose IPv6 addresses share
	// their first AddressPrefixV6 bits (64: one host commonly holds a
	// whole /64).
	AddressPrefixV4, AddressPrefixV6 int
	// MaxConcurrentStreams is the most calls open at once on one connection.
	// gRPC also runs at most this many handlers per connection, which is its
	// defence against a flood of HEADERS followed by RST_STREAM: the
	// connection's reader stops until a handler returns.
	MaxConcurrentStreams uint32
	// MaxKeylessStreams is the most streams without an API key (health
	// Watch, reflection) open at once across the server, and
	// MaxKeylessStreamsPerAddress the most from one client address.
	MaxKeylessStreams           int
	MaxKeylessStreamsPerAddress int
	// MaxConnectionIdle closes (GOAWAY) a connection with no call open for
	// this long.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge closes (GOAWAY) any connection this old, ±10%, so
	// that clients spread over new servers; MaxConnectionAgeGrace is how long
	// its calls may go on after that.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// KeepaliveMinTime is the shortest interval between a client's pings;
	// a client that pings more often is sent GOAWAY (too_many_pings).
	KeepaliveMinTime time.Duration
	// HandshakeTimeout bounds the TLS handshake and the HTTP/2 preface of a
	// new connection.
	HandshakeTimeout time.Duration
}

// DefaultConnLimits are the limits of a server configured with none.
// docs/operations.md gives the reasoning behind the numbers.
var DefaultConnLimits = ConnLimits{
	MaxConnections:                  1024,
	MaxConnectionsPerAddress:        256,
	MaxKeylessConnectionsPerAddress: 16,
	KeylessGrace:                    30 * time.Second,
	AddressPrefixV4:                 32,
	AddressPrefixV6:                 64,
	MaxConcurrentStreams:            100,
	MaxKeylessStreams:               1024,
	MaxKeylessStreamsPerAddress:     256,
	MaxConnectionIdle:               5 * time.Minute,
	MaxConnectionAge:                30 * time.Minute,
	MaxConnectionAgeGrace:           time.Minute,
	KeepaliveMinTime:                20 * time.Second,
	HandshakeTimeout:                10 * time.Second,
}

// withDefaults fills zero fields from DefaultConnLimits.
func (l ConnLimits) withDefaults() ConnLimits {
	d := DefaultConnLimits
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt(&l.MaxConnections, d.MaxConnections)
	setInt(&l.MaxConnectionsPerAddress, d.MaxConnectionsPerAddress)
	setInt(&l.MaxKeylessConnectionsPerAddress, d.MaxKeylessConnectionsPerAddress)
	setInt(&l.AddressPrefixV4, d.AddressPrefixV4)
	setInt(&l.AddressPrefixV6, d.AddressPrefixV6)
	setInt(&l.MaxKeylessStreams, d.MaxKeylessStreams)
	setInt(&l.MaxKeylessStreamsPerAddress, d.MaxKeylessStreamsPerAddress)
	set(&l.KeylessGrace, d.KeylessGrace)
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = d.MaxConcurrentStreams
	}
	set(&l.MaxConnectionIdle, d.MaxConnectionIdle)
	set(&l.MaxConnectionAge, d.MaxConnectionAge)
	set(&l.MaxConnectionAgeGrace, d.MaxConnectionAgeGrace)
	set(&l.KeepaliveMinTime, d.KeepaliveMinTime)
	set(&l.HandshakeTimeout, d.HandshakeTimeout)
	return l
}

// serverOptions are the gRPC options that apply the limits.
func (l ConnLimits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(MaxHeaderBytes),
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.MaxConnectionIdle,
			MaxConnectionAge:      l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace,
			// The server pings a connection quiet for a minute and drops
			// it when no answer comes within 20s: a client that vanished
			// (no FIN) gives back its connection slot.
			Time:    time.Minute,
			Timeout: 20 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: l.KeepaliveMinTime,
			// Pings on a connection with no call are allowed: they are
			// rate-bounded by MinTime, and MaxConnectionIdle closes such a
			// connection anyway, pings or not.
			PermitWithoutStream: true,
		}),
	}
}

// Serve accepts connections on lis, at most ConnLimits.MaxConnections at
// once, and from each client address as its limits allow.
func (s *Server) Serve(lis net.Listener) error {
	return s.Server.Serve(netutil.LimitListener(s.conns.listener(lis), s.conns.limits.MaxConnections))
}

// Accepting says why the server could not take a new client's call now:
// every connection place is held, so a new connection waits to be
// accepted. Nil means it could.
func (s *Server) Accepting() error {
	if err := s.conns.accepting(); err != nil {
		return err
	}
	if s.json != nil {
		if s.json.conns.accepting() != nil {
			return fmt.Errorf("all %d JSON over HTTP connections are held: new clients wait to connect", s.json.conns.limits.MaxConnections)
		}
	}
	return nil
}

// Stop stops the server at once (see grpc.Server.Stop) and writes the
// failed-authentication counts not yet logged.
func (s *Server) Stop() {
	s.stopJSON()
	s.Server.Stop()
	s.fails.close()
}

// GracefulStop stops the server once its calls have finished (see
// grpc.Server.GracefulStop), the JSON listener's requests answered too, and writes the failed-authentication counts not
// yet logged.
func (s *Server) GracefulStop() {
	var g sync.WaitGroup
	g.Go(s.shutdownJSON)
	s.Server.GracefulStop()
	g.Wait()
	s.fails.close()
}

// AuthFailureLimits bound failed authentication per peer address: a token
// bucket of RatePerSecond with Burst. Past it, a call with a missing or
// wrong key is answered RESOURCE_EXHAUSTED; a call with a valid key (of the
// wrong role or not) is never refused by it. Failures are logged at most once per LogInterval per peer,
// with their count. Zero fields take the defaults (5/s, 20, 10s).
type AuthFailureLimits struct {
	RatePerSecond float64
	Burst         int
	LogInterval   time.Duration
}

func (l AuthFailureLimits) withDefaults() AuthFailureLimits {
	if l.RatePerSecond <= 0 {
		l.RatePerSecond = 5
	}
	if l.Burst <= 0 {
		l.Burst = 20
	}
	if l.LogInterval <= 0 {
		l.LogInterval = 10 * time.Second
	}
	return l
}

// maxTrackedPeers bounds the failure table: past it, failures of new peers
// share one entry (and one bucket), so that many source addresses cannot
// grow it without bound.
const maxTrackedPeers = 4096

// otherPeers names the shared entry.
const otherPeers = "other"

var errAuthLimited = status.Error(codes.ResourceExhausted, "too many failed authentications from this address; retry later")

// authFailures rate-limits and reports failed authentication per peer.
type authFailures struct {
	limits     AuthFailureLimits
	addressing addressing
	log        *slog.Logger
	count      func(result string) // counts a failure: "rejected" or "limited"

	mu     sync.Mutex
	peers  map[string]*peerFailures
	closed bool
}

// peerFailures are one peer's failures since its last log line.
type peerFailures struct {
	rate              *rate.Limiter
	rejected, limited int
	timer             *time.Timer
}

func newAuthFailures(limits AuthFailureLimits, a addressing, log *slog.Logger, count func(string)) *authFailures {
	return &authFailures{limits: limits.withDefaults(), addressing: a, log: log, count: count, peers: map[string]*peerFailures{}}
}

// fail records a failed authentication of the caller in ctx and returns the
// error to answer: err, or RESOURCE_EXHAUSTED past the peer's budget. The
// first failure of a peer is logged at once; later ones are counted and
// logged as one line per LogInterval, so that a flood writes a few lines.
func (f *authFailures) fail(ctx context.Context, err error) error {
	addr := f.addressing.fromContext(ctx)
	f.mu.Lock()
	p, known := f.peers[addr]
	if !known && len(f.peers) >= maxTrackedPeers {
		addr = otherPeers
		p, known = f.peers[addr]
	}
	if !known {
		p = &peerFailures{rate: rate.NewLimiter(rate.Limit(f.limits.RatePerSecond), f.limits.Burst)}
		if !f.closed {
			f.peers[addr] = p
			p.timer = time.AfterFunc(f.limits.LogInterval, func() { f.flush(addr, p) })
		}
	}
	// A key of the wrong role is a real key, not a guess: it is counted and
	// logged, never limited.
	limited := status.Code(err) == codes.Unauthenticated && !p.rate.Allow()
	if limited {
		p.limited++
		err = errAuthLimited
	} else {
		p.rejected++
	}
	if !known {
		f.logLocked(addr, p)
	}
	f.mu.Unlock()
	if limited {
		f.count("limited")
	} else {
		f.count("rejected")
	}
	return err
}

// flush logs a peer's failures since its last line, or forgets the peer
// when it had none for a whole interval (by then its bucket has refilled).
func (f *authFailures) flush(addr string, p *peerFailures) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.peers[addr] != p {
		return
	}
	if p.rejected+p.limited == 0 {
		delete(f.peers, addr)
		return
	}
	f.logLocked(addr, p)
	p.timer.Reset(f.limits.LogInterval)
}

// close stops the timers and logs what is left.
func (f *authFailures) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for addr, p := range f.peers {
		p.timer.Stop()
		if p.rejected+p.limited > 0 {
			f.logLocked(addr, p)
		}
	}
	clear(f.peers)
}

func (f *authFailures) logLocked(addr string, p *peerFailures) {
	f.log.Warn("failed authentication", "peer", addr, "failures", p.rejected+p.limited,
		"limited", p.limited, "log_interval", f.limits.LogInterval.String())
	p.rejected, p.limited = 0, 0
}

// keylessStreams caps the streams that need no API key (health Watch,
// reflection), which may otherwise stay open for as long as their client
// likes: at most max across the server and perAddress from one client
// address, so that one client cannot take the streams that every other
// client's health checking needs.
type keylessStreams struct {
	max, perAddress int

	mu     sync.Mutex
	open   int
	byAddr map[string]int
}

func newKeylessStreams(max, perAddress int) *keylessStreams {
	return &keylessStreams{max: max, perAddress: perAddress, byAddr: map[string]int{}}
}

var (
	errKeylessLimited        = status.Error(codes.ResourceExhausted, "too many open streams without an API key; retry later")
	errKeylessAddressLimited = status.Error(codes.ResourceExhausted, "too many open streams without an API key from this address; close one or retry later")
)

// acquire takes a stream slot for the client address addr, or says why
// not.
func (k *keylessStreams) acquire(addr string) (func(), error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.byAddr[addr] >= k.perAddress:
		return nil, errKeylessAddressLimited
	case k.open >= k.max:
		return nil, errKeylessLimited
	}
	k.open++
	k.byAddr[addr]++
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.open--
		if k.byAddr[addr]--; k.byAddr[addr] == 0 {
			delete(k.byAddr, addr)
		}
	}, nil
}
