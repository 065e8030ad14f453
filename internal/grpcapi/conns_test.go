package grpcapi_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/telemetry"
)

// The tests of this file are clients at several addresses: on Linux the
// whole of 127/8 is loopback, so a connection from 127.0.0.2 is another
// client address than one from 127.0.0.3.

// dialerFrom dials from the local IP from ("" for any).
func dialerFrom(from string) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return d
}

// clientFrom is a gRPC client of addr whose connections come from the
// local IP from.
func clientFrom(t *testing.T, addr, from string) *grpc.ClientConn {
	t.Helper()
	d := dialerFrom(from)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// createFrom creates an order with keyA over a new connection from the
// local IP from, within 10s.
func createFrom(t *testing.T, addr, from, ref string) (*grpc.ClientConn, error) {
	t.Helper()
	conn := clientFrom(t, addr, from)
	ctx, cancel := context.WithTimeout(with(keyA), 10*time.Second)
	defer cancel()
	_, err := settlev1.NewOrderServiceClient(conn).CreateOrder(ctx, &settlev1.CreateOrderRequest{
		MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok"})
	return conn, err
}

// stillOpen counts the connections not yet closed by the server.
func stillOpen(conns []*h2conn) int {
	n := 0
	for _, h := range conns {
		select {
		case <-h.ended:
		default:
			n++
		}
	}
	return n
}

// TestKeylessFloodLeavesRoomForKeyedClients runs the attack that locked
// every client out, in miniature: one address opens five times
// MaxConnections connections, and each sends a health Check, which needs
// no key. Keyed clients, from another address and from the attacker's
// own (a NAT it shares with them), still connect and are served, and the
// attacker holds no more than its keyless budget. (Before the per-address
// limits, the attacker held every place and the keyed calls waited to
// connect until their deadline.)
func TestKeylessFloodLeavesRoomForKeyedClients(t *testing.T) {
	t.Parallel()
	const maxConns, attackers, keyless = 8, 40, 2
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Conn: grpcapi.ConnLimits{MaxConnections: maxConns,
		MaxConnectionsPerAddress: 6, MaxKeylessConnectionsPerAddress: keyless}}, insecure.NewCredentials())
	var flood []*h2conn
	for range attackers {
		h := dialH2From(t, s.addr, "127.0.0.2")
		// A connection the server has already closed fails to write.
		_ = h.headers(1, "/grpc.health.v1.Health/Check", false)
		_ = h.emptyMessage(1)
		flood = append(flood, h)
	}
	// Each connection is answered or closed, or waits to be accepted;
	// those accepted are all in by now.
	answered := 0
	for _, h := range flood {
		select {
		case <-h.settings:
			answered++
		case <-h.ended:
		case <-time.After(2 * time.Second):
		}
	}
	for i, from := range []string{"127.0.0.3", "127.0.0.2"} {
		if _, err := createFrom(t, s.addr, from, "keyed-"+from); err != nil {
			t.Fatalf("keyed call %d from %s during the flood: %v", i, from, err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for stillOpen(flood) > keyless {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the attacker's keyless connections open after 15s, want at most %d", stillOpen(flood), keyless)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.srv.Accepting(); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	t.Logf("%d attacker connections: %d answered at some point, %d open now", attackers, answered, stillOpen(flood))
}

// TestKeylessConnectionsAreClosedAfterGrace: a connection that carries no
// call with a valid key is closed after KeylessGrace, one with a keyless
// stream open (a health Watch) one grace later; a connection that carried
// a keyed call stays open.
func TestKeylessConnectionsAreClosedAfterGrace(t *testing.T) {
	t.Parallel()
	// Long enough for the keyed connection's first call to authenticate
	// within it on a loaded machine.
	const grace = 2 * time.Second
	metrics := telemetry.NewMetrics()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Metrics: metrics, Conn: grpcapi.ConnLimits{KeylessGrace: grace}},
		insecure.NewCredentials())
	keyed, err := createFrom(t, s.addr, "127.0.0.2", "keyed-grace")
	if err != nil {
		t.Fatal(err)
	}
	silent := dialH2From(t, s.addr, "127.0.0.3")
	watching := dialH2From(t, s.addr, "127.0.0.3")
	if err := watching.headers(1, "/grpc.health.v1.Health/Watch", false); err != nil {
		t.Fatal(err)
	}
	if err := watching.emptyMessage(1); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*h2conn{"silent": silent, "watching": watching} {
		select {
		case <-h.ended:
		case <-time.After(15 * time.Second):
			t.Fatalf("the %s keyless connection is open 15s after it opened, with a grace of %s", name, grace)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*grace)
	defer cancel()
	if keyed.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatalf("the keyed connection went %s within %s", keyed.GetState(), 2*grace)
	}
	closed := counters(t, metrics, "settle_grpc_connections_closed_total", "reason")
	if closed["keyless_grace"] != 2 {
		t.Errorf("settle_grpc_connections_closed_total %v, want keyless_grace 2", closed)
	}
}

// TestConnectionsPastTheAddressLimitAreClosedAtOnce: with an address's
// MaxConnectionsPerAddress keyed connections open, its next connection is
// closed as soon as it is accepted (not queued), while another address
// still connects.
func TestConnectionsPastTheAddressLimitAreClosedAtOnce(t *testing.T) {
	t.Parallel()
	const perAddress = 3
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Conn: grpcapi.ConnLimits{MaxConnectionsPerAddress: perAddress}},
		insecure.NewCredentials())
	for i := range perAddress {
		if _, err := createFrom(t, s.addr, "127.0.0.2", "per-address-"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	past := dialH2From(t, s.addr, "127.0.0.2")
	select {
	case <-past.ended:
	case <-time.After(15 * time.Second):
		t.Fatalf("a connection past the address's limit of %d is open after 15s", perAddress)
	}
	other := dialH2From(t, s.addr, "127.0.0.3")
	select {
	case <-other.settings:
	case <-other.ended:
		t.Fatal("another address's connection was closed")
	case <-time.After(15 * time.Second):
		t.Fatal("another address's connection is not answered after 15s")
	}
}

// TestKeylessStreamsAreCappedPerAddress: one address opens more health
// Watch streams than the server allows across all clients; it gets
// MaxKeylessStreamsPerAddress of them, and a client at another address
// can still watch health (gRPC client-side health checking).
func TestKeylessStreamsAreCappedPerAddress(t *testing.T) {
	t.Parallel()
	const total, perAddress, streams = 20, 5, 30
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Conn: grpcapi.ConnLimits{MaxKeylessStreams: total,
		MaxKeylessStreamsPerAddress: perAddress}}, insecure.NewCredentials())
	h := dialH2From(t, s.addr, "127.0.0.2")
	for i := range uint32(streams) {
		id := 2*i + 1
		if err := h.headers(id, "/grpc.health.v1.Health/Watch", false); err != nil {
			t.Fatal(err)
		}
		if err := h.emptyMessage(id); err != nil {
			t.Fatal(err)
		}
	}
	ended, open := map[uint32]string{}, map[uint32]bool{}
	deadline := time.After(15 * time.Second)
	for len(ended)+len(open) < streams {
		select {
		case f := <-h.frames:
			switch {
			case f.kind == "headers" && f.status != "":
				ended[f.stream] = f.status
				delete(open, f.stream)
			case f.kind == "data":
				open[f.stream] = true
			}
		case <-h.ended:
			t.Fatalf("the server closed the connection; %d ended, %d open", len(ended), len(open))
		case <-deadline:
			t.Fatalf("after 15s, %d ended, %d open of %d streams", len(ended), len(open), streams)
		}
	}
	if len(open) != perAddress {
		t.Errorf("%d health Watch streams open from one address, want %d", len(open), perAddress)
	}
	for id, st := range ended {
		if st != "8" {
			t.Errorf("stream %d ended with grpc-status %s, want 8 (RESOURCE_EXHAUSTED)", id, st)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(clientFrom(t, s.addr, "127.0.0.3")).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatalf("health Watch from another address: %v (code %s)", err, status.Code(err))
	}
}

// TestAcceptingFollowsTheConnectionPlaces: Accepting says no while every
// one of MaxConnections is held, and yes again once one is given back.
func TestAcceptingFollowsTheConnectionPlaces(t *testing.T) {
	t.Parallel()
	const maxConns = 3
	s := newStackWith(t, grpcapi.Options{Conn: grpcapi.ConnLimits{MaxConnections: maxConns}}, insecure.NewCredentials())
	if err := s.srv.Accepting(); err != nil {
		t.Fatalf("with no connection: %v", err)
	}
	var held []*h2conn
	for i := range maxConns {
		h := dialH2From(t, s.addr, "127.0.0."+string(rune('2'+i)))
		select {
		case <-h.settings:
		case <-time.After(15 * time.Second):
			t.Fatalf("connection %d not answered after 15s", i)
		}
		held = append(held, h)
	}
	if err := s.srv.Accepting(); err == nil {
		t.Fatalf("Accepting with all %d connections held: nil, want an error", maxConns)
	}
	held[0].conn.Close()
	deadline := time.Now().Add(15 * time.Second)
	for s.srv.Accepting() != nil {
		if time.Now().After(deadline) {
			t.Fatal("Accepting still says no 15s after a connection closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
