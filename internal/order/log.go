package order

import (
	"context"
	"log/slog"
	"time"
)

// The log lines that the charge path and the reconciler share are written
// here, so that a transition or a gateway call reads the same in the logs
// whoever made it. None carries a transition's reason: a client or an
// operator may have written it, and it stays in the order's history.

// Transition is one move of an order, as its log line tells it.
type Transition struct {
	OrderID   string
	AttemptID string
	// RequestID is the client's key of the call that made the move, if a
	// client's call made it.
	RequestID string
	From, To  State
	Event     EventName
	Actor     Actor
}

// Log writes the transition's one log line.
func (t Transition) Log(ctx context.Context, log *slog.Logger) {
	log.LogAttrs(ctx, slog.LevelInfo, "order transition", slog.String("order_id", t.OrderID),
		slog.String("attempt_id", t.AttemptID), slog.String("request_id", t.RequestID), slog.String("from", string(t.From)),
		slog.String("to", string(t.To)), slog.String("event", string(t.Event)), slog.String("actor", string(t.Actor)))
}

// GatewayCall is one call to a gateway about an attempt, as its log line
// tells it.
type GatewayCall struct {
	// Op is "charge" or "lookup".
	Op        string
	Gateway   string
	OrderID   string
	AttemptID string
	// RequestID is the client's key of the call that made the gateway
	// call, if a client's call made it.
	RequestID string
	Outcome   Outcome
	Latency   time.Duration
	// Err is the adapter's error, which adapters keep free of keys and
	// payment method tokens.
	Err error
}

// Log writes the call's one log line.
func (c GatewayCall) Log(ctx context.Context, log *slog.Logger) {
	attrs := []slog.Attr{slog.String("gateway", c.Gateway), slog.String("order_id", c.OrderID),
		slog.String("attempt_id", c.AttemptID)}
	if c.RequestID != "" {
		attrs = append(attrs, slog.String("request_id", c.RequestID))
	}
	attrs = append(attrs, slog.String("outcome", string(c.Outcome)), slog.Duration("latency", c.Latency))
	if c.Err != nil {
		attrs = append(attrs, slog.String("error", c.Err.Error()))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "gateway "+c.Op, attrs...)
}
