// Package webhook takes in the events that gateways push (Stripe's
// webhooks, refpsp's equivalents, Adyen's batches of notifications) over
// HTTP. It knows no gateway: each is served at its own path by its
// adapter's order.EventReceiver, which verifies and reads the events of a
// request. A request is verified whole first (a bad or missing signature on
// any of its events is 400 and stores nothing), each event is recorded
// once with what it triggers in one commit, and the request is answered
// 2xx (with the gateway's own acknowledgement, order.EventAcknowledger, if
// it wants one) only after every commit, so that a gateway sends again
// every request of which Settle has not made each event durable.
//
// An event never settles an order by itself: it makes its attempt's order
// due for the reconciler now, whose guarded lookup decides, exactly as for
// a timeout. A success reported for an attempt its order does not hold (a
// past attempt, or a PAID order's other one) moves nothing and raises a
// possible double charge for a person; a decline reported for the
// operation that paid an order raises a capture_failed item.
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
	// Accounts names, by path, the gateway account a path's events are
	// recorded under where it is not the path's name (settle dev's refpsp
	// account is its simulator, "sim"): a dispute's event is read, and
	// the dispute accepted, through that account.
	Accounts map[string]string
	// MaxBody bounds a body; a larger one is 413. Zero is DefaultMaxBody.
	MaxBody int64
	// OnEvent, when set, is told of every event recorded, and of every
	// request that records none: the gateway, the event's type ("" when
	// it could not be read) and the result (an order.GatewayEventResult,
	// or bad_signature, malformed, too_large, ignored_type, error).
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
		evs, err := gw.ReceiveEvents(body, r.Header)
		if errors.Is(err, order.ErrEventSignature) {
			// Nothing is stored, of any event of the request; the reason
			// is not told to the sender.
			h.answer(w, gateway, "", "bad_signature", http.StatusBadRequest)
			return
		}
		// The gateway signed it: its connection stays open for more.
		w.Header().Del("Connection")
		ack, acks := gw.(order.EventAcknowledger)
		switch {
		case errors.Is(err, order.ErrEventIgnored) || err == nil && len(evs) == 0:
			h.cfg.OnEvent(gateway, "", "ignored_type")
			h.accept(w, ack, acks, "ignored_type")
			return
		case err != nil:
			h.answer(w, gateway, "", "malformed", http.StatusBadRequest)
			return
		}
		// Each event is recorded in its own commit, a repeat doing
		// nothing; the answer is 2xx only once all are, so that a gateway
		// sends again a request of which any event is not durable.
		results := make([]string, len(evs))
		account := gateway
		if a := h.cfg.Accounts[gateway]; a != "" {
			account = a
		}
		for i, ev := range evs {
			ev.Gateway = account
			rec, err := h.store.RecordGatewayEvent(r.Context(), ev)
			if err != nil {
				h.log.WarnContext(r.Context(), "gateway event not recorded", "gateway", gateway, "type", ev.Type,
					"recorded", i, "of", len(evs), "error", err)
				h.answer(w, gateway, ev.Type, "error", http.StatusServiceUnavailable)
				return
			}
			// The event id and object id are the gateway's text; the log
			// carries only what Settle chose.
			level := slog.LevelInfo
			if rec.Result == order.EventReview || rec.Result == order.EventReviewCaptureFailed || rec.Result == order.EventReviewRefundFailed {
				level = slog.LevelError
			}
			h.log.Log(r.Context(), level, "gateway event", "gateway", gateway, "type", ev.Type,
				"result", string(rec.Result), "order_id", rec.OrderID, "attempt_id", rec.AttemptID)
			h.cfg.OnEvent(gateway, ev.Type, string(rec.Result))
			results[i] = string(rec.Result)
		}
		h.accept(w, ack, acks, results...)
	}
}

// accept answers 200 once every event of a request is recorded: with the
// gateway's own acknowledgement if it wants one, else with the result of
// its one event ({"result": ...}) or of each of a batch ({"results": [...]}).
func (h *Handler) accept(w http.ResponseWriter, ack order.EventAcknowledger, acks bool, results ...string) {
	if acks {
		contentType, body := ack.Acknowledge()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		return
	}
	var v any = map[string]string{"result": results[0]}
	if len(results) > 1 {
		v = map[string][]string{"results": results}
	}
	h.write(w, http.StatusOK, v)
}

// answer tells OnEvent of a request's result and answers with it.
func (h *Handler) answer(w http.ResponseWriter, gateway, eventType, result string, code int) {
	h.cfg.OnEvent(gateway, eventType, result)
	h.write(w, code, map[string]string{"result": result})
}

func (h *Handler) write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}
