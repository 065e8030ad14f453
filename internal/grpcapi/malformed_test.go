package grpcapi_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/telemetry"
)

// rawBytes is a request sent as it is, whatever it holds.
type rawBytes []byte

// rawClientCodec sends rawBytes unchanged and decodes answers as protobuf.
type rawClientCodec struct{ encoding.CodecV2 }

func (c rawClientCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(rawBytes); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// TestMalformedRequestIsInvalidArgument sends bytes that are not the
// request's protobuf message, to unary and streaming methods of every
// service, and wants INVALID_ARGUMENT (after authentication), counted by
// settle_grpc_malformed_requests_total, with the server still serving.
func TestMalformedRequestIsInvalidArgument(t *testing.T) {
	t.Parallel()
	metrics := telemetry.NewMetrics()
	s := newStackWith(t, grpcapi.Options{Keys: testKeys(t), Metrics: metrics}, insecure.NewCredentials())
	codec := grpc.ForceCodecV2(rawClientCodec{encoding.GetCodecV2(protoenc.Name)})
	bad := map[string]rawBytes{
		"a length past the end":     {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"a truncated string":        {0x0a, 0x05, 'a'},
		"a string of invalid UTF-8": {0x0a, 0x01, 0xff},
		"a group never closed":      {0x0b},
	}
	unary := func(key, method string, req rawBytes) error {
		var resp settlev1.GetOrderResponse
		return s.conn.Invoke(with(key), method, req, &resp, codec)
	}
	for name, req := range bad {
		for key, method := range map[string]string{
			keyA:   "/settle.v1.OrderService/GetOrder",
			keyAop: "/settle.v1.OpsService/GetOrderHistory",
			"":     "/grpc.health.v1.Health/Check",
		} {
			if err := unary(key, method, req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s to %s: %v, want InvalidArgument", name, method, err)
			}
		}
		stream, err := s.conn.NewStream(with(keyA), &grpc.StreamDesc{ServerStreams: true}, "/settle.v1.OrderService/WatchOrder", codec)
		if err == nil {
			if err = stream.SendMsg(req); err == nil {
				_ = stream.CloseSend() // RecvMsg reports any failure
				err = stream.RecvMsg(new(settlev1.WatchOrderResponse))
			}
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s to WatchOrder: %v, want InvalidArgument", name, err)
		}
	}
	// Without a key, the answer is about the key, not the payload.
	if err := unary("", "/settle.v1.OrderService/GetOrder", bad["a truncated string"]); status.Code(err) != codes.Unauthenticated {
		t.Errorf("malformed, without a key: %v, want Unauthenticated", err)
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, f := range families {
		if f.GetName() == "settle_grpc_malformed_requests_total" {
			for _, m := range f.GetMetric() {
				counted += m.GetCounter().GetValue()
			}
		}
	}
	if want := float64(4 * len(bad)); counted != want {
		t.Errorf("settle_grpc_malformed_requests_total = %v, want %v", counted, want)
	}
	// Well-formed calls are unaffected, unary and streaming.
	o := s.createWith(t, keyA, "after-malformed", "tok_ok")
	if _, err := s.orders.GetOrder(with(keyA), &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}
