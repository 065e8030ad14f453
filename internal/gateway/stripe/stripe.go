// Package stripe is the order.Gateway adapter for Stripe. It charges an
// attempt in two steps through stripe-go v76, each with its own idempotency
// key derived from the attempt id: it creates a PaymentIntent unconfirmed,
// which moves no money, then confirms it, which does. Lookup only reads: it
// retrieves the PaymentIntent by id, and proves an attempt uncharged by
// canceling its PaymentIntent. No request Lookup sends can move money.
//
// # The calls
//
// Charge sends, built from the order.ChargeRequest and nothing else, so that
// a replay carries the same parameters:
//
//	POST /v1/payment_intents                  Idempotency-Key: <attempt id>:create
//	  amount=<Stripe units>  currency=<lowercased>  payment_method=<token>
//	  payment_method_types[0]=card  [customer=<cus_...>, for a saved card]
//	  metadata[order_id]  metadata[attempt_id]  metadata[merchant_reference]
//	  [capture_method=manual, for order.CaptureManual (hold.go)]
//	POST /v1/payment_intents/<pi>/confirm     Idempotency-Key: <attempt id>:confirm
//	  [off_session=true, for a merchant-initiated charge]  [return_url]
//	POST /v1/payment_intents/<pi>/cancel      (only for an off-session confirm answered requires_action)
//
// The customer is the attempt's (order.ChargeRequest.Customer, kept with the
// attempt by Settle), so that Lookup's replay of the create sends it again:
// Stripe answers a replay with other parameters with idempotency_error.
// off_session is sent only when the customer is not at the checkout (a
// merchant-initiated charge), and then Stripe declines rather than asks for
// 3-D Secure; payment_method_types=[card] keeps redirect and asynchronous
// ("processing" for days) payment methods out, which
// automatic_payment_methods would let in.
//
// ChargeID is the PaymentIntent's id (pi_...), reported as soon as the
// create answered, with every outcome, unknown included: the charge path
// records it with its settle (no extra commit), and the reconciler hands it
// back in order.ChargeRequest.GatewayChargeID.
//
// # Outcomes of Charge
//
//	Stripe's answer                                      outcome
//	confirm 200, PaymentIntent succeeded                 succeeded
//	confirm 200, requires_action, customer present       requires_action, with the next action
//	confirm 200, requires_action, off-session            canceled, then declined "authentication_required"
//	                                                     (Stripe's own code for such a charge); a cancel
//	                                                     that cannot say: unknown, with that decline code
//	                                                     as a mark (order.Attempt.AwaitsNobody), so that
//	                                                     the reconciler's first lookup cancels it
//	confirm 200, requires_payment_method, canceled       declined (last_payment_error's decline code or
//	                                                     code, else the status)
//	confirm 200, manual capture: requires_capture        succeeded, with the hold (hold.go)
//	confirm 200, processing, requires_capture, other     unknown
//	402 card_error                                       declined (decline_code, else code)
//	400 payment_intent_unexpected_state (first try)      read from the PaymentIntent in the error
//	401, 403, 404 (first try)                            refused: Settle's key or base URL is wrong
//	400 invalid_request_error (first try) about a        refused: Settle sent a request Stripe cannot
//	  parameter (parameter_*, or no code)                accept
//	other 4xx (first try; resource_missing for a         declined "rejected_<code or status>"
//	  payment method, amount_too_small)
//	429 (first try)                                      not_sent: Stripe executed and saved nothing
//	400 idempotency_error (same key, other parameters)   unknown, logged at ERROR (a bug)
//	409 idempotency_key_in_use, 429 or 4xx after a       unknown
//	  retry, 5xx, no answer, an undecodable answer
//	no connection ever obtained (dial refused, DNS)      not_sent
//	an answer about another amount, currency or attempt  unknown
//
// "First try" means the only request of that step written to the wire:
// after one of stripe-go's retries, an earlier try may have executed, and a
// refusal of a later one proves nothing. Every outcome but succeeded and
// declined comes with an error, for logs.
//
// # Lookup
//
// Lookup learns the PaymentIntent's id from order.ChargeRequest.GatewayChargeID,
// or, when Settle never recorded it (the process stopped between the create
// and the settle, or the create's answer was lost), by replaying the
// unconfirmed create with its key: Stripe answers with the saved
// PaymentIntent, or creates it now, unconfirmed, which moves no money. It
// then retrieves the PaymentIntent (GET /v1/payment_intents/<pi>, which
// works past Stripe's 24-hour key retention) and reads its status:
//
//	succeeded                                            succeeded
//	canceled                                             declined "canceled"
//	requires_payment_method after a failed confirm       declined (its decline code)
//	requires_action, before the expiry                   requires_action: the customer may still act
//	requires_confirmation, requires_payment_method       never confirmed: Lookup cancels it; canceled,
//	  without an error, requires_action past the         declined "canceled_unconfirmed" ("requires_action");
//	  expiry or off-session (CancelAwaitingAction)       a cancel refused because it succeeded meanwhile,
//	                                                     succeeded
//	manual capture: requires_capture, succeeded,         succeeded, with the hold: open, captured,
//	  canceled after an authorization                    voided or expired (hold.go)
//	processing, requires_capture                         unknown: money may yet move; ask later
//	an error answer, no answer                           unknown
//
// The cancel is what proves a non-charge: once it is canceled, no confirm
// can charge the PaymentIntent, so a charge request that is still on its
// way can no longer move money. Stripe's Lookup therefore never reports
// order.OutcomeNotFound, and the reconciler's no-show horizon never decides
// a Stripe attempt. Lookup never confirms, and never replays a confirm.
//
// Replaying the create is safe while Stripe still holds its key (24 hours):
// later, the replay would create a second PaymentIntent, and canceling it
// would say nothing about a first one that might have been confirmed. When
// the id is unknown, Lookup replays only while the attempt is younger than
// Config.ReplayWindow (20 hours by default) and otherwise returns an error
// wrapping order.ErrLookupExpired, for a person to resolve. It needs
// order.ChargeRequest.CreatedAt for that. A create whose saved answer is a
// 500 cannot tell the id either; such an attempt goes to review.
//
// # Amounts
//
// Order amounts are in ISO 4217 minor units (order.CurrencyExponent).
// Stripe counts ISK in hundredths of a króna (whole krónur only) and MGA in
// whole ariary, and takes three-decimal currencies (KWD, BHD, JOD, OMR, TND)
// only in multiples of ten; CheckAmount refuses what Stripe cannot carry
// when the order is created, and Charge before anything is sent.
//
// # Retries
//
// stripe-go retries network errors, 409s, lock timeouts and 503s up to
// Config.MaxNetworkRetries times, with the same Idempotency-Key, which Stripe
// deduplicates: a retry never charges twice. Config.Timeout bounds the whole
// call, both steps and retries included.
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

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

