package grpcapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
)

const (
	keyA   = "sk_test_merchantA_checkout_0123456789"
	keyAop = "sk_test_merchantA_ops_0123456789"
	keyB   = "sk_test_merchantB_checkout_0123456789"
)

func testKeys(t *testing.T) []grpcapi.Key {
	t.Helper()
	keys, err := grpcapi.ParseKeys(fmt.Sprintf("%s merchant-a checkout a-checkout; %s merchant-a ops a-ops\n%s merchant-b checkout b-checkout",
		grpcapi.HashKey(keyA), grpcapi.HashKey(keyAop), grpcapi.HashKey(keyB)))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func with(key string) context.Context {
	ctx := context.Background()
	if key == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// TestAuthMatrix calls every RPC with no key, a wrong key, the right key of
// another merchant, a key of the wrong role, and the right key.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	// Every failure of the matrix comes from one address: a budget for all of
	// them (limiting is TestFailedAuthenticationIsLimitedAndSampled's).
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), AuthFailures: grpcapi.AuthFailureLimits{Burst: 1000}}, insecure.NewCredentials())
	created, err := s.orders.CreateOrder(with(keyA), &settlev1.CreateOrderRequest{MerchantReference: "auth-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetOrder().GetId()
	n := 0
	calls := map[string]struct {
		ops  bool
		call func(ctx context.Context) error
	}{
		"CreateOrder": {false, func(ctx context.Context) error {
			n++
			_, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: fmt.Sprintf("auth-new-%d", n),
				Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
			return err
		}},
		"GetOrder": {false, func(ctx context.Context) error {
			_, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: id}})
			return err
		}},
		"GetOrderByReference": {false, func(ctx context.Context) error {
			_, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "auth-1"}})
			return err
		}},
		"ChargeOrder": {false, func(ctx context.Context) error {
			n++
			_, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: id, RequestId: fmt.Sprintf("auth-req-%d", n)})
			return err
		}},
		"CancelOrder": {false, func(ctx context.Context) error {
			_, err := s.orders.CancelOrder(ctx, &settlev1.CancelOrderRequest{OrderId: id})
			if status.Code(err) == codes.FailedPrecondition { // PAID by then: the call got through
				return nil
			}
			return err
		}},
		"WatchOrder": {false, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			stream, err := s.orders.WatchOrder(ctx, &settlev1.WatchOrderRequest{OrderId: id})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}},
		"ListOrders": {true, func(ctx context.Context) error {
			_, err := s.ops.ListOrders(ctx, &settlev1.ListOrdersRequest{})
			return err
		}},
		"GetOrderHistory": {true, func(ctx context.Context) error {
			_, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: id})
			return err
		}},
		"ReconcileOrder": {true, func(ctx context.Context) error {
			_, err := s.ops.ReconcileOrder(ctx, &settlev1.ReconcileOrderRequest{OrderId: id})
			return err
		}},
		"ResolveOrder": {true, func(ctx context.Context) error {
			_, err := s.ops.ResolveOrder(ctx, &settlev1.ResolveOrderRequest{OrderId: id, Resolution: settlev1.Resolution_RESOLUTION_PENDING, Reason: "test"})
			if status.Code(err) == codes.FailedPrecondition { // not in review: the call got through
				return nil
			}
			return err
		}},
		"Stats": {true, func(ctx context.Context) error {
			_, err := s.ops.Stats(ctx, &settlev1.StatsRequest{})
			return err
		}},
	}
	for name, c := range calls {
		right, wrongRole := keyA, keyAop
		if c.ops {
			right, wrongRole = keyAop, keyA
		}
		var noKey, badKey *status.Status
		for _, tt := range []struct {
			who  string
			key  string
			want codes.Code
		}{
			{"no key", "", codes.Unauthenticated},
			{"wrong key", "sk_test_not_a_key", codes.Unauthenticated},
			{"wrong role", wrongRole, codes.PermissionDenied},
			{"right key", right, codes.OK},
		} {
			err := c.call(with(tt.key))
			if status.Code(err) != tt.want {
				t.Errorf("%s with %s: %v, want %s", name, tt.who, err, tt.want)
			}
			switch tt.who {
			case "no key":
				noKey = status.Convert(err)
			case "wrong key":
				badKey = status.Convert(err)
			}
		}
		if !proto.Equal(noKey.Proto(), badKey.Proto()) {
			t.Errorf("%s: no key (%v) and a wrong key (%v) answer differently", name, noKey, badKey)
		}
		// Another merchant's key: its own orders only.
		err := c.call(with(keyB))
		switch {
		case c.ops:
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s with another merchant's checkout key: %v, want PermissionDenied", name, err)
			}
		case name == "CreateOrder":
			if err != nil {
				t.Errorf("CreateOrder with merchant B's key: %v", err)
			}
		default:
			if status.Code(err) != codes.NotFound {
				t.Errorf("%s on another merchant's order: %v, want NotFound", name, err)
			}
		}
	}
}

