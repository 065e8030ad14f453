package grpcapi

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"

	"github.com/settlepay/settle/internal/clientaddr"
)

// addressing says which connections come from one client.
type addressing struct{ clientaddr.Prefixes }

// fromContext is the client address of the call in ctx: its connection's,
// as the listener counted it, or else the peer's.
func (a addressing) fromContext(ctx context.Context) string {
	if c, ok := ctx.Value(connKey{}).(*clientConn); ok {
		return c.addr
	}
	if p, ok := peer.FromContext(ctx); ok {
		return a.Key(p.Addr)
	}
	return "unknown"
}

// Reasons a connection is closed by the tracker, as counted in the
// metrics.
const (
	closedAddressLimit = "address_limit"   // past MaxConnectionsPerAddress
	closedKeylessLimit = "keyless_evicted" // the oldest keyless one, past MaxKeylessConnectionsPerAddress
	closedKeylessGrace = "keyless_grace"   // no call with a valid key within KeylessGrace
)

// connTracker counts the listener's connections per client address and
// closes those that hold a place without using it: past the address's
// limit, past its budget of keyless connections (those that have not yet
// carried a call with a valid API key), and keyless ones past their grace.
// It is the server's stats handler too: TagConn ties each connection's
// calls to its clientConn, so that authentication can mark it.
type connTracker struct {
	limits     ConnLimits
	addressing addressing
	onClose    func(reason string)

	mu    sync.Mutex
	open  int
	addrs map[string]*addressConns
	// conns finds a connection by its remote and local address, which is
	// all that gRPC tells TagConn of it.
	conns map[string]*clientConn
}

// addressConns are one client address's connections.
type addressConns struct {
	open int
	// keyless are the keyless connections, oldest first.
	keyless []*clientConn
}

func newConnTracker(l ConnLimits, onClose func(string)) *connTracker {
	return &connTracker{limits: l, addressing: addressing{clientaddr.Prefixes{V4: l.AddressPrefixV4, V6: l.AddressPrefixV6}}, onClose: onClose,
		addrs: map[string]*addressConns{}, conns: map[string]*clientConn{}}
}

// clientConn is an accepted connection as the tracker follows it.
type clientConn struct {
	net.Conn
	t    *connTracker
	addr string // its client address
	id   string // its remote and local address

	authed atomic.Bool
	// calls is the number of calls open on it; graceOver is set once its
	// grace has passed without a call with a valid key.
	calls     atomic.Int32
	graceOver atomic.Bool
	timer     *time.Timer
	closeOnce sync.Once
}

type connKey struct{}

func connID(remote, local net.Addr) string {
	return fmt.Sprintf("%v|%v", remote, local)
}

// listener returns lis with the tracker's limits applied to what it accepts.
func (t *connTracker) listener(lis net.Listener) net.Listener {
	return &trackedListener{Listener: lis, t: t}
}

type trackedListener struct {
	net.Listener
	t *connTracker
}

// Accept returns the next connection the limits admit, closing at once
// each one past its address's limit.
func (l *trackedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if cc := l.t.admit(c); cc != nil {
			return cc, nil
		}
	}
}

// admit counts c against its address, or closes it and returns nil. A
// new connection is keyless: at the address's limit, or past its budget of
// keyless connections, it takes the place of the address's oldest keyless
// connection, which is closed; at the limit with none, it is closed itself.
// Taking the oldest keyless connection's place, rather than refusing the
// new one, lets the keyed clients behind an address that an attacker
// shares (a NAT) still connect: their connections carry a keyed call
// within milliseconds and are then never evicted.
func (t *connTracker) admit(c net.Conn) *clientConn {
	cc := &clientConn{Conn: c, t: t, addr: t.addressing.Key(c.RemoteAddr()), id: connID(c.RemoteAddr(), c.LocalAddr())}
	var evict *clientConn
	t.mu.Lock()
	a := t.addrs[cc.addr]
	if a == nil {
		a = &addressConns{}
		t.addrs[cc.addr] = a
	}
	full := a.open >= t.limits.MaxConnectionsPerAddress
	if (full || len(a.keyless) >= t.limits.MaxKeylessConnectionsPerAddress) && len(a.keyless) > 0 {
		evict = a.keyless[0]
	} else if full {
		t.mu.Unlock()
		c.Close()
		t.onClose(closedAddressLimit)
		return nil
	}
	a.open++
	a.keyless = append(a.keyless, cc)
	t.open++
	t.conns[cc.id] = cc
	cc.timer = time.AfterFunc(t.limits.KeylessGrace, cc.endGrace)
	t.mu.Unlock()
	if evict != nil {
		evict.closeFor(closedKeylessLimit)
	}
	return cc
}

