package main

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/settlepay/settle/internal/console"
	"github.com/settlepay/settle/internal/grpcapi"
)

// consoleServer is the console and its HTTP server.
type consoleServer struct {
	console *console.Console
	http    *http.Server
	tls     *tls.Config
}

// console returns the operator's console in front of srv's in-process
// calls, for the listener lis: its cookies are Secure unless lis is a
// loopback address.
func (a *app) console(srv *grpcapi.Server, lis net.Listener) (*consoleServer, error) {
	cfg, err := a.cfg.consoleTLS()
	if err != nil {
		return nil, err
	}
	c, err := console.New(console.Options{API: srv.InProcess(), Metrics: a.metrics.Registry,
		SecureCookies: !isLoopback(lis.Addr().String()), Log: a.log.With("component", "console")})
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		// An action waits for the gateway, up to its timeout.
		WriteTimeout: max(grpcapi.DefaultJSONWriteTimeout, 2*a.cfg.GatewayTimeout+10*time.Second),
		IdleTimeout:  2 * time.Minute, MaxHeaderBytes: 16 << 10, TLSConfig: cfg}
	return &consoleServer{console: c, http: hs, tls: cfg}, nil
}

// serve serves the console on lis until it is shut down, then returns nil.
func (cs *consoleServer) serve(lis net.Listener) error {
	if cs.tls != nil {
		lis = tls.NewListener(lis, cs.tls)
	}
	err := cs.http.Serve(lis)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