// TestNoExistenceOracle: another merchant's order, by id or by reference,
// answers byte for byte what a nonexistent order answers.
func TestNoExistenceOracle(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	created, err := s.orders.CreateOrder(with(keyA), &settlev1.CreateOrderRequest{MerchantReference: "secret-ref",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(key string, req *settlev1.GetOrderRequest) []byte {
		_, err := s.orders.GetOrder(with(key), req)
		b, _ := proto.Marshal(status.Convert(err).Proto())
		return b
	}
	byID := func(id string) *settlev1.GetOrderRequest {
		return &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: id}}
	}
	byRef := func(ref string) *settlev1.GetOrderRequest {
		return &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: ref}}
	}
	if a, b := answer(keyB, byID(created.GetOrder().GetId())), answer(keyB, byID(order.NewID())); string(a) != string(b) {
		t.Fatalf("by id: %q vs %q", a, b)
	}
	if a, b := answer(keyB, byRef("secret-ref")), answer(keyB, byRef("no-such-ref")); string(a) != string(b) {
		t.Fatalf("by reference: %q vs %q", a, b)
	}
	// WatchOrder answers the same, and registers no watcher for either, not
	// even for the length of the call: a trigger counts the rows inserted.
	if _, err := s.pool.Exec(context.Background(), `
CREATE TABLE watchers_inserted (order_id uuid);
CREATE FUNCTION count_watcher() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO watchers_inserted VALUES (NEW.order_id); RETURN NULL; END $$;
CREATE TRIGGER count_watcher AFTER INSERT ON order_watchers FOR EACH ROW EXECUTE FUNCTION count_watcher();`); err != nil {
		t.Fatal(err)
	}
	watch := func(key, id string) []byte {
		stream, err := s.orders.WatchOrder(with(key), &settlev1.WatchOrderRequest{OrderId: id})
		if err == nil {
			_, err = stream.Recv()
		}
		b, _ := proto.Marshal(status.Convert(err).Proto())
		return b
	}
	if a, b := watch(keyB, created.GetOrder().GetId()), watch(keyB, order.NewID()); string(a) != string(b) {
		t.Fatalf("watch: %q vs %q", a, b)
	}
	if n := s.count(t, `SELECT count(*) FROM watchers_inserted`); n != 0 {
		t.Fatalf("%d watcher rows inserted for orders the caller may not see, want 0", n)
	}
	// And merchant B can use the same reference for its own order.
	if _, err := s.orders.CreateOrder(with(keyB), &settlev1.CreateOrderRequest{MerchantReference: "secret-ref",
		Amount: &settlev1.Money{Currency: "EUR", AmountMinor: 5}, PaymentMethod: "tok_ok"}); err != nil {
		t.Fatalf("merchant B's own order with the same reference: %v", err)
	}
}

