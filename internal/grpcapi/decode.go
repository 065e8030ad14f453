package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/settlepay/settle/internal/telemetry"
)

// A request that is not a valid protobuf message is the client's mistake,
// INVALID_ARGUMENT, but grpc-go reports its codec's failure as INTERNAL
// before any handler or interceptor runs. So the server's codec hands each
// request's bytes over undecoded (rawMessage), and decode unmarshals them
// into the request, where a failure is a malformedError that toStatus maps
// like any other. Every service is registered through decodingRegistrar,
// which puts decode in front of each method's handler.

// malformedError is a request whose bytes are not its protobuf message.
type malformedError struct{ err error }

func (e *malformedError) Error() string { return "malformed request: " + e.err.Error() }
func (e *malformedError) Unwrap() error { return e.err }

// rawMessage receives a request's bytes from rawCodec, for decode.
type rawMessage struct{ buf mem.Buffer }

// rawCodec is the protobuf codec, except that it hands a rawMessage the
// bytes it is given, which cannot fail.
type rawCodec struct{ encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{encoding.GetCodecV2(protoenc.Name)} }

// Unmarshal implements encoding.CodecV2.
func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// decode receives a request's bytes with recv and unmarshals them into m.
// recv's errors (end of stream, size limits, cancellation) pass unchanged.
func decode(recv func(any) error, m any) error {
	var raw rawMessage
	if err := recv(&raw); err != nil {
		return err
	}
	defer raw.buf.Free()
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("decode: %T is not a protobuf message", m)
	}
	if err := proto.Unmarshal(raw.buf.ReadOnlyData(), pm); err != nil {
		return &malformedError{err: err}
	}
	return nil
}

// decoder wraps handlers so that their requests go through decode, and
// counts and answers malformed ones.
type decoder struct {
	log     *slog.Logger
	metrics *telemetry.Metrics
}

// fail counts a malformed request to method and returns its status.
func (d decoder) fail(ctx context.Context, method string, err error) error {
	if d.metrics != nil {
		d.metrics.MalformedRequest(method)
	}
	return toStatus(ctx, d.log, err)
}

// unary wraps a unary method's handler. A malformed request still goes
// through the interceptors (authentication first, then logging and
// metrics), and is answered at the innermost one instead of the method.
func (d decoder) unary(h grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		var malformed *malformedError
		lenient := func(m any) error {
			err := decode(dec, m)
			if errors.As(err, &malformed) {
				return nil
			}
			return err
		}
		return h(srv, ctx, lenient, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			inner := func(ctx context.Context, req any) (any, error) {
				if malformed != nil {
					return nil, d.fail(ctx, info.FullMethod, malformed)
				}
				return handler(ctx, req)
			}
			if ic == nil {
				return inner(ctx, req)
			}
			return ic(ctx, req, info, inner)
		})
	}
}

// stream wraps a streaming method's handler.
func (d decoder) stream(h grpc.StreamHandler, method string) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		err := h(srv, decodingStream{ss})
		if malformed := (*malformedError)(nil); errors.As(err, &malformed) {
			return d.fail(ss.Context(), method, malformed)
		}
		return err
	}
}

// decodingStream receives its messages through decode.
type decodingStream struct{ grpc.ServerStream }

// RecvMsg implements grpc.ServerStream.
func (s decodingStream) RecvMsg(m any) error { return decode(s.ServerStream.RecvMsg, m) }

// decodingRegistrar registers services on a server with their handlers
// wrapped by a decoder. It serves reflection the server's services.
type decodingRegistrar struct {
	*grpc.Server
	d decoder
}

// RegisterService implements grpc.ServiceRegistrar.
func (r decodingRegistrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	w := *sd
	w.Methods = slices.Clone(sd.Methods)
	for i := range w.Methods {
		w.Methods[i].Handler = r.d.unary(w.Methods[i].Handler)
	}
	w.Streams = slices.Clone(sd.Streams)
	for i := range w.Streams {
		w.Streams[i].Handler = r.d.stream(w.Streams[i].Handler, "/"+sd.ServiceName+"/"+w.Streams[i].StreamName)
	}
	r.Server.RegisterService(&w, impl)
}
