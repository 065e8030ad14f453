package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
)

// callTimeout bounds one call of the load client. Calls are expected to
// take milliseconds; a call that takes this long fails the run.
const callTimeout = 30 * time.Second

// loadResult is what a closed-loop load run did.
type loadResult struct {
	ops       int
	elapsed   time.Duration
	latencies []time.Duration
	// answered counts the operations answered in each second of the run
	// (the last may hold those answered after d), so that a slow start
	// shows.
	answered []int
	// refused counts the operations refused RESOURCE_EXHAUSTED by the
	// server's admission control: they are neither ops nor latencies.
	refused int
}

// defaultPushback is the wait after a refusal that suggests none.
const defaultPushback = 20 * time.Millisecond

// maxBackoff caps a worker's wait after refusals in a row.
const maxBackoff = 2 * time.Second

// backoff is the wait after a refusal that follows n refusals in a row.
// A refusal that says when to retry (hinted) is taken at its word, as
// gRPC's retry policy takes grpc-retry-pushback-ms: the server knows how
// fast its queue drains, and a client that waits longer leaves it idle.
// One without a hint waits defaultPushback, doubled for each refusal
// before it, up to maxBackoff.
func backoff(pushback time.Duration, hinted bool, n int) time.Duration {
	if hinted {
		return pushback
	}
	return max(pushback, min(maxBackoff, pushback<<min(n, 10)))
}

// refusal reports whether err is the server's refusal of an overload
// (RESOURCE_EXHAUSTED), the retry delay it suggests (defaultPushback when
// it suggests none), and whether it suggested one.
func refusal(err error) (pushback time.Duration, hinted, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted {
		return 0, false, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return ri.GetRetryDelay().AsDuration(), true, true
		}
	}
	return defaultPushback, false, true
}

// op is one operation of a worker: n counts the worker's operations.
type op func(ctx context.Context, n int) error

// runLoad runs c workers in a closed loop (each starts its next operation
// when the last has answered) for d, and times each operation. newOp makes
// each worker's operation, so that a worker can reuse its own buffers. The
// run ends when the last operation started before d has answered. An
// operation refused RESOURCE_EXHAUSTED (the server's admission control) is
// counted, and the worker waits as backoff says, ±50%, and then runs the
// same operation again (the same n: the same references and request ids,
// and only the call refused), as a well-behaved client would; any other
// error ends the run at once and fails it.
func runLoad(ctx context.Context, c int, d time.Duration, newOp func(worker int) op) (loadResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg   sync.WaitGroup
		lats = make([][]time.Duration, c)
		secs = make([][]int, c)
		refs = make([]int, c)
		ops  = make([]op, c)
	)
	for w := range c {
		ops[w] = newOp(w)
	}
	start := time.Now()
	stop := start.Add(d)
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			answered := make([]int, int(d/time.Second)+1)
			refusedInARow := 0
			for n := 0; ctx.Err() == nil; n++ {
				t0 := time.Now()
				if !t0.Before(stop) {
					break
				}
				cctx, ccancel := context.WithTimeout(ctx, callTimeout)
				err := ops[w](cctx, n)
				ccancel()
				if d, hinted, ok := refusal(err); ok {
					refs[w]++
					d = backoff(d, hinted, refusedInARow)
					refusedInARow++
					select {
					case <-ctx.Done():
					case <-time.After(d/2 + rand.N(d)):
					}
					// The same operation again, as a client retries: the
					// same references and request ids, so that a charge
					// refused after its order was created charges that
					// order rather than creating another.
					n--
					continue
				}
				refusedInARow = 0
				if err != nil {
					cancel(fmt.Errorf("worker %d: %w", w, err))
					break
				}
				t1 := time.Now()
				lat = append(lat, t1.Sub(t0))
				answered[min(int(t1.Sub(start)/time.Second), len(answered)-1)]++
			}
			lats[w], secs[w] = lat, answered
		}()
	}
	wg.Wait()
	res := loadResult{elapsed: time.Since(start)}
	if err := context.Cause(ctx); err != nil {
		return res, err
	}
	res.answered = make([]int, int(d/time.Second)+1)
	for w, l := range lats {
		res.ops += len(l)
		res.refused += refs[w]
		res.latencies = append(res.latencies, l...)
		for i, n := range secs[w] {
			res.answered[i] += n
		}
	}
	return res, nil
}