func TestRateAndConcurrencyLimits(t *testing.T) {
	t.Parallel()
	// Next to no refill: the burst decides, however slow the calls are.
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Limits: grpcapi.Limits{RatePerSecond: 0.01, Burst: 5}}, insecure.NewCredentials())
	var limited int
	for range 10 {
		_, err := s.orders.GetOrder(with(keyA), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "x"}})
		if status.Code(err) == codes.ResourceExhausted {
			limited++
		} else if status.Code(err) != codes.NotFound {
			t.Fatal(err)
		}
	}
	if limited != 5 {
		t.Fatalf("%d of 10 calls limited with a burst of 5 at 0.01/s, want 5", limited)
	}
	// Another key has its own bucket.
	if _, err := s.orders.GetOrder(with(keyB), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "x"}}); status.Code(err) != codes.NotFound {
		t.Fatalf("merchant B limited by A's calls: %v", err)
	}

	// The slow charge holds the key's one slot for its 1.5 s at the
	// gateway, within a deadline far past it.
	c := newStackTimeout(t, 15*time.Second, grpcapi.Options{Keys: testKeys(t), Limits: grpcapi.Limits{InFlight: 1}}, insecure.NewCredentials())
	o := c.createWith(t, keyA, "slow-1", "tok_slow_1500")
	done := make(chan error, 1)
	go func() {
		_, err := c.orders.ChargeOrder(with(keyA), &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "slow-req-1"})
		done <- err
	}()
	// The charge holds the key's one slot from when the gateway has it
	// until the gateway answers: wait for the first, not for a guess.
	for deadline := time.Now().Add(30 * time.Second); len(c.sim.Ledger()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow charge never reached the gateway")
		}
	}
	_, err := c.orders.GetOrder(with(keyA), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second call while one is in flight: %v, want ResourceExhausted", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func (s *stack) createWith(t *testing.T, key, ref, token string) *settlev1.Order {
	t.Helper()
	resp, err := s.orders.CreateOrder(with(key), &settlev1.CreateOrderRequest{
		MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token,
	})
	if err != nil {
		t.Fatalf("CreateOrder(%s): %v", ref, err)
	}
	return resp.GetOrder()
}

// pki is a throwaway CA with a server and a client certificate.
type pki struct {
	ca                 *x509.CertPool
	server, client     tls.Certificate
	untrustedClientCrt tls.Certificate
}

func newPKI(t *testing.T) pki {
	t.Helper()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
			BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		return cert, key
	}
	leaf := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	ca, caKey := newCA("settle test CA")
	other, otherKey := newCA("someone else's CA")
	p := pki{ca: x509.NewCertPool()}
	p.ca.AddCert(ca)
	p.server = leaf(ca, caKey, "settle", x509.ExtKeyUsageServerAuth)
	p.client = leaf(ca, caKey, "checkout", x509.ExtKeyUsageClientAuth)
	p.untrustedClientCrt = leaf(other, otherKey, "intruder", x509.ExtKeyUsageClientAuth)
	return p
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	serverTLS := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.ca,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	clientTLS := func(certs ...tls.Certificate) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{RootCAs: p.ca, Certificates: certs, ServerName: "localhost"})
	}
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Creds: serverTLS}, clientTLS(p.client))
	if _, err := s.orders.CreateOrder(with(keyA), &settlev1.CreateOrderRequest{MerchantReference: "tls-1",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}); err != nil {
		t.Fatalf("good client certificate: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"no client certificate":        clientTLS(),
		"untrusted client certificate": clientTLS(p.untrustedClientCrt),
		"plaintext":                    insecure.NewCredentials(),
	} {
		conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(with(keyA), 5*time.Second)
		_, err = settlev1.NewOrderServiceClient(conn).GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "tls-1"}})
		cancel()
		conn.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the connection refused (Unavailable)", name, err)
		}
	}
}
