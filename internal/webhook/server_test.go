package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/gatewaytest"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/webhook"
)

// serveLimited serves the webhook listener under lim on a loopback port,
// with webhook.Serve as `settle serve` does, until the test ends, and
// returns its address.
func serveLimited(t *testing.T, lim webhook.Limits) string { return serveTLS(t, lim, nil) }

// serveTLS is serveLimited, over HTTPS when tlsCfg is set.
func serveTLS(t *testing.T, lim webhook.Limits, tlsCfg *tls.Config) string {
	t.Helper()
	var logs logtest.Buffer
	h := webhook.New(postgres.NewStore(postgrestest.Pool(t)), webhook.Config{
		Gateways: map[string]order.EventReceiver{"refpsp": newRefpsp(t, "http://"+gatewaytest.ClosedAddr(t), time.Second)},
	}, logs.Logger())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- webhook.Serve(ctx, lis, h, lim, tlsCfg, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// testLimits are DefaultLimits with timeouts far longer than any wait of
// these tests, so that only what is under test closes a connection.
func testLimits(maxConns, perAddress int) webhook.Limits {
	lim := webhook.DefaultLimits
	lim.MaxConnections, lim.MaxConnectionsPerAddress = maxConns, perAddress
	lim.ReadHeaderTimeout, lim.ReadTimeout, lim.WriteTimeout, lim.IdleTimeout = 5*time.Minute, 5*time.Minute, 5*time.Minute, 5*time.Minute
	return lim
}

// dialFrom connects to addr from the loopback address from (Linux's
// loopback answers for all of 127.0.0.0/8), as a client of that address
// would.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answer is what the listener answered a request: its status, and
// whether it said Connection: close.
type answer struct {
	StatusCode int
	Close      bool
}

// send writes one request on c and reads its answer.
func send(c net.Conn, path string, signed bool, id string) (answer, error) {
	body := refpspEvent(id, refpsp.EventSucceeded, "not-one-of-ours")
	req, _ := http.NewRequest(http.MethodPost, "http://webhooks"+path, bytes.NewReader(body))
	if signed {
		req.Header.Set(refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), refpspSecret))
	}
	if err := req.Write(c); err != nil {
		return answer{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return answer{StatusCode: resp.StatusCode, Close: resp.Close}, err
}

// closedByServer reports whether the server closes c (a read ends with
// EOF or a reset) within a deadline far beyond any scheduling delay.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if err == nil {
		t.Fatal("the server sent bytes nobody asked for")
	}
	return true
}

// TestWebhookUnverifiedRequestClosesConnection: a request that carries no
// verified event (no signature, a wrong one, an unknown path) is answered
// with Connection: close and its connection closed; a signed event's
// connection stays open for the next.
func TestWebhookUnverifiedRequestClosesConnection(t *testing.T) {
	t.Parallel()
	addr := serveLimited(t, testLimits(16, 16))
	for _, c := range []struct{ name, path string }{
		{"unsigned event", "/webhooks/refpsp"},
		{"unknown path", "/webhooks/elsewhere"},
		{"gateway not configured", "/webhooks/stripe"},
	} {
		conn := dialFrom(t, "127.0.0.2", addr)
		resp, err := send(conn, c.path, false, "evt_close")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.StatusCode < 400 || !resp.Close {
			t.Errorf("%s: %d, Connection: close %v; want a 4xx with Connection: close", c.name, resp.StatusCode, resp.Close)
		}
		if !closedByServer(t, conn) {
			t.Errorf("%s: the connection is still open 30 s after the answer", c.name)
		}
	}

	conn := dialFrom(t, "127.0.0.2", addr)
	for i := range 2 {
		resp, err := send(conn, "/webhooks/refpsp", true, fmt.Sprintf("evt_keep_%d", i))
		if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("signed event %d on one connection: %v %v; want 200 kept alive", i, resp, err)
		}
	}
}

