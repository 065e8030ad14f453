// Package stripe is the order.Gateway adapter for Stripe. It charges by
// creating and confirming a PaymentIntent through stripe-go v76, with the
// attempt id as Stripe idempotency key on every call, and it looks an attempt
// up by replaying that same call under the same key.
//
// # The call
//
// Charge and Lookup send the same request, built from the order.ChargeRequest
// and nothing else, so that a replay carries the same parameters:
//
//	POST /v1/payment_intents
//	Idempotency-Key: <attempt id>
//
//	amount=<minor units>  currency=<lowercased>  payment_method=<token>
//	confirm=true  off_session=true  payment_method_types[0]=card
//	metadata[order_id]  metadata[attempt_id]  metadata[merchant_reference]
//
// Settle charges off-session, so there is nobody to complete a redirect or a
// 3-D Secure challenge; payment_method_types=[card] keeps redirect and
// asynchronous ("processing" for days) payment methods out, which
// automatic_payment_methods would let in.
//
// # Outcomes
//
//	Stripe's answer                                      Charge                 Lookup (replay)
//	200, PaymentIntent succeeded                         succeeded              succeeded
//	200, requires_action                                 declined               declined
//	     (decline code "requires_action")
//	200, requires_payment_method                         declined               declined
//	     (last_payment_error's decline code or code, else "requires_payment_method")
//	200, canceled                                        declined "canceled"    declined
//	200, processing, requires_capture, other             unknown                error
//	200 for another amount, currency or attempt          unknown                error
//	402 card_error                                       declined               declined
//	     (Stripe's decline_code, else its code, else "card_declined")
//	400 idempotency_error (same key, other parameters)   unknown, logged ERROR  error, logged ERROR
//	409 idempotency_key_in_use (key in flight)           unknown                error
//	429, 5xx                                             unknown                error
//	other 4xx (invalid request, 401, 403, 404)           declined "rejected_<code or status>"
//	                                                     when that was the only request sent,
//	                                                     else unknown           error
//	no answer: timeout, reset, deadline, bad body        unknown                error
//	no connection ever obtained (dial refused, DNS)      not_sent               error
//
// ChargeID is the PaymentIntent's id (pi_...), not its latest_charge: the
// PaymentIntent is the object our idempotency key creates, the one a replay
// returns, and what refunds and the Dashboard take; a declined attempt has a
// PaymentIntent too, and its id is reported when Stripe gave it.
//
// A rejection in Lookup is an error, not a decline: a 401 or a validation
// failure of the replay is about the replay, and says nothing certain about
// what the original request did.
//
// # Lookup
//
// Stripe has no lookup by our reference other than the Search API, which is
// eventually consistent and therefore cannot prove that a charge does not
// exist. Lookup instead replays the create with the same key and the same
// parameters: Stripe answers with the saved result of the first request that
// used the key (including its decline or its 5xx), answers 409 while that
// request is still in flight, and, when no request with the key ever reached
// it, executes the replay: the attempt is charged now, once. Lookup therefore
// never reports order.OutcomeNotFound.
//
// Stripe keeps idempotency keys for at least 24 hours. Lookup replays only
// while the attempt is younger than Config.ReplayWindow (20 hours by
// default) and otherwise returns an error wrapping order.ErrLookupExpired,
// for a person to resolve. It needs order.ChargeRequest.CreatedAt for that.
//
// # Retries
//
// stripe-go retries network errors, 409s, lock timeouts and 503s up to
// Config.MaxNetworkRetries times, with the same Idempotency-Key, which Stripe
// deduplicates: a retry never charges twice. Config.Timeout bounds the whole
// call, retries included.
//
// The secret key never appears in errors or logs, even when the server
// echoes it (stripe-mock quotes the Authorization header it rejects).
package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/paymentintent"

	"github.com/settlepay/settle/internal/order"
)

const (
	// DefaultBaseURL is Stripe's API.
	DefaultBaseURL = stripego.APIURL
	// DefaultTimeout bounds one call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultReplayWindow is how old an attempt may be for Lookup to replay
	// it when Config.ReplayWindow is zero: well inside Stripe's 24 hours.
	DefaultReplayWindow = 20 * time.Hour
	// MaxReplayWindow is the longest ReplayWindow New accepts. Stripe may
	// prune a key once it is 24 hours old; a replay after that would charge
	// again.
	MaxReplayWindow = 23 * time.Hour
)