const (
	// DefaultBaseURL is Stripe's API.
	DefaultBaseURL = stripego.APIURL
	// DefaultTimeout bounds one call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultReplayWindow is how old an attempt may be for Lookup to replay
	// its create, when its PaymentIntent's id is unknown and
	// Config.ReplayWindow is zero: well inside Stripe's 24 hours.
	DefaultReplayWindow = 20 * time.Hour
	// MaxReplayWindow is the longest ReplayWindow New accepts. Stripe may
	// prune a key once it is 24 hours old; a replay after that would create
	// a second PaymentIntent and could not find the first.
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
	// Timeout bounds each Charge or Lookup, all its requests and stripe-go's
	// retries included, on
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
	// replays its create to learn its PaymentIntent's id. Zero means
	// DefaultReplayWindow; at most MaxReplayWindow.
	ReplayWindow time.Duration
	// Logger receives the adapter's own log lines (an idempotency_error or a
	// refusal of Settle's key at ERROR, because each needs a person) and
	// stripe-go's, scrubbed of the key.
	// Nil means no logging.
	Logger *slog.Logger
	// Now is the clock that ages attempts for the replay window. Nil means
	// time.Now.
	Now func() time.Time
	// Observer is told of every charge, lookup and refund call (telemetry
	// counts, times and traces them). Nil means gateway.Unobserved.
	Observer gateway.Observer
	// WebhookSecrets are the signing secrets (whsec_...) of Settle's
	// webhook endpoint at Stripe, each as CheckWebhookSecret wants it; an
	// event signed with any of them is accepted, so that a secret can be
	// rolled. With none, ReceiveEvents refuses every event.
	WebhookSecrets []string
	// WebhookTolerance bounds how far an event signature's timestamp may
	// lie from now, either way. Zero means DefaultWebhookTolerance.
	WebhookTolerance time.Duration
	// Multicapture asks Stripe, for every manual-capture PaymentIntent, to
	// allow several captures where the card does
	// (payment_method_options[card][request_multicapture]=if_available),
	// and lets Capture send final_capture=false. Set it only for an
	// account Stripe has enabled multicapture for (an IC+ feature); without
	// it a capture that is not final is declined "multicapture_unsupported"
	// before anything is sent. Changing it while attempts are young makes
	// a Lookup's replay of their create an idempotency_error.
	Multicapture bool
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
	obs     gateway.Observer
	// The webhook endpoint's signing secrets and tolerance (events.go).
	webhookSecrets   []string
	webhookTolerance time.Duration
	multicapture     bool
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
	if cfg.Observer == nil {
		cfg.Observer = gateway.Unobserved
	}
	for i, secret := range cfg.WebhookSecrets {
		if err := CheckWebhookSecret(secret); err != nil {
			return nil, fmt.Errorf("stripe: webhook secret %d of %d: %w", i+1, len(cfg.WebhookSecrets), err)
		}
	}
	if cfg.WebhookTolerance < 0 {
		return nil, fmt.Errorf("stripe: webhook tolerance %s must not be negative", cfg.WebhookTolerance)
	}
	if cfg.WebhookTolerance == 0 {
		cfg.WebhookTolerance = DefaultWebhookTolerance
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
		obs:     cfg.Observer,

		webhookSecrets:   cfg.WebhookSecrets,
		webhookTolerance: cfg.WebhookTolerance,
		multicapture:     cfg.Multicapture,
	}, nil
}

