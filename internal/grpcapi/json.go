package grpcapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// JSON over HTTP: the REST paths of the google.api.http annotations in
// proto/settle/v1, served by Vanguard in front of the gRPC server itself.
// Vanguard turns each JSON request into a gRPC call that it hands to
// grpc.Server.ServeHTTP in the same process, so that every JSON call goes
// through the same interceptors (authentication, roles, limits, logging,
// metrics, the decoder) and the same handlers as a gRPC call, with no
// loopback connection in between. The answer, or the error as a
// google.rpc.Status with its HTTP status, is turned back into JSON.

// jsonPrefix is where the REST paths live; every other path (Connect and
// gRPC-Web paths, which Vanguard would serve too) is not found.
const jsonPrefix = "/v1/"

// OpenAPIPath is where the JSON listener serves its OpenAPI document.
const OpenAPIPath = "/v1/openapi.json"

// IdempotencyKeyHeader is the HTTP header that a JSON client may send
// instead of the body's request_id; it reaches the server as gRPC metadata
// of the same name.
const IdempotencyKeyHeader = "Idempotency-Key"

// DefaultJSONWriteTimeout bounds how long the JSON listener takes to
// answer a request, the call included.
const DefaultJSONWriteTimeout = time.Minute

// JSONOptions are the JSON listener's own settings; its connection limits
// are the gRPC listener's (Options.Conn).
type JSONOptions struct {
	// TLS secures the listener; nil is plain HTTP.
	TLS *tls.Config
	// WriteTimeout bounds a request from the end of its headers to the
	// end of its answer: it must outlast the longest call (a charge waits
	// for the gateway up to its timeout). Zero is DefaultJSONWriteTimeout.
	WriteTimeout time.Duration
	// OpenAPI is the document served at OpenAPIPath; nil serves none.
	OpenAPI []byte
}

// jsonServer is the JSON listener's HTTP server and its connections.
type jsonServer struct {
	http  *http.Server
	conns *connTracker
	tls   *tls.Config
}

// newJSONServer returns the JSON listener in front of gs, whose services
// must all be registered. Its limits are the gRPC listener's: the same
// connection places, per address and keyless, the same header size, the
// same message size, a handshake and header timeout of HandshakeTimeout,
// and an idle connection closed after MaxConnectionIdle.
func newJSONServer(tc http.Handler, conn ConnLimits, opts JSONOptions, onClose func(string)) *jsonServer {
	write := opts.WriteTimeout
	if write <= 0 {
		write = DefaultJSONWriteTimeout
	}
	var cfg *tls.Config
	if opts.TLS != nil {
		cfg = opts.TLS.Clone()
		// HTTP/1.1 only: a request per connection at a time, which the
		// connection limits bound as they are.
		cfg.NextProtos = []string{"http/1.1"}
	}
	conns := newConnTracker(conn, onClose)
	hs := &http.Server{
		Handler:           jsonHandler(tc, opts.OpenAPI),
		ReadHeaderTimeout: conn.HandshakeTimeout,
		ReadTimeout:       conn.HandshakeTimeout,
		WriteTimeout:      write,
		IdleTimeout:       conn.MaxConnectionIdle,
		MaxHeaderBytes:    MaxHeaderBytes,
		// A connection's calls carry its clientConn, as a gRPC
		// connection's do (TagConn, which finds it by its addresses too:
		// the listener's wrappers hide it): a call with a valid key marks
		// it keyed, and its open calls keep a keyless one past its grace.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return conns.TagConn(ctx, &stats.ConnTagInfo{RemoteAddr: c.RemoteAddr(), LocalAddr: c.LocalAddr()})
		},
	}
	return &jsonServer{http: hs, conns: conns, tls: cfg}
}

// newTranscoder returns Vanguard's transcoder in front of gs, whose
// services must all be registered: the REST paths and the Connect
// protocol's, with JSON bodies.
func newTranscoder(gs *grpc.Server) (http.Handler, error) {
	codec := func(res vanguard.TypeResolver) vanguard.Codec {
		return jsonCodec{vanguard.JSONCodec{
			MarshalOptions: protojson.MarshalOptions{Resolver: res, EmitUnpopulated: true},
			// An unknown field is refused (400), not dropped: a misspelt
			// request_id must not become a charge without one.
			UnmarshalOptions: protojson.UnmarshalOptions{Resolver: res},
		}}
	}
	tc, err := vanguardgrpc.NewTranscoder(gs,
		vanguard.WithCodec(codec),
		vanguard.WithUnknownHandler(http.HandlerFunc(notFound)),
		vanguard.WithDefaultServiceOptions(vanguard.WithMaxMessageBufferBytes(MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("JSON transcoder: %w", err)
	}
	return tc, nil
}

// InProcess returns a handler of the API's calls for a client in the
// same process (the console): the Connect protocol's unary calls with
// JSON bodies (POST /settle.v1.OpsService/ListReviewItems, …) and the
// REST paths, handed to the gRPC server itself, so that each call goes
// through the same interceptors as any other: its Authorization header
// is checked, its role, merchant scope and limits applied, and it is
// logged and counted. The request's RemoteAddr is the caller's address.
func (s *Server) InProcess() http.Handler { return s.transcoder }

// jsonCodec is Vanguard's JSON codec, except that a body it cannot read
// is the client's mistake, INVALID_ARGUMENT (400), where Vanguard would
// answer UNKNOWN (500).
type jsonCodec struct{ vanguard.JSONCodec }

// Unmarshal implements vanguard.Codec.
func (c jsonCodec) Unmarshal(data []byte, msg proto.Message) error {
	if err := c.JSONCodec.Unmarshal(data, msg); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request body is not valid JSON for %s: %w", msg.ProtoReflect().Descriptor().Name(), err))
	}
	return nil
}

// UnmarshalField implements vanguard.RESTCodec.
func (c jsonCodec) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	if err := c.JSONCodec.UnmarshalField(data, msg, field); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("the request body is not valid JSON for %s: %w", field.Name(), err))
	}
	return nil
}

