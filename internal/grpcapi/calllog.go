package grpcapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// callLog writes each finished call's line, as go-grpc-middleware's
// logging interceptor wrote it (its fields, in its order), but builds the
// line only when its level is enabled: a successful call's line is debug,
// and the middleware built the fields of every call, the line of which
// the logger then dropped, for about a twentieth of the server's CPU under
// load (settle bench -profile). Health checks and reflection are not
// logged.
type callLog struct {
	log *slog.Logger
}

// callLevel is the level of a call's line: debug for a success (a line
// per successful call costs about a tenth of the server's CPU under load),
// the middleware's level for a server's code otherwise.
func callLevel(c codes.Code) slog.Level {
	if c == codes.OK {
		return slog.LevelDebug
	}
	return slog.Level(logging.DefaultServerCodeToLevel(c))
}

func (l callLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if open(info.FullMethod) {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	l.finished(ctx, interceptors.NewServerCallMeta(info.FullMethod, nil, req), start, err)
	return resp, err
}

func (l callLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if open(info.FullMethod) {
		return handler(srv, ss)
	}
	start := time.Now()
	err := handler(srv, ss)
	l.finished(ss.Context(), interceptors.NewServerCallMeta(info.FullMethod, info, nil), start, err)
	return err
}

// finished writes the line of the call c, which started at start and
// returned err, if its level is enabled.
func (l callLog) finished(ctx context.Context, c interceptors.CallMeta, start time.Time, err error) {
	if errors.Is(err, io.EOF) {
		err = nil
	}
	code := status.Code(err)
	level := callLevel(code)
	if !l.log.Enabled(ctx, level) {
		return
	}
	took := time.Since(start)
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String(logging.SystemTag[0], logging.SystemTag[1]),
		slog.String(logging.ComponentFieldKey, logging.KindServerFieldValue), slog.String(logging.ServiceFieldKey, c.Service),
		slog.String(logging.MethodFieldKey, c.Method), slog.String(logging.MethodTypeFieldKey, string(c.Typ)))
	if p, ok := peer.FromContext(ctx); ok {
		attrs = append(attrs, slog.String("peer.address", p.Addr.String()))
	}
	attrs = append(attrs, slog.String("grpc.start_time", start.Format(time.RFC3339)))
	if d, ok := ctx.Deadline(); ok {
		attrs = append(attrs, slog.String("grpc.request.deadline", d.Format(time.RFC3339)))
	}
	attrs = append(attrs, slog.String("grpc.code", code.String()))
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", err.Error()))
	}
	// The middleware's milliseconds: microseconds, as a float32, over 1000.
	ms := float32(took.Nanoseconds()/1000) / 1000
	attrs = append(attrs, slog.String("grpc.time_ms", strconv.FormatFloat(float64(ms), 'g', -1, 32)))
	l.log.LogAttrs(ctx, level, "finished call", attrs...)
}