// The suffixes of the idempotency keys of an attempt's two steps.
const (
	createKey  = ":create"
	confirmKey = ":confirm"
)

// Charge creates and confirms a PaymentIntent for req (see the package
// documentation). It always reports an outcome, and the PaymentIntent's id
// whenever the create answered; a non-nil error explains an unknown,
// not-sent or refused outcome or a rejection, and is for logs.
func (g *Gateway) Charge(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	amount, err := checkRequest(req)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("stripe: charge %s: %w", req.AttemptID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.charge(ctx, req, amount)
	if err != nil {
		err = fmt.Errorf("stripe: charge %s: %w", req.AttemptID, err)
	}
	return res, err
}

func (g *Gateway) charge(ctx context.Context, req order.ChargeRequest, amount int64) (order.Result, error) {
	created := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := g.createParams(req, amount)
		p.Context = ctx
		return g.intents.New(p)
	})
	if created.err != nil {
		return g.classify(ctx, req, amount, created, "create")
	}
	pi := created.pi
	if err := belongs(req, amount, pi); err != nil {
		return unknown(err)
	}
	confirmed := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := confirmParams(req)
		p.Context = ctx
		return g.intents.Confirm(pi.ID, p)
	})
	var (
		res order.Result
		err error
	)
	if confirmed.err != nil {
		res, err = g.classify(ctx, req, amount, confirmed, "confirm")
	} else if err = belongs(req, amount, confirmed.pi); err != nil {
		res, err = unknown(err)
	} else {
		res, err = g.confirmedOutcome(ctx, req, amount, confirmed.pi)
	}
	// Whatever the confirm came to, the PaymentIntent is known: the settle
	// records its id for the reconciler.
	res.ChargeID = pi.ID
	return res, err
}

