package grpcapi

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// Roles of API keys.
const (
	// RoleCheckout may call OrderService for its merchant's orders.
	RoleCheckout = "checkout"
	// RoleOps may call OpsService for its merchant's orders, or for every
	// merchant's when its merchant is AllMerchants.
	RoleOps = "ops"
)

// AllMerchants is the merchant of a platform-wide ops key: an ops key that
// names it reaches every merchant's orders and events. ParseKeys refuses it
// for a checkout key, so no order belongs to a merchant of that name.
const AllMerchants = "*"

// Key is one API key as configured: the SHA-256 of the key (never the key
// itself), the merchant it acts for, its role, and a name for the history.
type Key struct {
	Hash     [sha256.Size]byte
	Merchant string
	Role     string
	Name     string
}

// ParseKeys reads API keys, one per line (or separated by ";"):
//
//	<sha256 hex of the key> <merchant id> <role: checkout|ops> <name>
//
// A checkout key acts for its merchant. An ops key is scoped to its
// merchant too: another merchant's order is NOT_FOUND to it, and its lists
// and counts hold its merchant's alone. An ops key for the whole platform
// names the merchant * (AllMerchants). Blank lines and lines starting with
// # are skipped.
func ParseKeys(text string) ([]Key, error) {
	var keys []Key
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ";", "\n")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("API key %d: want `<sha256 hex> <merchant> <role> <name>`", n)
		}
		var k Key
		if b, err := hex.DecodeString(f[0]); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("API key %d: the first field must be the key's SHA-256 in hex (64 characters), not the key", n)
		} else {
			copy(k.Hash[:], b)
		}
		k.Merchant, k.Role, k.Name = f[1], f[2], f[3]
		if k.Role != RoleCheckout && k.Role != RoleOps {
			return nil, fmt.Errorf("API key %d (%s): role must be checkout or ops", n, k.Name)
		}
		if k.Merchant == AllMerchants && k.Role != RoleOps {
			return nil, fmt.Errorf("API key %d (%s): merchant * (every merchant) is for ops keys only; a checkout key names its merchant", n, k.Name)
		}
		if names[k.Name] {
			return nil, fmt.Errorf("API key %d: name %s is used twice", n, k.Name)
		}
		// One key acting for two merchants or roles would be whichever line
		// came last: refuse it. The message names the hash by its first
		// hex digits only, enough to find the line.
		if other, ok := hashes[k.Hash]; ok {
			return nil, fmt.Errorf("API key %d (%s): the same key (SHA-256 %s…) as %s; a key acts for one merchant in one role: issue one key per merchant and role", n, k.Name, f[0][:8], other)
		}
		names[k.Name] = true
		hashes[k.Hash] = k.Name
		keys = append(keys, k)
	}
	return keys, nil
}

// HashKey returns the hex SHA-256 of an API key, as ParseKeys wants it.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// principal is the caller, as its API key says.
type principal struct {
	merchant, role, name string
}

type principalKey struct{}

// anonymous is every caller of a server with no API keys configured, which
// only a loopback listener allows (see cmd/settle).
var anonymous = principal{merchant: order.DefaultMerchant, role: "any", name: "anonymous"}

func principalFrom(ctx context.Context) principal {
	if p, ok := ctx.Value(principalKey{}).(principal); ok {
		return p
	}
	return anonymous
}

// merchant is the caller's merchant.
func merchant(ctx context.Context) string { return principalFrom(ctx).merchant }

// opsScope is whose orders an operator's call reaches: its key's
// merchant's, or every merchant's for a key of AllMerchants and for the
// anonymous caller of a server without keys (loopback only).
func opsScope(ctx context.Context) order.Scope {
	p := principalFrom(ctx)
	if p == anonymous || p.merchant == AllMerchants {
		return order.AnyMerchant
	}
	return order.ForMerchant(p.merchant)
}

// operator names the caller in an order's history.
func operator(ctx context.Context) order.Actor { return order.Operator(principalFrom(ctx).name) }

var errUnauthenticated = status.Error(codes.Unauthenticated, "missing or invalid API key")

// authenticator checks bearer keys and the role each service needs.
type authenticator struct {
	keys       []Key
	fails      *authFailures
	addressing addressing
	keyless    *keylessStreams
}