// TestWebhookHTTPSClosesUnverifiedConnection: over HTTPS the listener
// speaks HTTP/1.1 even to a client that offers HTTP/2 (whose connections
// Connection: close would not end at once, but by a GOAWAY), and closes
// the connection of an unsigned request as over plain HTTP.
func TestWebhookHTTPSClosesUnverifiedConnection(t *testing.T) {
	t.Parallel()
	// httptest's certificate, for 127.0.0.1.
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	cert, roots := ts.TLS.Certificates[0], ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	ts.Close()
	addr := serveTLS(t, testLimits(16, 16), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})

	conn := tls.Client(dialFrom(t, "127.0.0.2", addr), &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2", "http/1.1"}})
	if err := conn.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Fatal("the listener negotiated HTTP/2")
	}
	resp, err := send(conn, "/webhooks/refpsp", false, "evt_tls")
	if err != nil || resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Fatalf("unsigned event over HTTPS: %v %v; want 400 with Connection: close", resp, err)
	}
	if !closedByServer(t, conn) {
		t.Fatal("the HTTPS connection is still open 30 s after the answer")
	}
}

// TestWebhookConnectionsPerAddress: an address holds at most its bound of
// connections; one more is closed unanswered while another address is
// served, and a place given back is taken by the next connection.
func TestWebhookConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	addr := serveLimited(t, testLimits(16, 2))
	held := []net.Conn{dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)}
	for i, c := range held {
		if resp, err := send(c, "/webhooks/refpsp", true, fmt.Sprintf("evt_held_%d", i)); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d of the address: %v %v, want 200", i+1, resp, err)
		}
	}
	if !closedByServer(t, dialFrom(t, "127.0.0.2", addr)) {
		t.Fatal("a third connection from the address is open 30 s later; want it closed at once")
	}
	other := dialFrom(t, "127.0.0.3", addr)
	if resp, err := send(other, "/webhooks/refpsp", true, "evt_other"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another address: %v %v, want 200", resp, err)
	}

	// The server learns of a client's close when it next reads, so the
	// next connection may come a moment too early: try until it is served.
	held[0].Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := send(dialFrom(t, "127.0.0.2", addr), "/webhooks/refpsp", true, "evt_after")
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after one of the address's connections closed, a new one is still refused: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWebhookKeepAliveFloodLocksNoGatewayOut runs the attack in
// miniature: clients at one address that cannot sign open many kept-alive
// connections (more than the listener's cap), each sends one unsigned
// request and then holds its connection, opening another when one is
// closed. A gateway's signed event from another address must still be
// answered. Before the fix the flood held every one of the listener's
// connections for as long as they were kept alive (here five minutes),
// and the gateway's connection waited behind them.
func TestWebhookKeepAliveFloodLocksNoGatewayOut(t *testing.T) {
	t.Parallel()
	const maxConns = 8
	addr := serveLimited(t, testLimits(maxConns, 2))

	ctx, stop := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
		mu       sync.Mutex
		conns    []net.Conn
	)
	flooding := make(chan struct{})
	var once sync.Once
	for range 4 * maxConns {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			for ctx.Err() == nil {
				// A pause between connections keeps the flood from
				// using up the machine's ports.
				time.Sleep(20 * time.Millisecond)
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if resp, err := send(c, "/webhooks/refpsp", false, "evt_flood"); err == nil && resp.StatusCode == http.StatusBadRequest {
					if answered.Add(1) >= maxConns {
						once.Do(func() { close(flooding) })
					}
				}
				// Hold the connection until the server ends it.
				io.Copy(io.Discard, c)
				c.Close()
			}
		})
	}
	t.Cleanup(func() {
		stop()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	select {
	case <-flooding:
	case <-time.After(time.Minute):
		t.Fatal("the flood never got as many answers as the listener has connections")
	}

	gw := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext,
	}}
	body := refpspEvent("evt_gateway", refpsp.EventSucceeded, "not-one-of-ours")
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/refpsp", bytes.NewReader(body))
	req.Header.Set(refpsp.SignatureHeader, refpsp.Sign(body, time.Now(), refpspSecret))
	resp, err := gw.Do(req)
	if err != nil {
		t.Fatalf("the gateway's signed event during the flood (%d unsigned answers so far): %v", answered.Load(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the gateway's signed event: %d, want 200", resp.StatusCode)
	}
}