// Config configures a Gateway.
type Config struct {
	// SecretKey is the Stripe secret (sk_...) or restricted (rk_...) key.
	// It never appears in errors or logs.
	SecretKey string
	// BaseURL is Stripe's address; empty means DefaultBaseURL. Tests point
	// it at stripe-mock or a fake.
	BaseURL string
	// Timeout bounds each Charge or Lookup, stripe-go's retries included, on
	// top of any deadline of the caller's context. Zero means
	// DefaultTimeout. Nothing is sent after it; a call may still return up
	// to one of stripe-go's pauses between retries (0.5s to 5s) later,
	// because stripe-go sleeps without watching the context.
	Timeout time.Duration
	// MaxNetworkRetries is how many times stripe-go may resend a call that
	// failed in a way it knows to be safe to retry; each resend carries the
	// same idempotency key. Zero means none.
	MaxNetworkRetries int
	// ReplayWindow is the age of an attempt past which Lookup no longer
	// replays it. Zero means DefaultReplayWindow; at most MaxReplayWindow.
	ReplayWindow time.Duration
	// Logger receives the adapter's own log lines (an idempotency_error at
	// ERROR, because it means a bug) and stripe-go's, scrubbed of the key.
	// Nil means no logging.
	Logger *slog.Logger
	// Now is the clock that ages attempts for the replay window. Nil means
	// time.Now.
	Now func() time.Time
}

// Gateway charges payment methods through Stripe PaymentIntents. It
// implements order.Gateway and is safe for concurrent use.
type Gateway struct {
	intents paymentintent.Client
	key     string
	timeout time.Duration
	window  time.Duration
	log     *slog.Logger
	now     func() time.Time
}

var _ order.Gateway = (*Gateway)(nil)

// New returns a Gateway for cfg, or an error saying what in cfg is wrong.
func New(cfg Config) (*Gateway, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripe: secret key is required")
	}
	if strings.TrimSpace(cfg.SecretKey) != cfg.SecretKey || strings.ContainsAny(cfg.SecretKey, " \t\r\n") {
		return nil, errors.New("stripe: secret key must not contain spaces or line breaks")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		// The *url.Error would quote the whole URL.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("stripe: base URL does not parse: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("stripe: base URL %q must be an absolute http or https URL", base.Redacted())
	}
	if base.User != nil {
		return nil, fmt.Errorf("stripe: base URL %q must not carry credentials", base.Redacted())
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("stripe: timeout %s must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxNetworkRetries < 0 || cfg.MaxNetworkRetries > 10 {
		return nil, fmt.Errorf("stripe: max network retries %d must be between 0 and 10", cfg.MaxNetworkRetries)
	}
	if cfg.ReplayWindow == 0 {
		cfg.ReplayWindow = DefaultReplayWindow
	}
	if cfg.ReplayWindow < 0 || cfg.ReplayWindow > MaxReplayWindow {
		return nil, fmt.Errorf("stripe: replay window %s must be positive and at most %s (Stripe keeps idempotency keys for 24h)",
			cfg.ReplayWindow, MaxReplayWindow)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}

	// A transport of its own, so that nothing else in the process shares its
	// connections or changes its settings. Stripe never redirects; a
	// redirect means a wrong base URL, and following one would turn the POST
	// into a GET.
	hc := &http.Client{
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	backend := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		HTTPClient:        hc,
		URL:               stripego.String(strings.TrimRight(base.String(), "/")),
		MaxNetworkRetries: stripego.Int64(int64(cfg.MaxNetworkRetries)),
		LeveledLogger:     leveledLogger{log: cfg.Logger, key: cfg.SecretKey},
		EnableTelemetry:   stripego.Bool(false),
	})
	return &Gateway{
		intents: paymentintent.Client{B: backend, Key: cfg.SecretKey},
		key:     cfg.SecretKey,
		timeout: cfg.Timeout,
		window:  cfg.ReplayWindow,
		log:     cfg.Logger,
		now:     cfg.Now,
	}, nil
}

