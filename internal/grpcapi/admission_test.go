package grpcapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/telemetry"
)

// TestOverloadRefusesEarly runs the race that admission control is for:
// far more concurrent charges than places, against a slow gateway. Some
// are refused RESOURCE_EXHAUSTED, long before their deadline; a refused
// charge did nothing (its order is PENDING with no attempt, and the
// gateway never saw it); every admitted charge is PAID within its
// deadline; no call ends DEADLINE_EXCEEDED; the metrics count each
// refusal.
func TestOverloadRefusesEarly(t *testing.T) {
	t.Parallel()
	const (
		places, queue = 4, 4
		callers       = 48
		gatewayDelay  = 150 * time.Millisecond
		deadline      = 5 * time.Second
	)
	metrics := telemetry.NewMetrics()
	s := newStackTimeout(t, 3*time.Second, grpcapi.Options{Metrics: metrics,
		Admission: grpcapi.AdmissionLimits{MaxInFlight: places, MaxQueue: queue}}, insecure.NewCredentials())
	ids := make([]string, callers)
	for i := range ids {
		ids[i] = s.create(t, fmt.Sprintf("overload-%d", i), fmt.Sprintf("tok_slow_%d", gatewayDelay.Milliseconds())).GetId()
	}

	type result struct {
		code  codes.Code
		took  time.Duration
		state settlev1.OrderState
		hint  string
	}
	results := make([]result, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			var trailer metadata.MD
			t0 := time.Now()
			resp, err := s.orders.ChargeOrder(ctx, &settlev1.ChargeOrderRequest{OrderId: ids[i], RequestId: fmt.Sprintf("overload-req-%d", i)},
				grpc.Trailer(&trailer))
			results[i] = result{code: status.Code(err), took: time.Since(t0), state: resp.GetOrder().GetState()}
			if v := trailer.Get("grpc-retry-pushback-ms"); len(v) == 1 {
				results[i].hint = v[0]
			}
		})
	}
	close(start)
	wg.Wait()

	var paid, refused int
	for i, r := range results {
		switch r.code {
		case codes.OK:
			paid++
			if r.state != settlev1.OrderState_ORDER_STATE_PAID {
				t.Errorf("charge %d admitted: order %s, want PAID", i, r.state)
			}
			if r.took >= deadline {
				t.Errorf("charge %d admitted: took %s, past its deadline", i, r.took)
			}
		case codes.ResourceExhausted:
			refused++
			// Refused at once, or after a wait in the queue that left
			// time for the work: far from the deadline either way.
			if r.took > deadline/2 {
				t.Errorf("charge %d refused after %s: want refused early, well before its %s deadline", i, r.took, deadline)
			}
			if r.hint == "" {
				t.Errorf("charge %d refused without a grpc-retry-pushback-ms trailer", i)
			}
			h, err := s.ops.GetOrderHistory(context.Background(), &settlev1.GetOrderHistoryRequest{OrderId: ids[i]})
			if err != nil {
				t.Fatal(err)
			}
			if st := h.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PENDING || len(h.GetAttempts()) != 0 {
				t.Errorf("charge %d refused: order %s with %d attempts, want PENDING with none", i, st, len(h.GetAttempts()))
			}
		default:
			t.Errorf("charge %d: %s after %s, want OK or RESOURCE_EXHAUSTED", i, r.code, r.took)
		}
	}
	if refused == 0 || paid < places {
		t.Fatalf("%d paid, %d refused of %d concurrent charges for %d places and %d queued: want some refused, and at least %d paid",
			paid, refused, callers, places, queue, places)
	}
	// The gateway saw the admitted charges alone.
	if n := len(s.sim.Ledger()); n != paid {
		t.Errorf("the gateway holds %d charges, want %d (the admitted ones)", n, paid)
	}
	var counted float64
	for _, n := range sums(t, metrics, "settle_admission_refused_total", "reason") {
		counted += n
	}
	if int(counted) != refused {
		t.Errorf("settle_admission_refused_total counts %v, want %d", counted, refused)
	}
	t.Logf("%d paid, %d refused", paid, refused)

	// Reads and operators are not admitted: they answer while every
	// place is taken.
	hold := make(chan error, places)
	var slow string
	for i := range places {
		id := s.create(t, fmt.Sprintf("overload-hold-%d", i), "tok_slow_1000").GetId()
		slow = id
		go func() {
			_, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: id, RequestId: fmt.Sprintf("hold-charge-%d", i)})
			hold <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := s.orders.GetOrder(context.Background(), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: slow}}); err != nil {
		t.Errorf("GetOrder while the places are taken: %v", err)
	}
	if _, err := s.ops.Stats(context.Background(), &settlev1.StatsRequest{}); err != nil {
		t.Errorf("OpsService.Stats while the places are taken: %v", err)
	}
	for range places {
		if err := <-hold; err != nil {
			t.Errorf("charge holding a place: %v", err)
		}
	}
}

// TestOverloadOverJSON: the JSON listener goes through the same admission
// control, and a refusal is HTTP 429 with the google.rpc.Status of
// RESOURCE_EXHAUSTED; the refused charge did nothing.
func TestOverloadOverJSON(t *testing.T) {
	t.Parallel()
	s := newStackTimeout(t, 3*time.Second, grpcapi.Options{JSON: &grpcapi.JSONOptions{},
		Admission: grpcapi.AdmissionLimits{MaxInFlight: 1}}, insecure.NewCredentials())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.srv.ServeJSON(lis) }()
	js := &jsonStack{stack: s, base: "http://" + lis.Addr().String()}
	held := s.create(t, "overload-json-held", "tok_slow_1500").GetId()
	refused := s.create(t, "overload-json-refused", "tok_ok").GetId()
	done := make(chan error, 1)
	go func() {
		_, err := s.orders.ChargeOrder(context.Background(), &settlev1.ChargeOrderRequest{OrderId: held, RequestId: "held-charge"})
		done <- err
	}()
	// The held charge has its place once its order is CHARGING.
	for {
		o, err := s.orders.GetOrder(context.Background(), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: held}})
		if err != nil {
			t.Fatal(err)
		}
		if st := o.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PENDING {
			if st != settlev1.OrderState_ORDER_STATE_CHARGING {
				t.Fatalf("held charge: order %s, want CHARGING", st)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("held charge ended before it was seen CHARGING: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	r := js.post(t, "/v1/orders/"+refused+":charge", "", `{"request_id":"json-refused"}`)
	r.wantStatus(t, http.StatusTooManyRequests, int(codes.ResourceExhausted))
	if !strings.Contains(r.raw, "google.rpc.RetryInfo") || !strings.Contains(r.raw, "retryDelay") {
		t.Errorf("429 without a google.rpc.RetryInfo retry delay: %s", r.raw)
	}
	h, err := s.ops.GetOrderHistory(context.Background(), &settlev1.GetOrderHistoryRequest{OrderId: refused})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PENDING || len(h.GetAttempts()) != 0 {
		t.Errorf("refused over JSON: order %s with %d attempts, want PENDING with none", st, len(h.GetAttempts()))
	}
	if err := <-done; err != nil {
		t.Fatalf("held charge: %v", err)
	}
	// With the place free again, the same request goes through.
	r = js.post(t, "/v1/orders/"+refused+":charge", "", `{"request_id":"json-refused"}`)
	if r.code != http.StatusOK || r.get("order.state") != "ORDER_STATE_PAID" {
		t.Fatalf("retry after the overload: %d %s", r.code, r.raw)
	}
}