// orderOp returns worker w's order: CreateOrder then ChargeOrder with a
// unique merchant reference and request id, checking that the order ends
// PAID. prefix makes the references unique across runs.
func orderOp(conn *grpc.ClientConn, prefix string) func(w int) op {
	client := settlev1.NewOrderServiceClient(conn)
	return func(w int) op {
		// One request of each kind per worker, refilled per order: the
		// client's own allocations stay out of the measurement.
		create := &settlev1.CreateOrderRequest{
			Amount:        &settlev1.Money{Currency: "GBP", AmountMinor: 1250},
			PaymentMethod: "tok_ok",
		}
		charge := &settlev1.ChargeOrderRequest{}
		base := []byte(prefix + "-" + strconv.Itoa(w) + "-")
		buf := make([]byte, 0, len(base)+24)
		createdN := -1 // the order whose charge a refusal left to retry
		return func(ctx context.Context, n int) error {
			if n != createdN {
				buf = strconv.AppendInt(append(buf[:0], base...), int64(n), 10)
				create.MerchantReference = string(buf)
				created, err := client.CreateOrder(ctx, create)
				if err != nil {
					return fmt.Errorf("CreateOrder: %w", err)
				}
				createdN = n
				charge.OrderId = created.GetOrder().GetId()
				charge.RequestId = "req-" + create.MerchantReference
			}
			charged, err := client.ChargeOrder(ctx, charge)
			if err != nil {
				return fmt.Errorf("ChargeOrder: %w", err)
			}
			if st := charged.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PAID {
				return fmt.Errorf("ChargeOrder: order %s is %s, want PAID", charge.OrderId, st)
			}
			return nil
		}
	}
}

// healthOp returns the transport floor's operation: one standard gRPC
// health check, which touches neither the domain nor the database.
func healthOp(conn *grpc.ClientConn) func(w int) op {
	client := healthpb.NewHealthClient(conn)
	return func(int) op {
		req := &healthpb.HealthCheckRequest{}
		return func(ctx context.Context, _ int) error {
			resp, err := client.Check(ctx, req)
			if err != nil {
				return fmt.Errorf("Health/Check: %w", err)
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("Health/Check: %s", resp.GetStatus())
			}
			return nil
		}
	}
}

// oneCallOp returns worker w's order on the one-call path: one
// CreateAndChargeOrder with a unique merchant reference and request id,
// checking that the order ends PAID.
func oneCallOp(conn *grpc.ClientConn, prefix string) func(w int) op {
	client := settlev1.NewOrderServiceClient(conn)
	return func(w int) op {
		req := &settlev1.CreateAndChargeOrderRequest{
			Amount:        &settlev1.Money{Currency: "GBP", AmountMinor: 1250},
			PaymentMethod: "tok_ok",
		}
		base := []byte(prefix + "-" + strconv.Itoa(w) + "-")
		buf := make([]byte, 0, len(base)+24)
		return func(ctx context.Context, n int) error {
			buf = strconv.AppendInt(append(buf[:0], base...), int64(n), 10)
			req.MerchantReference = string(buf)
			req.RequestId = "req-" + req.MerchantReference
			resp, err := client.CreateAndChargeOrder(ctx, req)
			if err != nil {
				return fmt.Errorf("CreateAndChargeOrder: %w", err)
			}
			if st := resp.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PAID {
				return fmt.Errorf("CreateAndChargeOrder: order %s is %s, want PAID", resp.GetOrder().GetId(), st)
			}
			return nil
		}
	}
}

// refundableOrders makes one PAID order per worker for the refund series,
// with an amount that its refunds of 1 never use up, and returns their ids.
func refundableOrders(ctx context.Context, conn *grpc.ClientConn, prefix string, c int) ([]string, error) {
	client := settlev1.NewOrderServiceClient(conn)
	ids := make([]string, c)
	for w := range c {
		ref := prefix + "-refundable-" + strconv.Itoa(w)
		resp, err := client.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{
			MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1_000_000_000_000},
			PaymentMethod: "tok_ok", RequestId: "req-" + ref,
		})
		if err != nil {
			return nil, fmt.Errorf("CreateAndChargeOrder: %w", err)
		}
		if st := resp.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_PAID {
			return nil, fmt.Errorf("CreateAndChargeOrder: order %s is %s, want PAID", resp.GetOrder().GetId(), st)
		}
		ids[w] = resp.GetOrder().GetId()
	}
	return ids, nil
}

// refundOp returns worker w's refund: one RefundOrder of 1 minor unit of
// the worker's own PAID order with a unique request id, checking that the
// refund SUCCEEDED.
func refundOp(conn *grpc.ClientConn, prefix string, orders []string) func(w int) op {
	client := settlev1.NewOrderServiceClient(conn)
	return func(w int) op {
		req := &settlev1.RefundOrderRequest{OrderId: orders[w], AmountMinor: 1}
		base := []byte(prefix + "-refund-" + strconv.Itoa(w) + "-")
		buf := make([]byte, 0, len(base)+24)
		return func(ctx context.Context, n int) error {
			buf = strconv.AppendInt(append(buf[:0], base...), int64(n), 10)
			req.RequestId = string(buf)
			resp, err := client.RefundOrder(ctx, req)
			if err != nil {
				return fmt.Errorf("RefundOrder: %w", err)
			}
			if st := resp.GetRefund().GetState(); st != settlev1.RefundState_REFUND_STATE_SUCCEEDED {
				return fmt.Errorf("RefundOrder: refund %s is %s, want SUCCEEDED", resp.GetRefund().GetId(), st)
			}
			return nil
		}
	}
}

