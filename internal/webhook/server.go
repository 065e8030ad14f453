package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits bound the webhook listener, as grpcapi.ConnLimits bound the gRPC
// one: a sender that is not a gateway (it cannot sign) must not be able to
// hold connections, memory or goroutines.
type Limits struct {
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted.
	MaxConnections int
	// ReadHeaderTimeout bounds the wait for a request's headers,
	// ReadTimeout for the whole request, WriteTimeout for the answer, and
	// IdleTimeout a kept-alive connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
}

// DefaultLimits suit a gateway's deliveries: a few kilobytes each, sent
// over few connections.
var DefaultLimits = Limits{
	MaxConnections:    256,
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       15 * time.Second,
	WriteTimeout:      15 * time.Second,
	IdleTimeout:       90 * time.Second,
	MaxHeaderBytes:    16 << 10,
}

// Serve serves h on lis under lim until ctx ends, then lets requests in
// progress finish within grace. With tlsCfg set, it serves HTTPS.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, lim Limits, tlsCfg *tls.Config, grace time.Duration) error {
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