// Lookup learns what became of the attempt req without moving money (see
// the package documentation): it returns OutcomeSucceeded or
// OutcomeDeclined, or an error when Stripe cannot say now; the result's
// outcome is then OutcomeUnknown, with the PaymentIntent's id when Lookup
// learned it. Past the replay window, with no id known, the error wraps
// order.ErrLookupExpired.
func (g *Gateway) Lookup(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	amount, err := checkRequest(req)
	if err != nil {
		return order.Result{Outcome: order.OutcomeUnknown}, fmt.Errorf("stripe: lookup %s: %w", req.AttemptID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.lookup(ctx, req, amount)
	if err != nil {
		res.Outcome = order.OutcomeUnknown
		err = fmt.Errorf("stripe: lookup %s: %w", req.AttemptID, err)
	}
	return res, err
}

func (g *Gateway) lookup(ctx context.Context, req order.ChargeRequest, amount int64) (order.Result, error) {
	id := req.GatewayChargeID
	if id == "" {
		// Settle never learned the PaymentIntent's id: the create's answer
		// was lost, or the process stopped before its settle. A replay of
		// the unconfirmed create tells it, and moves no money.
		if req.CreatedAt.IsZero() {
			return unknown(errors.New("the attempt's creation time is required to replay its create inside Stripe's idempotency window"))
		}
		if age := g.now().Sub(req.CreatedAt); age > g.window {
			return unknown(fmt.Errorf("the PaymentIntent's id was never recorded and the attempt is %s old, past the %s replay window "+
				"(Stripe keeps idempotency keys for 24h), so a replay of its create could not find it: %w",
				age.Round(time.Minute), g.window, order.ErrLookupExpired))
		}
		created := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
			p := g.createParams(req, amount)
			p.Context = ctx
			return g.intents.New(p)
		})
		if created.err != nil {
			return g.lookupError(ctx, req.OrderID, slog.String("attempt_id", req.AttemptID), created.err, "replay of the create")
		}
		if err := belongs(req, amount, created.pi); err != nil {
			return unknown(err)
		}
		id = created.pi.ID
	}
	got := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := &stripego.PaymentIntentParams{}
		if req.Capture == order.CaptureManual {
			p.AddExpand("latest_charge")
		}
		p.Context = ctx
		return g.intents.Get(id, p)
	})
	if got.err != nil {
		res, err := g.lookupError(ctx, req.OrderID, slog.String("attempt_id", req.AttemptID), got.err, "retrieve")
		res.ChargeID = id
		return res, err
	}
	if err := belongs(req, amount, got.pi); err != nil {
		return unknown(err)
	}
	res, err := g.settled(ctx, req, amount, got.pi)
	res.ChargeID = id
	return res, err
}

// settled reads a retrieved PaymentIntent, and cancels one that was never
// confirmed (or awaits an action nobody will take) to prove it uncharged.
func (g *Gateway) settled(ctx context.Context, req order.ChargeRequest, amount int64, pi *stripego.PaymentIntent) (order.Result, error) {
	declined := func(code string) (order.Result, error) {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: code}, nil
	}
	if req.Capture == order.CaptureManual {
		if res, ok := g.authorized(pi); ok {
			return res, nil
		}
	}
	code := "canceled_unconfirmed"
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		return order.Result{Outcome: order.OutcomeSucceeded}, nil
	case stripego.PaymentIntentStatusCanceled:
		return declined("canceled")
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if pi.LastPaymentError != nil {
			// A confirm was tried and failed; nothing will confirm it again.
			return declined(declineCode(pi.LastPaymentError, "requires_payment_method"))
		}
	case stripego.PaymentIntentStatusRequiresConfirmation:
	case stripego.PaymentIntentStatusRequiresAction:
		if !req.CancelAwaitingAction {
			// The customer may still complete the challenge: only the
			// expiry cancels it.
			return order.Result{Outcome: order.OutcomeRequiresAction, NextAction: nextAction(pi)}, nil
		}
		code = "requires_action"
	default:
		// processing, requires_capture: money may yet move. Ask later.
		return unknown(fmt.Errorf("PaymentIntent %s is %q", clip(pi.ID), clip(string(pi.Status))))
	}
	return g.cancel(ctx, req, amount, pi, code)
}