// authorizedOrders makes one AUTHORIZED order (capture manual) per worker
// for the capture series, holding an amount that its captures of 1 never
// use up, and returns their ids.
func authorizedOrders(ctx context.Context, conn *grpc.ClientConn, prefix string, c int) ([]string, error) {
	client := settlev1.NewOrderServiceClient(conn)
	ids := make([]string, c)
	for w := range c {
		ref := prefix + "-authorized-" + strconv.Itoa(w)
		resp, err := client.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{
			MerchantReference: ref, Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1_000_000_000_000},
			PaymentMethod: "tok_ok", RequestId: "req-" + ref, Capture: settlev1.CaptureMode_CAPTURE_MODE_MANUAL,
		})
		if err != nil {
			return nil, fmt.Errorf("CreateAndChargeOrder: %w", err)
		}
		if st := resp.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_AUTHORIZED {
			return nil, fmt.Errorf("CreateAndChargeOrder: order %s is %s, want AUTHORIZED", resp.GetOrder().GetId(), st)
		}
		ids[w] = resp.GetOrder().GetId()
	}
	return ids, nil
}

// captureOp returns worker w's capture: one CaptureOrder of 1 minor unit
// of the worker's own authorization, not final (so that the next may
// follow), with a unique request id, checking that the capture SUCCEEDED.
func captureOp(conn *grpc.ClientConn, prefix string, orders []string) func(w int) op {
	client := settlev1.NewOrderServiceClient(conn)
	return func(w int) op {
		final := false
		req := &settlev1.CaptureOrderRequest{OrderId: orders[w], AmountMinor: 1, Final: &final}
		base := []byte(prefix + "-capture-" + strconv.Itoa(w) + "-")
		buf := make([]byte, 0, len(base)+24)
		return func(ctx context.Context, n int) error {
			buf = strconv.AppendInt(append(buf[:0], base...), int64(n), 10)
			req.RequestId = string(buf)
			resp, err := client.CaptureOrder(ctx, req)
			if err != nil {
				return fmt.Errorf("CaptureOrder: %w", err)
			}
			if st := resp.GetCapture().GetState(); st != settlev1.CaptureState_CAPTURE_STATE_SUCCEEDED {
				return fmt.Errorf("CaptureOrder: capture %s is %s, want SUCCEEDED", resp.GetCapture().GetId(), st)
			}
			return nil
		}
	}
}

// voidOp returns worker w's hold placed and released: one
// CreateAndChargeOrder with capture manual and a unique merchant reference
// and request id, then one VoidOrder of it, checking that the order ends
// AUTHORIZED and then VOIDED. A void refused by admission control is
// retried alone.
func voidOp(conn *grpc.ClientConn, prefix string) func(w int) op {
	client := settlev1.NewOrderServiceClient(conn)
	return func(w int) op {
		authorize := &settlev1.CreateAndChargeOrderRequest{
			Amount:        &settlev1.Money{Currency: "GBP", AmountMinor: 1250},
			PaymentMethod: "tok_ok", Capture: settlev1.CaptureMode_CAPTURE_MODE_MANUAL,
		}
		void := &settlev1.VoidOrderRequest{}
		base := []byte(prefix + "-void-" + strconv.Itoa(w) + "-")
		buf := make([]byte, 0, len(base)+24)
		heldN := -1 // the order whose void a refusal left to retry
		return func(ctx context.Context, n int) error {
			if n != heldN {
				buf = strconv.AppendInt(append(buf[:0], base...), int64(n), 10)
				authorize.MerchantReference = string(buf)
				authorize.RequestId = "req-" + authorize.MerchantReference
				resp, err := client.CreateAndChargeOrder(ctx, authorize)
				if err != nil {
					return fmt.Errorf("CreateAndChargeOrder: %w", err)
				}
				if st := resp.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_AUTHORIZED {
					return fmt.Errorf("CreateAndChargeOrder: order %s is %s, want AUTHORIZED", resp.GetOrder().GetId(), st)
				}
				heldN = n
				void.OrderId, void.RequestId = resp.GetOrder().GetId(), "void-"+authorize.MerchantReference
			}
			resp, err := client.VoidOrder(ctx, void)
			if err != nil {
				return fmt.Errorf("VoidOrder: %w", err)
			}
			if st := resp.GetOrder().GetState(); st != settlev1.OrderState_ORDER_STATE_VOIDED {
				return fmt.Errorf("VoidOrder: order %s is %s, want VOIDED", void.OrderId, st)
			}
			return nil
		}
	}
}
