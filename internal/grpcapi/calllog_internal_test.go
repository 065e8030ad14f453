package grpcapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TestCallLogWritesTheMiddlewaresLine checks that callLog's line of a
// finished call has the fields of go-grpc-middleware's logging
// interceptor, which it replaced, in the same order and with the same
// values (but the call's time), and that a successful call's line is debug.
func TestCallLogWritesTheMiddlewaresLine(t *testing.T) {
	t.Parallel()
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	info := &grpc.UnaryServerInfo{FullMethod: "/settle.v1.OrderService/ChargeOrder"}
	for _, err := range []error{status.Error(codes.NotFound, "order not found"), nil} {
		for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
			var mine, theirs bytes.Buffer
			mineLog := slog.New(slog.NewJSONHandler(&mine, &slog.HandlerOptions{Level: level}))
			theirLog := slog.New(slog.NewJSONHandler(&theirs, &slog.HandlerOptions{Level: level}))
			handler := func(context.Context, any) (any, error) { return nil, err }
			_, _ = callLog{log: mineLog}.unary(ctx, nil, info, handler)
			_, _ = logging.UnaryServerInterceptor(logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
				theirLog.Log(ctx, slog.Level(lvl), msg, fields...)
			}), logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(func(c codes.Code) logging.Level {
				return logging.Level(callLevel(c))
			}))(ctx, nil, info, handler)
			if err == nil && level == slog.LevelInfo {
				if mine.Len() != 0 || theirs.Len() != 0 {
					t.Fatalf("a successful call is logged at info:\n%s\n%s", mine.String(), theirs.String())
				}
				continue
			}
			if got, want := keys(t, mine.Bytes()), keys(t, theirs.Bytes()); !slices.Equal(got, want) {
				t.Errorf("fields %v, the middleware's %v", got, want)
			}
			a, b := fields(t, mine.Bytes()), fields(t, theirs.Bytes())
			for k, v := range b {
				if k != "time" && k != "grpc.time_ms" && a[k] != v {
					t.Errorf("%s is %v, the middleware's %v", k, a[k], v)
				}
			}
		}
	}
}

// keys are the keys of a JSON line, in their order.
func keys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	var out []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// fields are a JSON line's fields.
func fields(t *testing.T, line []byte) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return m
}