// Charge creates and confirms a PaymentIntent for req, with req.AttemptID as
// the idempotency key. It always reports an outcome; a non-nil error explains
// an unknown or not-sent outcome or a rejection, and is for logs.
func (g *Gateway) Charge(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	if err := checkRequest(req); err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("stripe: charge %s: %w", req.AttemptID, err)
	}
	res, err := g.classify(ctx, req, g.create(ctx, req), false)
	if err != nil {
		err = fmt.Errorf("stripe: charge %s: %w", req.AttemptID, err)
	}
	return res, err
}

// Lookup learns what became of the attempt req by replaying its charge with
// the same idempotency key and parameters (see the package documentation).
// It returns OutcomeSucceeded or OutcomeDeclined, or an error when Stripe
// cannot say now (the result's outcome is then OutcomeUnknown). Past the
// replay window the error wraps order.ErrLookupExpired.
func (g *Gateway) Lookup(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	unknown := order.Result{Outcome: order.OutcomeUnknown}
	if err := checkRequest(req); err != nil {
		return unknown, fmt.Errorf("stripe: lookup %s: %w", req.AttemptID, err)
	}
	if req.CreatedAt.IsZero() {
		return unknown, fmt.Errorf("stripe: lookup %s: the attempt's creation time is required to replay it inside Stripe's idempotency window", req.AttemptID)
	}
	if age := g.now().Sub(req.CreatedAt); age > g.window {
		return unknown, fmt.Errorf("stripe: lookup %s: the attempt is %s old, past the %s replay window (Stripe keeps idempotency keys for 24h), so a replay could charge again: %w",
			req.AttemptID, age.Round(time.Minute), g.window, order.ErrLookupExpired)
	}
	res, err := g.classify(ctx, req, g.create(ctx, req), true)
	if err != nil {
		return unknown, fmt.Errorf("stripe: lookup %s: %w", req.AttemptID, err)
	}
	return res, nil
}

// checkRequest refuses what Stripe would refuse before anything is sent.
func checkRequest(req order.ChargeRequest) error {
	switch {
	case req.AttemptID == "":
		return errors.New("attempt id is required")
	case len(req.AttemptID) > 255:
		return errors.New("attempt id is longer than Stripe's 255-character idempotency key")
	case req.Amount.AmountMinor <= 0 || req.Amount.Currency == "":
		return errors.New("a positive amount and a currency are required")
	case req.PaymentMethod == "":
		return errors.New("payment method is required")
	}
	return nil
}

// createParams is the one request that charges an attempt; Charge and Lookup
// both send it, so a replay carries exactly the first call's parameters.
func createParams(req order.ChargeRequest) *stripego.PaymentIntentParams {
	p := &stripego.PaymentIntentParams{
		Amount:             stripego.Int64(req.Amount.AmountMinor),
		Currency:           stripego.String(strings.ToLower(req.Amount.Currency)),
		PaymentMethod:      stripego.String(req.PaymentMethod),
		PaymentMethodTypes: stripego.StringSlice([]string{"card"}),
		Confirm:            stripego.Bool(true),
		OffSession:         stripego.Bool(true),
		Metadata: map[string]string{
			"order_id":           req.OrderID,
			"attempt_id":         req.AttemptID,
			"merchant_reference": req.MerchantReference,
		},
	}
	// Without this stripe-go would make up a fresh key for every call, and a
	// replay would be a second charge.
	p.SetIdempotencyKey(req.AttemptID)
	return p
}

// exchange is what one create call (stripe-go's retries included) came to.
type exchange struct {
	pi  *stripego.PaymentIntent
	err error
	// connected is true once the transport obtained a connection for any
	// try; before that no byte of the request can have been written.
	connected bool
	// sent counts the tries whose request headers were written.
	sent int
}

// create sends the attempt's create-and-confirm request.
func (g *Gateway) create(ctx context.Context, req order.ChargeRequest) exchange {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	// stripe-go reuses the request, and so this context, for its retries:
	// the trace sees every try. Its hooks run on the transport's goroutines.
	var (
		connected atomic.Bool
		sent      atomic.Int32
	)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { connected.Store(true) },
		WroteHeaders: func() { connected.Store(true); sent.Add(1) },
	})
	params := createParams(req)
	params.Context = ctx
	pi, err := g.intents.New(params)
	return exchange{pi: pi, err: err, connected: connected.Load(), sent: int(sent.Load())}
}