// authenticate finds the caller's key. It compares the presented key's hash
// with every configured hash in constant time, whatever matches. A valid
// key, of the method's role or not, marks the call's connection as keyed
// (see connTracker).
func (a *authenticator) authenticate(ctx context.Context, fullMethod string) (context.Context, error) {
	if len(a.keys) == 0 {
		markAuthenticated(ctx)
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) != 1 {
		return nil, errUnauthenticated
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return nil, errUnauthenticated
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, errUnauthenticated
	}
	k := a.keys[found]
	markAuthenticated(ctx)
	want := RoleCheckout
	if strings.HasPrefix(fullMethod, "/"+settlev1.OpsService_ServiceDesc.ServiceName+"/") {
		want = RoleOps
	}
	if k.Role != want {
		return nil, status.Errorf(codes.PermissionDenied, "this API key's role may not call %s", fullMethod)
	}
	return context.WithValue(ctx, principalKey{}, principal{merchant: k.Merchant, role: k.Role, name: k.Name}), nil
}

// open reports whether a method needs no key: health and reflection.
func open(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.") || strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// Limits bound each API key's calls: a token bucket of RatePerSecond with
// Burst, at most InFlight calls at once, and at most Watches WatchOrder
// streams at once. A WatchOrder stream takes a token but no InFlight slot:
// it may stay open for minutes, and a client's watches must not starve its
// charges. Zero means no limit.
type Limits struct {
	RatePerSecond float64
	Burst         int
	InFlight      int
	Watches       int
}

// limiter applies Limits per API key (not to anonymous callers).
type limiter struct {
	limits Limits
	mu     sync.Mutex
	keys   map[string]*keyLimit
}

type keyLimit struct {
	rate     *rate.Limiter
	inFlight chan struct{}
	watches  chan struct{}
}

var (
	errLimited      = status.Error(codes.ResourceExhausted, "too many requests for this API key; retry later")
	errWatchLimited = status.Error(codes.ResourceExhausted, "too many WatchOrder streams open for this API key; close one or retry later")
)

// watchMethod is the one long-lived call of OrderService.
var watchMethod = settlev1.OrderService_WatchOrder_FullMethodName

// acquire takes a call slot for the caller, or says why not: a watch slot
// for WatchOrder, an in-flight slot for any other call.
func (l *limiter) acquire(ctx context.Context, fullMethod string) (func(), error) {
	p := principalFrom(ctx)
	if p == anonymous || (l.limits.RatePerSecond <= 0 && l.limits.InFlight <= 0 && l.limits.Watches <= 0) {
		return func() {}, nil
	}
	l.mu.Lock()
	k, ok := l.keys[p.name]
	if !ok {
		k = &keyLimit{}
		if l.limits.RatePerSecond > 0 {
			k.rate = rate.NewLimiter(rate.Limit(l.limits.RatePerSecond), max(l.limits.Burst, 1))
		}
		if l.limits.InFlight > 0 {
			k.inFlight = make(chan struct{}, l.limits.InFlight)
		}
		if l.limits.Watches > 0 {
			k.watches = make(chan struct{}, l.limits.Watches)
		}
		l.keys[p.name] = k
	}
	l.mu.Unlock()
	if k.rate != nil && !k.rate.Allow() {
		return nil, errLimited
	}
	slots, full := k.inFlight, errLimited
	if fullMethod == watchMethod {
		slots, full = k.watches, errWatchLimited
	}
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	default:
		return nil, full
	}
}

func (a *authenticator) unary(l *limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if open(info.FullMethod) {
			return handler(ctx, req)
		}
		authed, err := a.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, a.fails.fail(ctx, err)
		}
		release, err := l.acquire(authed, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer release()
		return handler(authed, req)
	}
}

func (a *authenticator) stream(l *limiter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if open(info.FullMethod) {
			release, err := a.keyless.acquire(a.addressing.fromContext(ss.Context()))
			if err != nil {
				return err
			}
			defer release()
			return handler(srv, ss)
		}
		ctx, err := a.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return a.fails.fail(ss.Context(), err)
		}
		release, err := l.acquire(ctx, info.FullMethod)
		if err != nil {
			return err
		}
		defer release()
		return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
	}
}

// contextStream is a ServerStream with the caller in its context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