// cancel cancels pi, which has not succeeded, so that no confirm can charge
// it any more, and reports what it came to: declined code once canceled;
// succeeded, or the decline, when Stripe refuses because a confirm got
// there first; unknown, with an error, when Stripe cannot say.
func (g *Gateway) cancel(ctx context.Context, req order.ChargeRequest, amount int64, pi *stripego.PaymentIntent, code string) (order.Result, error) {
	declined := func(code string) (order.Result, error) {
		return order.Result{Outcome: order.OutcomeDeclined, DeclineCode: code}, nil
	}
	canceled := g.send(ctx, func(ctx context.Context) (*stripego.PaymentIntent, error) {
		p := &stripego.PaymentIntentCancelParams{CancellationReason: stripego.String(string(stripego.PaymentIntentCancellationReasonAbandoned))}
		p.Context = ctx
		return g.intents.Cancel(pi.ID, p)
	})
	if canceled.err == nil {
		if canceled.pi == nil || canceled.pi.Status != stripego.PaymentIntentStatusCanceled {
			return unknown(fmt.Errorf("the cancel of PaymentIntent %s did not answer a canceled PaymentIntent", clip(pi.ID)))
		}
		return declined(code)
	}
	// A cancel refused because of the intent's status carries the intent:
	// a confirm got there first. Read it, without canceling again.
	var se *stripego.Error
	if errors.As(canceled.err, &se) && se.Code == stripego.ErrorCodePaymentIntentUnexpectedState && se.PaymentIntent != nil {
		if err := belongs(req, amount, se.PaymentIntent); err != nil {
			return unknown(err)
		}
		if req.Capture == order.CaptureManual {
			if res, ok := g.authorized(se.PaymentIntent); ok {
				return res, nil
			}
		}
		switch now := se.PaymentIntent; {
		case now.Status == stripego.PaymentIntentStatusSucceeded:
			return order.Result{Outcome: order.OutcomeSucceeded}, nil
		case now.Status == stripego.PaymentIntentStatusCanceled:
			return declined(code)
		case now.Status == stripego.PaymentIntentStatusRequiresPaymentMethod && now.LastPaymentError != nil:
			return declined(declineCode(now.LastPaymentError, "requires_payment_method"))
		default:
			return unknown(fmt.Errorf("PaymentIntent %s could not be canceled: it is %q", clip(pi.ID), clip(string(now.Status))))
		}
	}
	return g.lookupError(ctx, req.OrderID, slog.String("attempt_id", req.AttemptID), canceled.err, "cancel")
}

// CheckAmount refuses an amount Stripe cannot charge (see the package
// documentation); it implements order.AmountChecker.
func (g *Gateway) CheckAmount(m order.Money) error {
	_, err := stripeAmount(m)
	return err
}

// stripeAmount converts an order amount, in ISO 4217 minor units, into the
// units Stripe counts that currency in, and refuses what Stripe cannot
// carry, as a *order.ValidationError.
func stripeAmount(m order.Money) (int64, error) {
	exp, ok := order.CurrencyExponent(m.Currency)
	invalid := func(reason string) (int64, error) {
		return 0, &order.ValidationError{Field: "amount.amount_minor", Reason: reason}
	}
	switch {
	case !ok:
		return 0, &order.ValidationError{Field: "amount.currency", Reason: "must be an ISO 4217 currency code such as GBP"}
	case m.Currency == "ISK":
		// Zero-decimal in ISO 4217; Stripe keeps two decimals for it and
		// takes whole krónur only.
		return m.AmountMinor * 100, nil
	case m.Currency == "MGA":
		// Two decimals in ISO 4217; zero-decimal at Stripe.
		if m.AmountMinor%100 != 0 {
			return invalid("must be whole ariary (a multiple of 100 minor units) for Stripe")
		}
		return m.AmountMinor / 100, nil
	case exp == 3 && m.AmountMinor%10 != 0:
		return invalid("must be a multiple of 10 in a three-decimal currency: Stripe charges them to two decimals")
	case exp == order.NoMinorUnit || exp > 3:
		return 0, &order.ValidationError{Field: "amount.currency", Reason: "is not a currency Stripe charges in"}
	}
	return m.AmountMinor, nil
}

