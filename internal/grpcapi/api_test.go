package grpcapi_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/logtest"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
	"github.com/settlepay/settle/internal/reconcile"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

// stack is Settle as a client sees it: a real gRPC server on a loopback
// socket, on a fresh database, charging through the simulator over HTTP.
type stack struct {
	orders settlev1.OrderServiceClient
	ops    settlev1.OpsServiceClient
	conn   *grpc.ClientConn
	pool   *pgxpool.Pool
	url    string
	addr   string
	sim    *sim.Sim
	srv    *grpcapi.Server
	rec    *reconcile.Reconciler
	log    *slog.Logger
	logs   logtest.Buffer // everything the server logged
}

const gatewayTimeout = 500 * time.Millisecond

// auditMargin is the stacks' audit margin: a window closes that long
// after it ends (with no no-show horizon).
const auditMargin = 20 * time.Millisecond

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, grpcapi.Options{}, insecure.NewCredentials())
}

// newStackWith is newStack with security options, and the client's
// transport credentials.
func newStackWith(t *testing.T, opts grpcapi.Options, creds credentials.TransportCredentials, extraGateways ...map[string]order.Gateway) *stack {
	t.Helper()
	return newStackTimeout(t, gatewayTimeout, opts, creds, extraGateways...)
}

// newStackTimeout is newStackWith with a gateway timeout of its own, for
// a test that holds a call in flight and waits for no timeout.
func newStackTimeout(t *testing.T, gatewayTimeout time.Duration, opts grpcapi.Options, creds credentials.TransportCredentials,
	extraGateways ...map[string]order.Gateway) *stack {
	t.Helper()
	url := postgrestest.URL(t)
	pool, err := postgres.Open(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := &stack{pool: pool, url: url, sim: sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout})}
	hs := httptest.NewServer(s.sim)
	t.Cleanup(hs.Close)
	gw, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	gateways := map[string]order.Gateway{"sim": gw}
	for _, extra := range extraGateways {
		for name, g := range extra {
			gateways[name] = g
		}
	}
	// Debug, so that the lines of successful calls are checked too.
	s.log = s.logs.Logger()
	log := s.log
	store := postgres.NewStore(pool)
	svc, err := order.NewService(store, gateways, order.Config{
		DefaultGateway: "sim", GatewayTimeout: gatewayTimeout, Grace: time.Second, FirstRecheck: time.Minute,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	s.rec, err = reconcile.New(store, gateways, reconcile.Config{
		Schedule: []time.Duration{time.Minute, time.Minute}, BatchSize: 10, Concurrency: 2,
		PollInterval: time.Second, LookupTimeout: gatewayTimeout, NoShowHorizon: time.Hour,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Auditor == nil {
		if opts.Auditor, err = audit.New(store, gateways, audit.Config{Margin: auditMargin}, log); err != nil {
			t.Fatal(err)
		}
	}
	s.srv = grpcapi.NewServer(svc, store, s.rec, s.log, opts)
	lctx, stopListening := context.WithCancel(context.Background())
	listening := make(chan struct{})
	go func() {
		store.ListenOrders(lctx, log, s.srv.OrderChanged, func() { s.srv.OrderChanged("") })
		close(listening)
	}()
	t.Cleanup(func() { stopListening(); <-listening })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.srv.Serve(lis) }()
	t.Cleanup(s.srv.Stop)
	s.addr = lis.Addr().String()
	s.conn, err = grpc.NewClient(s.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.conn.Close() })
	s.orders = settlev1.NewOrderServiceClient(s.conn)
	s.ops = settlev1.NewOpsServiceClient(s.conn)
	return s
}

func (s *stack) create(t *testing.T, ref, token string) *settlev1.Order {
	t.Helper()
	resp, err := s.orders.CreateOrder(context.Background(), &settlev1.CreateOrderRequest{
		MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token,
	})
	if err != nil {
		t.Fatalf("CreateOrder(%s): %v", ref, err)
	}
	return resp.GetOrder()
}

func (s *stack) charge(t *testing.T, orderID, requestID string) *settlev1.ChargeOrderResponse {
	t.Helper()
	resp, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: orderID, RequestId: requestID})
	if err != nil {
		t.Fatalf("ChargeOrder(%s, %s): %v", orderID, requestID, err)
	}
	return resp
}

