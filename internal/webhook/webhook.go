// Package webhook takes in the events that gateways push (Stripe's
// webhooks, refpsp's equivalents) over HTTP. It knows no gateway: each is
// served at its own path by its adapter's order.EventReceiver, which
// verifies and reads the event. An event is verified first (a bad or
// missing signature is 400 and stores nothing), recorded once with what it
// triggers in one commit, and answered 2xx only after that commit, so that
// a gateway retries every event Settle has not made durable.
//
// An event never settles an order by itself: it makes its attempt's order
// due for the reconciler now, whose guarded lookup decides, exactly as for
// a timeout. A success reported for an attempt its order does not hold (a
// past attempt, or a PAID order's other one) moves nothing and raises a
// possible double charge for a person.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/settlepay/settle/internal/order"
)

// DefaultMaxBody bounds an event's body when Config.MaxBody is zero. Stripe
// events about a PaymentIntent are a few kilobytes.
const DefaultMaxBody = 256 << 10

// Store records events; postgres.Store implements it.
type Store interface {
	// RecordGatewayEvent records ev once with what it triggers, in one
	// commit; a repeat is order.EventDuplicate and does nothing.
	RecordGatewayEvent(ctx context.Context, ev order.GatewayEvent) (order.RecordedEvent, error)
}

// Config configures the handler.
type Config struct {
	// Gateways are the gateways whose events are taken in, by name: each
	// is served at POST /webhooks/<name>, where its receiver verifies and
	// reads the events, which are recorded under that name. Any other
	// path is 404.
	Gateways map[string]order.EventReceiver
	// MaxBody bounds a body; a larger one is 413. Zero is DefaultMaxBody.
	MaxBody int64
	// OnEvent, when set, is told of every request: the gateway, the
	// event's type ("" when it could not be read) and the result (an
	// order.GatewayEventResult, or bad_signature, malformed, too_large,
	// ignored_type, error).
	OnEvent func(gateway, eventType, result string)
}

// Handler serves POST /webhooks/<name> for each of Config.Gateways.
type Handler struct {
	store Store
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
}

// New returns a Handler.
func New(store Store, cfg Config, log *slog.Logger) *Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, string, string) {}
	}
	h := &Handler{store: store, cfg: cfg, log: log, mux: http.NewServeMux()}
	for name, gw := range cfg.Gateways {
		h.mux.HandleFunc("POST /webhooks/"+name, h.serve(name, gw))
	}
	return h
}

// ServeHTTP serves the endpoints of the configured gateways. Every answer
// says Connection: close, which makes net/http close the connection after
// it, except the answer to a verified event: a sender that cannot sign
// (an unknown path, a bad signature, a body too large) never keeps a
// connection open for another request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) serve(gateway string, gw order.EventReceiver) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			h.answer(w, gateway, "", "too_large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			h.answer(w, gateway, "", "malformed", http.StatusBadRequest)
			return
		}
		ev, err := gw.ReceiveEvent(body, r.Header)
		if errors.Is(err, order.ErrEventSignature) {
			// Nothing is stored; the reason is not told to the sender.
			h.answer(w, gateway, "", "bad_signature", http.StatusBadRequest)
			return
		}
		// The gateway signed it: its connection stays open for more.
		w.Header().Del("Connection")
		switch {
		case errors.Is(err, order.ErrEventIgnored):
			h.answer(w, gateway, "", "ignored_type", http.StatusOK)
			return
		case err != nil:
			h.answer(w, gateway, "", "malformed", http.StatusBadRequest)
			return
		}
		ev.Gateway = gateway
		rec, err := h.store.RecordGatewayEvent(r.Context(), ev)
		if err != nil {
			// Not recorded: a 5xx makes the gateway deliver it again.
			h.log.WarnContext(r.Context(), "gateway event not recorded", "gateway", gateway, "type", ev.Type, "error", err)
			h.answer(w, gateway, ev.Type, "error", http.StatusServiceUnavailable)
			return
		}
		// The event id and object id are the gateway's text; the log
		// carries only what Settle chose.
		level := slog.LevelInfo
		if rec.Result == order.EventReview {
			level = slog.LevelError
		}
		h.log.Log(r.Context(), level, "gateway event", "gateway", gateway, "type", ev.Type,
			"result", string(rec.Result), "order_id", rec.OrderID, "attempt_id", rec.AttemptID)
		h.answer(w, gateway, ev.Type, string(rec.Result), http.StatusOK)
	}
}

func (h *Handler) answer(w http.ResponseWriter, gateway, eventType, result string, code int) {
	h.cfg.OnEvent(gateway, eventType, result)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"result": result})
	w.Write(append(b, '\n'))
}
