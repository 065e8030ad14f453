package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
)

// chargeOnly is a gateway that cannot capture (no order.Capturer), which
// the simulator cannot be: an order made with capture MANUAL on it is
// refused before any call.
type chargeOnly struct{ order.Gateway }

// TestCaptureAndVoidReplies checks what the API adds to captures and
// voids: the capture mode on create, the hold on the order, final's
// default, each reply's code and message, and the operator's actor,
// against the simulator, whose ledger must agree.
func TestCaptureAndVoidReplies(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"charge-only": chargeOnly{}})
	ctx := context.Background()
	create := func(ref string, mode settlev1.CaptureMode) *settlev1.Order {
		resp, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: ref,
			Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Capture: mode})
		if err != nil {
			t.Fatalf("CreateOrder(%s): %v", ref, err)
		}
		return resp.GetOrder()
	}
	o := create("api-capture", settlev1.CaptureMode_CAPTURE_MODE_MANUAL)
	if o.GetCapture() != settlev1.CaptureMode_CAPTURE_MODE_MANUAL {
		t.Fatalf("created order's capture %s", o.GetCapture())
	}
	charged := s.charge(t, o.GetId(), "api-capture-charge")
	got, auth := charged.GetOrder(), charged.GetAttempt().GetId()
	if got.GetState() != settlev1.OrderState_ORDER_STATE_AUTHORIZED || got.GetAuthorized().GetAmountMinor() != 1250 ||
		got.GetCaptured().GetAmountMinor() != 0 || got.GetCaptureBefore() == nil {
		t.Fatalf("authorized order %v", got)
	}

	capture := func(requestID string, amount int64, final *bool) (*settlev1.CaptureOrderResponse, error) {
		return s.orders.CaptureOrder(ctx, &settlev1.CaptureOrderRequest{OrderId: o.GetId(), RequestId: requestID,
			AmountMinor: amount, Final: final})
	}
	resp, err := capture("api-capture-1", 500, proto.Bool(false))
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetCapture()
	if c.GetState() != settlev1.CaptureState_CAPTURE_STATE_SUCCEEDED || c.GetAmount().GetAmountMinor() != 500 || c.GetFinal() ||
		c.GetActor() != "api" || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID ||
		resp.GetOrder().GetCaptured().GetAmountMinor() != 500 {
		t.Fatalf("capture %v, order %v", c, resp.GetOrder())
	}
	if again, err := capture("api-capture-1", 500, proto.Bool(false)); err != nil || again.GetCapture().GetId() != c.GetId() {
		t.Fatalf("replay: %v, %v", again, err)
	}
	// Unset final is true: the replay with final unset is another capture.
	if _, err := capture("api-capture-1", 500, nil); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("request_id with final unset (true): %v, want AlreadyExists", err)
	}
	_, err = capture("api-capture-2", 751, nil)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "7.50 GBP (750 minor units)") {
		t.Fatalf("over the hold: %v, want FailedPrecondition naming 7.50 GBP (750 minor units)", err)
	}
	if _, err := capture("api-capture-3", -1, nil); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), "amount_minor") {
		t.Fatalf("negative amount: %v, want InvalidArgument naming amount_minor", err)
	}
	_, err = s.orders.VoidOrder(ctx, &settlev1.VoidOrderRequest{OrderId: o.GetId(), RequestId: "api-void-1"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "refund") {
		t.Fatalf("void after a capture: %v, want FailedPrecondition saying to refund", err)
	}

	// The operator's capture: a reason is required, and the actor is theirs.
	final, err := s.ops.CaptureOrder(ctx, &settlev1.OpsServiceCaptureOrderRequest{OrderId: o.GetId(), RequestId: "ops-capture-1"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "reason") {
		t.Fatalf("operator's capture without a reason: %v, %v", final, err)
	}
	final, err = s.ops.CaptureOrder(ctx, &settlev1.OpsServiceCaptureOrderRequest{OrderId: o.GetId(), RequestId: "ops-capture-1",
		Reason: "rest shipped"})
	if err != nil || !strings.HasPrefix(final.GetCapture().GetActor(), "ops:") || !final.GetCapture().GetFinal() ||
		final.GetOrder().GetCaptured().GetAmountMinor() != 1250 {
		t.Fatalf("operator's capture of the rest: %v, %v", final, err)
	}
	if n := s.sim.Captured(auth); n != 1250 {
		t.Fatalf("the gateway captured %d of %s, want 1250", n, auth)
	}

	// A void of an authorized order; a capture of an automatic one.
	v := create("api-void", settlev1.CaptureMode_CAPTURE_MODE_MANUAL)
	vauth := s.charge(t, v.GetId(), "api-void-charge").GetAttempt().GetId()
	voided, err := s.orders.VoidOrder(ctx, &settlev1.VoidOrderRequest{OrderId: v.GetId(), RequestId: "api-void-2", Reason: "cancelled"})
	if err != nil || voided.GetVoid().GetState() != settlev1.VoidState_VOID_STATE_SUCCEEDED ||
		voided.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_VOIDED {
		t.Fatalf("void: %v, %v", voided, err)
	}
	for _, gv := range s.sim.Voids() {
		if gv.Status == refpsp.OpSucceeded && gv.ChargeReference != vauth {
			t.Fatalf("the gateway voided %s, which Settle captured or never voided", gv.ChargeReference)
		}
	}
	if n := len(s.sim.Voids()); n != 1 || s.sim.Captured(vauth) != 0 {
		t.Fatalf("the gateway has %d voids and captured %d of the voided %s; want 1 void and nothing captured",
			n, s.sim.Captured(vauth), vauth)
	}
	auto := create("api-automatic", settlev1.CaptureMode_CAPTURE_MODE_UNSPECIFIED)
	if auto.GetCapture() != settlev1.CaptureMode_CAPTURE_MODE_AUTOMATIC {
		t.Fatalf("unset capture is %s, want AUTOMATIC", auto.GetCapture())
	}
	_, err = s.orders.CaptureOrder(ctx, &settlev1.CaptureOrderRequest{OrderId: auto.GetId(), RequestId: "api-capture-4"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("capture of an automatic order: %v, want FailedPrecondition", err)
	}
	_, err = s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "api-charge-only-manual",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Gateway: "charge-only",
		Capture: settlev1.CaptureMode_CAPTURE_MODE_MANUAL})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "capture") {
		t.Fatalf("MANUAL on a gateway that cannot capture: %v, want InvalidArgument naming capture", err)
	}

	// ListOrders and Stats know the new states.
	list, err := s.ops.ListOrders(ctx, &settlev1.ListOrdersRequest{State: settlev1.OrderState_ORDER_STATE_VOIDED})
	if err != nil || len(list.GetOrders()) != 1 || list.GetOrders()[0].GetId() != v.GetId() {
		t.Fatalf("ListOrders VOIDED: %v, %v", list, err)
	}
	stats, err := s.ops.Stats(ctx, &settlev1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[settlev1.OrderState]int64{}
	for _, c := range stats.GetStates() {
		counts[c.GetState()] = c.GetCount()
	}
	if counts[settlev1.OrderState_ORDER_STATE_VOIDED] != 1 || counts[settlev1.OrderState_ORDER_STATE_PAID] != 1 {
		t.Fatalf("stats %v", counts)
	}
}