// authenticated marks c as having carried a call with a valid key: it is
// no longer keyless, and keeps its place.
func (c *clientConn) authenticated() {
	if c.authed.Load() {
		return
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.authed.Swap(true) {
		return
	}
	c.timer.Stop()
	if a := c.t.addrs[c.addr]; a != nil {
		a.keyless = slices.DeleteFunc(a.keyless, func(k *clientConn) bool { return k == c })
	}
}

// endGrace closes a keyless connection whose grace has passed once no
// call is open on it, and in any case after a second grace: a call
// without a key (a health check) that is open then ends with the
// connection.
func (c *clientConn) endGrace() {
	if c.authed.Load() {
		return
	}
	if c.graceOver.Swap(true) || c.calls.Load() == 0 {
		c.closeFor(closedKeylessGrace)
		return
	}
	c.t.mu.Lock()
	if !c.authed.Load() {
		c.timer.Reset(c.t.limits.KeylessGrace)
	}
	c.t.mu.Unlock()
}

// callEnded closes a keyless connection past its grace when its last call
// ends.
func (c *clientConn) callEnded() {
	if c.calls.Add(-1) == 0 && c.graceOver.Load() && !c.authed.Load() {
		c.closeFor(closedKeylessGrace)
	}
}

func (c *clientConn) closeFor(reason string) {
	if c.forget() {
		c.t.onClose(reason)
	}
	c.Conn.Close()
}

// Close closes the connection and gives back its place.
func (c *clientConn) Close() error {
	c.forget()
	return c.Conn.Close()
}

// forget removes c from the counts, and reports whether it was counted.
func (c *clientConn) forget() bool {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.t.mu.Lock()
		defer c.t.mu.Unlock()
		c.timer.Stop()
		c.t.open--
		delete(c.t.conns, c.id)
		a := c.t.addrs[c.addr]
		a.open--
		a.keyless = slices.DeleteFunc(a.keyless, func(k *clientConn) bool { return k == c })
		if a.open == 0 {
			delete(c.t.addrs, c.addr)
		}
	})
	return first
}

// accepting says why the listener would not accept a connection now: all
// MaxConnections places are held, so a new one waits in the kernel's
// accept queue.
func (t *connTracker) accepting() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open >= t.limits.MaxConnections {
		return fmt.Errorf("all %d gRPC connections are held: new clients wait to connect", t.limits.MaxConnections)
	}
	return nil
}

// markAuthenticated marks the connection of the call in ctx as having
// carried a call with a valid key.
func markAuthenticated(ctx context.Context) {
	if c, ok := ctx.Value(connKey{}).(*clientConn); ok {
		c.authenticated()
	}
}

// TagConn puts the connection's clientConn in the context its calls
// derive from.
func (t *connTracker) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	t.mu.Lock()
	c := t.conns[connID(info.RemoteAddr, info.LocalAddr)]
	t.mu.Unlock()
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

// HandleConn does nothing: the listener sees connections open and close.
func (t *connTracker) HandleConn(context.Context, stats.ConnStats) {}

// TagRPC leaves the call's context as it is.
func (t *connTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC counts the calls open on each keyless connection. A keyed
// connection's count goes stale, which nothing reads.
func (t *connTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.Begin, *stats.End:
	default:
		return // a call's other events, several per call
	}
	c, ok := ctx.Value(connKey{}).(*clientConn)
	if !ok || c.authed.Load() {
		return
	}
	if _, begin := s.(*stats.Begin); begin {
		c.calls.Add(1)
	} else {
		c.callEnded()
	}
}
