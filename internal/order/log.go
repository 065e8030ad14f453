package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"
)

// The log lines that the charge path and the reconciler share are written
// here, so that a transition or a gateway call reads the same in the logs
// whoever made it. None carries text a client or an operator chose: not a
// transition's reason, which stays in the order's history, nor a request
// id, which is logged as its KeyHash. Lines carry the ids Settle made.

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
		slog.String("attempt_id", t.AttemptID), keyAttr("request_key", t.RequestID), slog.String("from", string(t.From)),
		slog.String("to", string(t.To)), slog.String("event", string(t.Event)), slog.String("actor", string(t.Actor)))
}

// RefundTransition is one move of a refund, as its log line tells it.
type RefundTransition struct {
	OrderID  string
	RefundID string
	// RequestID is the client's key of the call that made the move, if a
	// client's call made it.
	RequestID string
	From, To  RefundState
	Event     EventName
	Actor     Actor
}

// Log writes the refund transition's one log line.
func (t RefundTransition) Log(ctx context.Context, log *slog.Logger) {
	log.LogAttrs(ctx, slog.LevelInfo, "refund transition", slog.String("order_id", t.OrderID),
		slog.String("refund_id", t.RefundID), keyAttr("request_key", t.RequestID), slog.String("from", string(t.From)),
		slog.String("to", string(t.To)), slog.String("event", string(t.Event)), slog.String("actor", string(t.Actor)))
}

// OperationTransition is one move of a capture or a void (Kind), as its
// log line tells it.
type OperationTransition struct {
	Kind      string
	OrderID   string
	ID        string
	RequestID string
	From, To  string
	Event     EventName
	Actor     Actor
}

// Log writes the transition's one log line.
func (t OperationTransition) Log(ctx context.Context, log *slog.Logger) {
	log.LogAttrs(ctx, slog.LevelInfo, t.Kind+" transition", slog.String("order_id", t.OrderID),
		slog.String(t.Kind+"_id", t.ID), keyAttr("request_key", t.RequestID), slog.String("from", t.From),
		slog.String("to", t.To), slog.String("event", string(t.Event)), slog.String("actor", string(t.Actor)))
}

// GatewayCall is one call to a gateway about an attempt, as its log line
// tells it.
type GatewayCall struct {
	// Op is "charge", "lookup", "refund", "lookup_refund" or
	// "accept_dispute"; for the refund's two, AttemptID is the refund's
	// id, and for accept_dispute the dispute's.
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
		attrs = append(attrs, keyAttr("request_key", c.RequestID))
	}
	attrs = append(attrs, slog.String("outcome", string(c.Outcome)), slog.Duration("latency", c.Latency))
	if c.Err != nil {
		attrs = append(attrs, slog.String("error", c.Err.Error()))
	}
	level := slog.LevelInfo
	if c.Outcome == OutcomeRefused {
		// Every charge through this gateway will be refused until an
		// operator fixes Settle's credentials or configuration.
		level = slog.LevelError
	}
	log.LogAttrs(ctx, level, "gateway "+c.Op, attrs...)
}

// KeyHash names a client's key (a request id, a merchant reference) in logs
// without writing it: the first 12 hex digits of its SHA-256. Enough to
// tell one key's lines from another's and to find them again from the key;
// the key itself, chosen by the client, may hold anything.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// keyAttr is a log attribute for a client's key, hashed; none when empty.
func keyAttr(name, key string) slog.Attr {
	if key == "" {
		return slog.Attr{}
	}
	return slog.String(name, KeyHash(key))
}
