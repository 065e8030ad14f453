package grpcapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
)

// TestEveryStringFieldRefusesCardNumbers finds every string field of every
// request of OrderService and OpsService (nested messages included) from
// the proto descriptors, puts a card number in it, leaving the rest of a
// valid request, and wants INVALID_ARGUMENT. A field added later without
// validation fails here, and so does a text field that refuses it for
// another reason than the card rule; a method added later needs its valid
// request below.
func TestEveryStringFieldRefusesCardNumbers(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t)}, insecure.NewCredentials())
	o := s.createWith(t, keyA, "fields-1", "tok_ok")
	money := &settlev1.Money{Currency: "GBP", AmountMinor: 100}
	valid := map[string]proto.Message{
		"CreateOrder":          &settlev1.CreateOrderRequest{MerchantReference: "fields-2", Amount: money, PaymentMethod: "tok_ok", Gateway: "sim"},
		"GetOrder":             &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}},
		"ChargeOrder":          &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "fields-req-1", PaymentMethod: "tok_ok"},
		"CreateAndChargeOrder": &settlev1.CreateAndChargeOrderRequest{MerchantReference: "fields-3", Amount: money, PaymentMethod: "tok_ok", Gateway: "sim", RequestId: "fields-req-2"},
		"CancelOrder":          &settlev1.CancelOrderRequest{OrderId: o.GetId(), Reason: "customer left"},
		"WatchOrder":           &settlev1.WatchOrderRequest{OrderId: o.GetId()},
		"ListOrders":           &settlev1.ListOrdersRequest{},
		"GetOrderHistory":      &settlev1.GetOrderHistoryRequest{OrderId: o.GetId()},
		"ReconcileOrder":       &settlev1.ReconcileOrderRequest{OrderId: o.GetId()},
		"ResolveOrder": &settlev1.ResolveOrderRequest{OrderId: o.GetId(), Resolution: settlev1.Resolution_RESOLUTION_PAID,
			GatewayChargeId: "ch_1", Reason: "found in the dashboard"},
		"Stats":       &settlev1.StatsRequest{},
		"ListEvents":  &settlev1.ListEventsRequest{},
		"ResendEvent": &settlev1.ResendEventRequest{MerchantId: "merchant-a", EventId: "evt_1"},
		"settle.v1.OrderService.RefundOrder": &settlev1.RefundOrderRequest{OrderId: o.GetId(), RequestId: "fields-req-3",
			AmountMinor: 100, Reason: "returned"},
		"settle.v1.OpsService.RefundOrder": &settlev1.OpsServiceRefundOrderRequest{OrderId: o.GetId(),
			RequestId: "fields-req-4", AmountMinor: 100, Reason: "goodwill"},
		"settle.v1.OrderService.CaptureOrder": &settlev1.CaptureOrderRequest{OrderId: o.GetId(), RequestId: "fields-req-5"},
		"settle.v1.OrderService.VoidOrder": &settlev1.VoidOrderRequest{OrderId: o.GetId(), RequestId: "fields-req-6",
			Reason: "cancelled"},
		"settle.v1.OpsService.CaptureOrder": &settlev1.OpsServiceCaptureOrderRequest{OrderId: o.GetId(),
			RequestId: "fields-req-7", Reason: "shipped"},
		"settle.v1.OpsService.VoidOrder": &settlev1.OpsServiceVoidOrderRequest{OrderId: o.GetId(),
			RequestId: "fields-req-8", Reason: "cancelled"},
		"ResolveRefund": &settlev1.ResolveRefundRequest{OrderId: o.GetId(), RefundId: o.GetId(),
			Resolution: settlev1.RefundResolution_REFUND_RESOLUTION_SUCCEEDED, GatewayRefundId: "re_1", Reason: "found"},
		"ListReviewItems": &settlev1.ListReviewItemsRequest{},
		"ResolveReviewItem": &settlev1.ResolveReviewItemRequest{OrderId: o.GetId(), ReviewItemId: o.GetId(),
			Decision: settlev1.ReviewDecision_REVIEW_DECISION_CHARGED, Note: "refunded at the gateway"},
		"ListDisputes": &settlev1.ListDisputesRequest{},
		"RunAudit": &settlev1.RunAuditRequest{MerchantId: "merchant-a", Gateway: "sim",
			StartTime: timestamppb.New(time.Now().Add(-2 * time.Hour)), EndTime: timestamppb.New(time.Now().Add(-time.Hour))},
		"ListAuditRuns":   &settlev1.ListAuditRunsRequest{MerchantId: "merchant-a"},
		"GetDispute":      &settlev1.GetDisputeRequest{DisputeId: o.GetId()},
		"AcceptDispute":   &settlev1.AcceptDisputeRequest{DisputeId: o.GetId()},
		"GetRoutes":       &settlev1.GetRoutesRequest{MerchantId: "merchant-a"},
		"ListOrderEvents": &settlev1.ListOrderEventsRequest{OrderId: o.GetId()},
		"FindOrders":      &settlev1.FindOrdersRequest{Query: "fields-1", MerchantId: "merchant-a"},
		"SetRoutes": &settlev1.SetRoutesRequest{MerchantId: "merchant-a", Note: "prefer sim", Rules: []*settlev1.RouteRule{
			{Name: "gbp", Currencies: []string{"GBP"}, Gateways: []string{"sim"}},
			{Name: "rest", Split: []*settlev1.WeightedGateway{{Gateway: "sim", Weight: 1}}}}},
	}
	// A card number bare, in a sentence beside its expiry date, and
	// behind a Stripe id's prefix (which a customer id must carry).
	pans := []string{"4242424242424242", "card: 4242 4242 4242 4242 exp 12/28", "cus_4242424242424242"}
	// Fields the server parses strictly (its ids, tokens and cursors, a
	// currency code) refuse a card number as malformed; every other string
	// field is a client's text, and must refuse it as a card number.
	parsed := map[string]bool{"id": true, "order_id": true, "refund_id": true, "currency": true, "after_cursor": true,
		"page_token": true, "event_id": true, "review_item_id": true, "dispute_id": true}
	fields := 0
	for _, file := range []protoreflect.FileDescriptor{settlev1.File_settle_v1_order_proto, settlev1.File_settle_v1_ops_proto} {
		services := file.Services()
		for i := range services.Len() {
			svc := services.Get(i)
			key := keyA
			if svc.Name() == "OpsService" {
				key = keyAop
			}
			methods := svc.Methods()
			for j := range methods.Len() {
				m := methods.Get(j)
				// A method whose name two services share is keyed by its full name.
				base, ok := valid[string(m.FullName())]
				if !ok {
					base, ok = valid[string(m.Name())]
				}
				if !ok {
					t.Errorf("%s has no valid request in this test", m.FullName())
					continue
				}
				for _, path := range stringFields(m.Input(), nil) {
					fields++
					for _, pan := range pans {
						req := dynamicpb.NewMessage(m.Input())
						b, _ := proto.Marshal(base)
						if err := proto.Unmarshal(b, req); err != nil {
							t.Fatal(err)
						}
						setPath(req, path, pan)
						err := invoke(with(key), s.conn, "/"+string(svc.FullName())+"/"+string(m.Name()), m.IsStreamingServer(), req)
						msg, name := status.Convert(err).Message(), string(path[len(path)-1].Name())
						if status.Code(err) != codes.InvalidArgument || strings.Contains(msg, "4242") {
							t.Errorf("%s with %q in %s: %v, want InvalidArgument", m.Name(), pan, path[len(path)-1].FullName(), err)
						} else if !strings.Contains(msg, "looks like a card number") && !parsed[name] && !strings.Contains(msg, "is too long") {
							t.Errorf("%s with %q in %s: %v, want the card number advisory", m.Name(), pan, path[len(path)-1].FullName(), err)
						}
					}
				}
			}
		}
	}
	if fields < 15 {
		t.Fatalf("found only %d string fields", fields)
	}
}