// charges counts the simulator's successful charges for an order's attempts.
func (s *stack) charges(t *testing.T, orderID string) int {
	t.Helper()
	store := postgres.NewStore(s.pool)
	o, err := store.Order(context.Background(), order.AnyMerchant, orderID)
	if err != nil {
		t.Fatal(err)
	}
	_, attempts, err := store.History(context.Background(), o.MerchantID, orderID)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, a := range attempts {
		refs = append(refs, a.ID)
	}
	return s.sim.Succeeded(refs...)
}

func (s *stack) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
}

func TestCreateThenGet(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	created := s.create(t, "order-1", "tok_ok")
	if created.GetState() != settlev1.OrderState_ORDER_STATE_PENDING || created.GetId() == "" {
		t.Fatalf("created %v", created)
	}
	ctx := context.Background()
	byID, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: created.GetId()}})
	if err != nil {
		t.Fatal(err)
	}
	byRef, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "order-1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*settlev1.Order{byID.GetOrder(), byRef.GetOrder()} {
		if got.GetId() != created.GetId() || got.GetAmount().GetAmountMinor() != 1250 || got.GetAmount().GetCurrency() != "GBP" ||
			got.GetPaymentMethod() != "tok_ok" || got.GetGateway() != "sim" || got.GetCreateTime() == nil {
			t.Fatalf("GetOrder = %v, want %v", got, created)
		}
	}
}

// TestCreateConflictIsAlreadyExists: a merchant reference reused with other
// parameters (order.ConflictError) is AlreadyExists, and its message names
// the field without echoing the client's reference.
func TestCreateConflictIsAlreadyExists(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.create(t, "order-idem", "tok_ok")
	_, err := s.orders.CreateOrder(context.Background(), &settlev1.CreateOrderRequest{MerchantReference: "order-idem",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1}, PaymentMethod: "tok_ok"})
	wantCode(t, err, codes.AlreadyExists)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "merchant_reference") || strings.Contains(msg, "order-idem") {
		t.Errorf("message %q does not name the field, or echoes the reference", msg)
	}
}

// TestCreateBadInputIsInvalidArgument: bad input, whether the conversion or
// the domain finds it, is InvalidArgument with a message that starts with
// the request field's name and never echoes a card number. The domain's
// own cases are in package order.
func TestCreateBadInputIsInvalidArgument(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ok := func() *settlev1.CreateOrderRequest {
		return &settlev1.CreateOrderRequest{MerchantReference: "order-bad", Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 100}, PaymentMethod: "tok_ok"}
	}
	tests := []struct {
		name  string
		edit  func(r *settlev1.CreateOrderRequest)
		field string
	}{
		{"no amount", func(r *settlev1.CreateOrderRequest) { r.Amount = nil }, "amount"},
		{"zero amount", func(r *settlev1.CreateOrderRequest) { r.Amount.AmountMinor = 0 }, "amount.amount_minor"},
		{"currency unknown", func(r *settlev1.CreateOrderRequest) { r.Amount.Currency = "ABC" }, "amount.currency"},
		{"empty reference", func(r *settlev1.CreateOrderRequest) { r.MerchantReference = "" }, "merchant_reference"},
		{"card number as token", func(r *settlev1.CreateOrderRequest) { r.PaymentMethod = "4242424242424242" }, "payment_method"},
		{"spaced card number in reference", func(r *settlev1.CreateOrderRequest) { r.MerchantReference = "order 4111 1111 1111 1111" }, "merchant_reference"},
		{"unknown gateway", func(r *settlev1.CreateOrderRequest) { r.Gateway = "paypal" }, "gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ok()
			tt.edit(req)
			_, err := s.orders.CreateOrder(context.Background(), req)
			wantCode(t, err, codes.InvalidArgument)
			msg := status.Convert(err).Message()
			if !strings.HasPrefix(msg, tt.field+":") {
				t.Errorf("message %q does not name field %s", msg, tt.field)
			}
			if strings.Contains(msg, "4242424242424242") || strings.Contains(msg, "4111") {
				t.Errorf("message %q echoes the card number", msg)
			}
		})
	}
	if n := s.count(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("bad input left %d orders behind", n)
	}
}

func TestGetNotFound(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	_, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: order.NewID()}})
	wantCode(t, err, codes.NotFound)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_MerchantReference{MerchantReference: "nope"}})
	wantCode(t, err, codes.NotFound)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: "not-a-uuid"}})
	wantCode(t, err, codes.InvalidArgument)
	_, err = s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{})
	wantCode(t, err, codes.InvalidArgument)
}