// checkRequest refuses what Stripe would refuse before anything is sent,
// and returns the amount in Stripe's units.
func checkRequest(req order.ChargeRequest) (int64, error) {
	switch {
	case req.AttemptID == "":
		return 0, errors.New("attempt id is required")
	case len(req.AttemptID)+len(confirmKey) > 255:
		return 0, errors.New("attempt id is too long for Stripe's 255-character idempotency keys")
	case req.Amount.AmountMinor <= 0 || req.Amount.Currency == "":
		return 0, errors.New("a positive amount and a currency are required")
	case req.PaymentMethod == "":
		return 0, errors.New("payment method is required")
	}
	return stripeAmount(req.Amount)
}

// createParams is the create of an attempt's PaymentIntent, unconfirmed;
// Charge and Lookup both send it, so a replay carries exactly the first
// call's parameters.
func (g *Gateway) createParams(req order.ChargeRequest, amount int64) *stripego.PaymentIntentParams {
	p := &stripego.PaymentIntentParams{
		Amount:             stripego.Int64(amount),
		Currency:           stripego.String(strings.ToLower(req.Amount.Currency)),
		PaymentMethod:      stripego.String(req.PaymentMethod),
		PaymentMethodTypes: stripego.StringSlice([]string{"card"}),
		Metadata: map[string]string{
			"order_id":           req.OrderID,
			"attempt_id":         req.AttemptID,
			"merchant_reference": req.MerchantReference,
		},
	}
	if req.Customer != "" {
		// A saved card is used with the Customer it is attached to. The
		// attempt keeps the customer, so that Lookup's replay sends it too.
		p.Customer = stripego.String(req.Customer)
	}
	if req.Capture == order.CaptureManual {
		// The confirm only authorizes; Capture takes the money (hold.go).
		p.CaptureMethod = stripego.String(string(stripego.PaymentIntentCaptureMethodManual))
		if g.multicapture {
			p.PaymentMethodOptions = &stripego.PaymentIntentPaymentMethodOptionsParams{
				Card: &stripego.PaymentIntentPaymentMethodOptionsCardParams{
					RequestMulticapture: stripego.String(string(stripego.PaymentIntentPaymentMethodOptionsCardRequestMulticaptureIfAvailable)),
				},
			}
		}
	}
	// Without this stripe-go would make up a fresh key for every call, and a
	// replay would create a second PaymentIntent.
	p.SetIdempotencyKey(req.AttemptID + createKey)
	return p
}

// confirmParams is the confirm of an attempt's PaymentIntent: the one
// request that moves money. Only Charge sends it.
func confirmParams(req order.ChargeRequest) *stripego.PaymentIntentConfirmParams {
	p := &stripego.PaymentIntentConfirmParams{}
	if !req.CustomerPresent {
		// A merchant-initiated charge: Stripe declines rather than asks a
		// customer who is not there to authenticate.
		p.OffSession = stripego.Bool(true)
	}
	if req.ReturnURL != "" {
		p.ReturnURL = stripego.String(req.ReturnURL)
	}
	if req.Capture == order.CaptureManual {
		// The charge carries the hold's capture_before.
		p.AddExpand("latest_charge")
	}
	p.SetIdempotencyKey(req.AttemptID + confirmKey)
	return p
}

// exchange is what one request (stripe-go's retries included) came to.
type exchange struct {
	pi  *stripego.PaymentIntent
	err error
	// connected is true once the transport obtained a connection for any
	// try; before that no byte of the request can have been written.
	connected bool
	// sent counts the tries whose request headers were written.
	sent int
}

// send makes one request through call, tracing its tries.
func (g *Gateway) send(ctx context.Context, call func(context.Context) (*stripego.PaymentIntent, error)) exchange {
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
	pi, err := call(ctx)
	return exchange{pi: pi, err: err, connected: connected.Load(), sent: int(sent.Load())}
}