// jsonHandler checks what Vanguard would let through or answer in another
// shape: only the REST paths, JSON bodies only (415), a body no larger
// than a gRPC message may be (413), and errors as google.rpc.Status.
func jsonHandler(tc http.Handler, openAPI []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == OpenAPIPath && openAPI != nil {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeStatus(w, http.StatusMethodNotAllowed, codes.Unimplemented, "the OpenAPI document is read with GET")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(openAPI)
			return
		}
		if !strings.HasPrefix(r.URL.Path, jsonPrefix) {
			notFound(w, r)
			return
		}
		if r.ContentLength > MaxMessageBytes {
			writeStatus(w, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, fmt.Sprintf("the request body is larger than %d bytes", MaxMessageBytes))
			return
		}
		// The body is read whole, and at most one byte past the limit: a
		// body sent without a length is held to the limit as well.
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxMessageBytes+1))
		if err != nil {
			writeStatus(w, http.StatusBadRequest, codes.InvalidArgument, "the request body could not be read")
			return
		}
		if len(body) > MaxMessageBytes {
			writeStatus(w, http.StatusRequestEntityTooLarge, codes.ResourceExhausted, fmt.Sprintf("the request body is larger than %d bytes", MaxMessageBytes))
			return
		}
		if len(body) > 0 || r.Header.Get("Content-Type") != "" {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" {
				writeStatus(w, http.StatusUnsupportedMediaType, codes.InvalidArgument, "the request body must be JSON: send Content-Type: application/json")
				return
			}
			// Vanguard reads the plain media type.
			r.Header.Set("Content-Type", "application/json")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		tc.ServeHTTP(w, r)
	})
}

// notFound answers a path that is none of the API's.
func notFound(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, http.StatusNotFound, codes.NotFound, "no such path: see "+OpenAPIPath)
}

// writeStatus answers an HTTP status with a google.rpc.Status body, as
// Vanguard answers the calls' errors.
func writeStatus(w http.ResponseWriter, httpCode int, code codes.Code, msg string) {
	b, err := protojson.Marshal(status.New(code, msg).Proto())
	if err != nil {
		b = []byte(`{"code":13,"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpCode)
	_, _ = w.Write(b)
}

// ServeJSON serves JSON over HTTP on lis until the server is stopped,
// accepting connections as Serve does. It returns nil once stopped.
func (s *Server) ServeJSON(lis net.Listener) error {
	if s.json == nil {
		return errors.New("JSON over HTTP is not configured")
	}
	lis = netutil.LimitListener(s.json.conns.listener(lis), s.json.conns.limits.MaxConnections)
	if s.json.tls != nil {
		lis = tls.NewListener(lis, s.json.tls)
	}
	err := s.json.http.Serve(lis)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// stopJSON closes the JSON listener and its connections at once.
func (s *Server) stopJSON() {
	if s.json != nil {
		s.json.http.Close()
	}
}

// shutdownJSON closes the JSON listener and waits for its requests to be
// answered, or for stopJSON.
func (s *Server) shutdownJSON() {
	if s.json != nil {
		_ = s.json.http.Shutdown(context.Background())
	}
}

// idempotencyKey puts the Idempotency-Key header (gRPC metadata) into the
// request's request_id where the body has none: a JSON client may name
// its attempt either way. A header and a body that disagree are
// INVALID_ARGUMENT; a method without request_id ignores the header.
func idempotencyKey(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	keys := md.Get(strings.ToLower(IdempotencyKeyHeader))
	if len(keys) == 0 {
		return handler(ctx, req)
	}
	m, ok := req.(proto.Message)
	if !ok {
		return handler(ctx, req)
	}
	msg := m.ProtoReflect()
	fd := msg.Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return handler(ctx, req)
	}
	if len(keys) > 1 {
		return nil, status.Error(codes.InvalidArgument, "send one Idempotency-Key header")
	}
	key := strings.TrimSpace(keys[0])
	switch body := msg.Get(fd).String(); {
	case key == "":
		return nil, status.Error(codes.InvalidArgument, "the Idempotency-Key header is empty")
	case body == "":
		msg.Set(fd, protoreflect.ValueOfString(key))
	case body != key:
		return nil, status.Error(codes.InvalidArgument, "the Idempotency-Key header and the body's request_id differ: send one, or the same in both")
	}
	return handler(ctx, req)
}
