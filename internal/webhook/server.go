package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/settlepay/settle/internal/clientaddr"
)

// Limits bound the webhook listener, as grpcapi.ConnLimits bound the gRPC
// one: a sender that is not a gateway (it cannot sign) must not be able to
// hold connections, memory or goroutines.
type Limits struct {
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted.
	MaxConnections int
	// MaxConnectionsPerAddress bounds the connections one client address
	// (an IPv4 address, an IPv6 /64) holds at once; one more is closed as
	// soon as it is accepted, without taking one of MaxConnections. Zero is
	// no bound, for a listener behind a proxy, whose connections all come
	// from the proxy's address.
	MaxConnectionsPerAddress int
	// ReadHeaderTimeout bounds the wait for a request's headers,
	// ReadTimeout for the whole request, WriteTimeout for the answer, and
	// IdleTimeout a kept-alive connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
}

// DefaultLimits suit a gateway's deliveries: a few kilobytes each, sent
// over few connections. A gateway delivers from a few published addresses,
// so several of its connections share one; docs/operations.md says why 32
// of them fit Stripe's deliveries.
var DefaultLimits = Limits{
	MaxConnections:           256,
	MaxConnectionsPerAddress: 32,
	ReadHeaderTimeout:        5 * time.Second,
	ReadTimeout:              15 * time.Second,
	WriteTimeout:             15 * time.Second,
	IdleTimeout:              90 * time.Second,
	MaxHeaderBytes:           16 << 10,
}

// Serve serves h on lis under lim until ctx ends, then lets requests in
// progress finish within grace. With tlsCfg set, it serves HTTPS, over
// HTTP/1.1 only: tlsCfg offers no "h2" (were it to, net/http's HTTP/2
// server would turn the Connection: close that Handler sets after a
// request it could not verify into a GOAWAY).
func Serve(ctx context.Context, lis net.Listener, h http.Handler, lim Limits, tlsCfg *tls.Config, grace time.Duration) error {
	// The address's bound is checked first: a connection refused for its
	// address never holds one of MaxConnections.
	if lim.MaxConnectionsPerAddress > 0 {
		lis = &addressLimitListener{Listener: lis, max: lim.MaxConnectionsPerAddress, open: map[string]int{}}
	}
	if lim.MaxConnections > 0 {
		lis = netutil.LimitListener(lis, lim.MaxConnections)
	}
	if tlsCfg != nil {
		lis = tls.NewListener(lis, tlsCfg)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		// Requests run on their own context: an event being recorded
		// finishes its commit and its answer during the shutdown.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-served; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// addressLimitListener accepts at most max connections open at once from
// one client address, and closes any more as soon as they are accepted.
type addressLimitListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int // connections open, by client address
}

// Accept returns the next connection whose address is under the bound.
func (l *addressLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientaddr.Default.Key(c.RemoteAddr())
		l.mu.Lock()
		admit := l.open[key] < l.max
		if admit {
			l.open[key]++
		}
		l.mu.Unlock()
		if admit {
			return &addressConn{Conn: c, release: func() { l.release(key) }}, nil
		}
		c.Close()
	}
}

func (l *addressLimitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// addressConn gives its address's place back when it is closed, once.
type addressConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *addressConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