// stringFields lists the paths of the string fields of md, through nested
// messages.
func stringFields(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor) [][]protoreflect.FieldDescriptor {
	var out [][]protoreflect.FieldDescriptor
	fs := md.Fields()
	for i := range fs.Len() {
		f := fs.Get(i)
		path := append(append([]protoreflect.FieldDescriptor(nil), prefix...), f)
		switch f.Kind() {
		case protoreflect.StringKind:
			out = append(out, path)
		case protoreflect.MessageKind:
			if f.Message().FullName() != "google.protobuf.Timestamp" {
				out = append(out, stringFields(f.Message(), path)...)
			}
		}
	}
	return out
}

func setPath(m protoreflect.Message, path []protoreflect.FieldDescriptor, v string) {
	for _, f := range path[:len(path)-1] {
		if f.IsList() {
			// A repeated message (an order's routes): one element.
			m = m.Mutable(f).List().AppendMutable().Message()
			continue
		}
		m = m.Mutable(f).Message()
	}
	if last := path[len(path)-1]; last.IsList() {
		// A repeated string (a rule's currencies): one more element.
		m.Mutable(last).List().Append(protoreflect.ValueOfString(v))
		return
	}
	m.Set(path[len(path)-1], protoreflect.ValueOfString(v))
}

func invoke(ctx context.Context, conn *grpc.ClientConn, method string, streaming bool, req proto.Message) error {
	if !streaming {
		return conn.Invoke(ctx, method, req, new(emptypb.Empty))
	}
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(req); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	return stream.RecvMsg(new(emptypb.Empty))
}
