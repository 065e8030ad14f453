package main

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/settlepay/settle"
	"github.com/settlepay/settle/internal/grpcapi"
)

// serverOptions turns the security settings into the server's options, and
// refuses what would expose an open or plaintext API beyond this machine:
// plaintext off loopback needs --plaintext, and serving without keys needs
// --no-api-keys and a loopback address.
func (c *config) serverOptions() (grpcapi.Options, error) {
	opts := grpcapi.Options{
		Limits:    grpcapi.Limits{RatePerSecond: c.RateLimit, Burst: c.RateBurst, InFlight: c.MaxInFlight, Watches: c.MaxWatches},
		Admission: c.admission(),
		Conn: grpcapi.ConnLimits{
			MaxConnections:                  c.MaxConns,
			MaxConnectionsPerAddress:        c.MaxConnsPerAddr,
			MaxKeylessConnectionsPerAddress: c.MaxKeylessConns,
			KeylessGrace:                    c.KeylessGrace,
			AddressPrefixV4:                 c.PrefixV4,
			AddressPrefixV6:                 c.PrefixV6,
			MaxConcurrentStreams:            uint32(c.MaxStreams),
			MaxKeylessStreams:               c.MaxKeyless,
			MaxKeylessStreamsPerAddress:     c.MaxKeylessPerAddr,
			MaxConnectionIdle:               c.ConnIdle,
			MaxConnectionAge:                c.ConnAge,
			MaxConnectionAgeGrace:           c.ConnAgeGrace,
		},
		AuthFailures:  grpcapi.AuthFailureLimits{RatePerSecond: c.AuthFailRate, Burst: c.AuthFailBurst},
		WatchLifetime: c.WatchLifetime,
		NoReflection:  !c.Reflection,
	}
	text := c.APIKeys
	if c.APIKeysFile != "" {
		b, err := os.ReadFile(c.APIKeysFile)
		if err != nil {
			return opts, fmt.Errorf("read API keys file: %w", err)
		}
		text += "\n" + string(b)
	}
	keys, err := grpcapi.ParseKeys(text)
	if err != nil {
		return opts, err
	}
	opts.Keys = keys
	tlsCfg, err := c.apiTLS()
	if err != nil {
		return opts, err
	}
	if tlsCfg != nil {
		opts.Creds = credentials.NewTLS(tlsCfg)
	}
	if c.JSONListen != "" {
		// JSON over HTTP is the same API: the same keys, limits and
		// certificate. A charge waits for the gateway up to its timeout,
		// a cascade for its hops within that deadline; the answer has a
		// margin beyond it.
		opts.JSON = &grpcapi.JSONOptions{TLS: tlsCfg, OpenAPI: settle.OpenAPI,
			WriteTimeout: max(grpcapi.DefaultJSONWriteTimeout, 2*c.GatewayTimeout+10*time.Second)}
	}
	// Plaintext and serving without keys are two decisions: a proxy that
	// terminates TLS makes plaintext safe enough on a private network, but
	// nothing makes a keyless API safe where others can reach it.
	loopback, exposed := isLoopback(c.Listen), c.Listen
	if !loopback && opts.Creds == nil && !c.Plaintext {
		return opts, fmt.Errorf("refusing to serve plaintext on %s, which is not a loopback address: set --tls-cert and --tls-key, or --plaintext behind a proxy that terminates TLS", c.Listen)
	}
	if c.JSONListen != "" && !isLoopback(c.JSONListen) {
		if opts.Creds == nil && !c.Plaintext {
			return opts, fmt.Errorf("refusing to serve plain HTTP on json-listen %s, which is not a loopback address: set --tls-cert and --tls-key, or --plaintext behind a proxy that terminates TLS", c.JSONListen)
		}
		loopback, exposed = false, c.JSONListen
	}
	switch {
	case c.NoAPIKeys && !loopback:
		return opts, fmt.Errorf("refusing --no-api-keys on %s, which is not a loopback address: anyone who can reach it could read and charge every merchant's orders; set SETTLE_API_KEYS or SETTLE_API_KEYS_FILE", exposed)
	case c.NoAPIKeys && len(keys) > 0:
		return opts, errors.New("--no-api-keys and API keys are both set: choose one")
	case !c.NoAPIKeys && len(keys) == 0:
		return opts, errors.New("no API keys: set SETTLE_API_KEYS or SETTLE_API_KEYS_FILE (or, for tests on a loopback address, --no-api-keys)")
	}
	if _, err := c.consoleTLS(); err != nil {
		return opts, err
	}
	return opts, nil
}

// apiTLS returns the API's TLS settings (the certificate, and client
// certificates when a client CA is set), nil for plaintext. The JSON
// listener and the console use them too.
func (c *config) apiTLS() (*tls.Config, error) {
	if c.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate and key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.TLSClientCA != "" {
		pem, err := os.ReadFile(c.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("client CA file holds no PEM certificate")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// consoleTLS returns the console's TLS settings, the API's, and refuses
// what would expose it: plain HTTP off loopback needs --plaintext (behind
// a proxy that terminates TLS), and a server without API keys has no ops
// key to log in with.
func (c *config) consoleTLS() (*tls.Config, error) {
	if c.ConsoleListen == "" {
		return nil, nil
	}
	if c.NoAPIKeys {
		return nil, errors.New("refusing console-listen with --no-api-keys: the console logs in with an ops key; set SETTLE_API_KEYS or SETTLE_API_KEYS_FILE")
	}
	cfg, err := c.apiTLS()
	if err != nil {
		return nil, err
	}
	if cfg == nil && !c.Plaintext && !isLoopback(c.ConsoleListen) {
		return nil, fmt.Errorf("refusing to serve the console over plain HTTP on console-listen %s, which is not a loopback address: set --tls-cert and --tls-key, or --plaintext behind a proxy that terminates TLS", c.ConsoleListen)
	}
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	return cfg, nil
}

// webhookTLS returns the webhook listener's TLS settings, nil for plain
// HTTP, which only a loopback address or --webhook-plaintext (behind a proxy that
// terminates TLS) may have: an event's signature protects it from
// forgery, not from being read.
func (c *config) webhookTLS() (*tls.Config, error) {
	if c.WebhookTLSCert == "" {
		if !c.WebhookPlaintext && !isLoopback(c.WebhookListen) {
			return nil, fmt.Errorf("refusing to serve webhooks over plain HTTP on %s, which is not a loopback address: set --webhook-tls-cert and --webhook-tls-key, or --webhook-plaintext behind a proxy that terminates TLS", c.WebhookListen)
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.WebhookTLSCert, c.WebhookTLSKey)
	if err != nil {
		return nil, fmt.Errorf("load webhook TLS certificate and key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newDevKey returns a random API key for settle dev.
// newDevHex returns n random bytes in hex, as an HMAC key of Adyen's.
func newDevHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newDevKey(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