// TestOrderHistoryShowsCapturesAndVoids: GetOrderHistory shows an order's
// captures and voids with their states and transitions, as it shows
// refunds, and the order's events name the capture or void that moved it;
// the order shows what is being captured, and a void in flight.
func TestOrderHistoryShowsCapturesAndVoids(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	authorized := func(ref, token string) string {
		resp, err := s.orders.CreateAndChargeOrder(ctx, &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref,
			Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token, RequestId: "charge-" + ref,
			Capture: settlev1.CaptureMode_CAPTURE_MODE_MANUAL})
		if err != nil || resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_AUTHORIZED {
			t.Fatalf("authorize %s: %v, %v", ref, resp, err)
		}
		return resp.GetOrder().GetId()
	}
	history := func(id string) *settlev1.GetOrderHistoryResponse {
		h, err := s.ops.GetOrderHistory(ctx, &settlev1.GetOrderHistoryRequest{OrderId: id})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// Two captures; the first made the order PAID.
	id := authorized("history-captures", "tok_ok")
	var ids []string
	for i, final := range []bool{false, true} {
		resp, err := s.orders.CaptureOrder(ctx, &settlev1.CaptureOrderRequest{OrderId: id, RequestId: fmt.Sprintf("history-capture-%d", i),
			AmountMinor: 500, Final: proto.Bool(final)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetCapture().GetId())
	}
	h := history(id)
	if len(h.GetCaptures()) != 2 || h.GetCaptures()[0].GetId() != ids[0] || h.GetCaptures()[1].GetId() != ids[1] ||
		h.GetCaptures()[1].GetState() != settlev1.CaptureState_CAPTURE_STATE_SUCCEEDED || !h.GetCaptures()[1].GetFinal() {
		t.Fatalf("captures %v, want %v, oldest first, SUCCEEDED", h.GetCaptures(), ids)
	}
	var path []string
	for _, e := range h.GetCaptureEvents() {
		if e.GetCaptureId() == ids[0] {
			path = append(path, e.GetToState().String())
		}
	}
	want := "[CAPTURE_STATE_PENDING CAPTURE_STATE_CAPTURING CAPTURE_STATE_SUCCEEDED]"
	if fmt.Sprint(path) != want || len(h.GetCaptureEvents()) != 6 || len(h.GetVoids()) != 0 {
		t.Fatalf("first capture's transitions %v of %d, want %s of 6; voids %v", path, len(h.GetCaptureEvents()), want, h.GetVoids())
	}
	// The first capture moved the order to PAID; the second is in its
	// history too (capture.succeeded, PAID to PAID).
	var byCapture []string
	for _, e := range h.GetEvents() {
		if e.GetCaptureId() != "" {
			byCapture = append(byCapture, e.GetFromState().String()+">"+e.GetToState().String()+"/"+e.GetCaptureId())
		}
	}
	want = fmt.Sprint([]string{"ORDER_STATE_AUTHORIZED>ORDER_STATE_PAID/" + ids[0], "ORDER_STATE_PAID>ORDER_STATE_PAID/" + ids[1]})
	if fmt.Sprint(byCapture) != want {
		t.Fatalf("the order's events by captures %v, want %s", byCapture, want)
	}

	// A capture of unknown outcome is shown in flight, on the order too.
	id = authorized("history-capturing", "tok_capture_drop")
	if _, err := s.orders.CaptureOrder(ctx, &settlev1.CaptureOrderRequest{OrderId: id, RequestId: "history-capturing-1",
		AmountMinor: 600}); err != nil {
		t.Fatal(err)
	}
	h = history(id)
	if h.GetOrder().GetCapturing().GetAmountMinor() != 600 || len(h.GetCaptures()) != 1 ||
		h.GetCaptures()[0].GetState() != settlev1.CaptureState_CAPTURE_STATE_CAPTURING || h.GetCaptures()[0].GetNextCheckTime() == nil {
		t.Fatalf("capture in flight: order %v, captures %v", h.GetOrder(), h.GetCaptures())
	}

	// A void of unknown outcome, then settled by the reconciler.
	id = authorized("history-void", "tok_void_drop")
	resp, err := s.orders.VoidOrder(ctx, &settlev1.VoidOrderRequest{OrderId: id, RequestId: "history-void-1", Reason: "out of stock"})
	if err != nil || resp.GetVoid().GetState() != settlev1.VoidState_VOID_STATE_VOIDING || !resp.GetOrder().GetVoiding() {
		t.Fatalf("void with its answer lost: %v, %v", resp, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE voids SET reconcile_at = now() WHERE order_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rec.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	h = history(id)
	if len(h.GetVoids()) != 1 || h.GetVoids()[0].GetState() != settlev1.VoidState_VOID_STATE_SUCCEEDED ||
		h.GetVoids()[0].GetReason() != "out of stock" || h.GetOrder().GetVoiding() {
		t.Fatalf("voids %v, order %v; want one SUCCEEDED, nothing voiding", h.GetVoids(), h.GetOrder())
	}
	path = nil
	for _, e := range h.GetVoidEvents() {
		path = append(path, e.GetToState().String()+"/"+e.GetActor())
	}
	if want := "[VOID_STATE_PENDING/api VOID_STATE_VOIDING/api VOID_STATE_SUCCEEDED/reconciler]"; fmt.Sprint(path) != want {
		t.Fatalf("void's transitions %v, want %s", path, want)
	}
	last := h.GetEvents()[len(h.GetEvents())-1]
	if last.GetToState() != settlev1.OrderState_ORDER_STATE_VOIDED || last.GetVoidId() != h.GetVoids()[0].GetId() {
		t.Fatalf("the order's last event %v, want VOIDED by the void", last)
	}
}
