// Package adyen is the order.Gateway adapter for Adyen's Checkout API (v71),
// over net/http. Adyen honours idempotency keys but has no call that reads
// a payment's status: what became of a payment, a capture, a cancel or a
// refund arrives as an HMAC-signed notification. ReceiveEvents verifies
// and reads them (events.go); Settle records them, and every lookup of
// this adapter answers from what was recorded (Config.Events), never by
// resending a payment.
//
// Every payment is authorized with manual capture
// (additionalData.manualCapture "true"), so that a payment whose answer
// was lost is only a possible hold, which a technical cancel by Settle's
// own reference ends. An order with order.CaptureAutomatic is captured by
// the adapter at once, in the same call.
//
// # The calls
//
//	POST /payments                           Idempotency-Key: <attempt id>
//	  merchantAccount  reference=<attempt id>  amount{value, currency} (Adyen's minor units)
//	  paymentMethod{type=scheme, storedPaymentMethodId=<token>}
//	  shopperReference=<customer, or the order id>  returnUrl
//	  shopperInteraction=Ecommerce, recurringProcessingModel=CardOnFile       (customer present)
//	  shopperInteraction=ContAuth, recurringProcessingModel=UnscheduledCardOnFile (merchant-initiated)
//	  additionalData{manualCapture=true}
//	POST /payments/details                   Idempotency-Key: <attempt id>:details
//	  details{redirectResult}                (CompleteAction: the shopper's return from 3-D Secure)
//	POST /payments/<psp>/captures            Idempotency-Key: <attempt id>:capture
//	  amount (all of it)  reference=<attempt id>:capture   (an automatic order, at once)
//	POST /cancels                            Idempotency-Key: <attempt id>:cancel
//	  paymentReference=<attempt id>  reference=<attempt id>:cancel   (the technical cancel)
//	POST /payments/<psp>/cancels             Idempotency-Key: <attempt id>:release
//	  reference=<attempt id>:release         (a partial authorization, released)
//
// Captures, cancels and refunds of order.Capturer and order.Refunder are
// in modify.go. A notification about a derived call names its reference
// ("<attempt id>:capture"); ReceiveEvents reports it about the attempt.
//
// # Outcomes of Charge (and CompleteAction)
//
//	Adyen's answer                                outcome
//	200 Authorised, manual capture                succeeded, with an open hold of the whole amount;
//	                                              capture_before = the attempt's creation +
//	                                              Config.AuthorizationLifetime (Adyen does not say)
//	200 Authorised, automatic capture             the capture at once: "received" succeeded; any
//	                                              other answer unknown, with the pspReference as
//	                                              ChargeID (Lookup replays the capture)
//	200 PartiallyAuthorised                       declined "partially_authorised" (Settle never asks
//	                                              for a partial authorization); the part held is
//	                                              released by a cancel, and is never captured
//	200 Refused                                   declined, the code from refusalReasonCode (38:
//	                                              "authentication_required"), else refusalReason
//	200 Error                                     declined "error": a final state, nothing authorized
//	200 Cancelled                                 declined "cancelled"
//	200 RedirectShopper, ChallengeShopper,        requires_action, NextAction.RedirectURL = action.url
//	  IdentifyShopper, customer present           (no url: unknown)
//	  the same, merchant-initiated                the technical cancel: once received, declined
//	                                              "authentication_required" (nobody can act; nothing
//	                                              is captured); not received, unknown with that code
//	                                              as a mark (order.Attempt.AwaitsNobody)
//	200 Pending, Received, any other resultCode   unknown: the notification will say
//	200 that is not about the attempt (reference, unknown
//	  amount) or cannot be read
//	400, 404; 401, 403; 422 validation            refused: Adyen processed nothing (Settle's key,
//	                                              account or request is wrong)
//	409, or 422 errorCode 704 ("request already   unknown: an earlier request with the key is in
//	  processed or in progress")                  flight
//	429, 5xx, no answer, a timeout                unknown
//	no connection ever obtained (dial refused)    not_sent
//
// Only succeeded and declined come without an error. ChargeID is the
// payment's pspReference whenever Adyen gave one.
//
// # Lookup
//
// Lookup reads the notifications recorded about the attempt
// (order.EventLog.GatewayEventsAbout by the attempt id), in this order:
//
//	TECHNICAL_CANCEL success=true             not found: no hold remains, nothing moved (beside a
//	                                          CAPTURE of it: unknown, a person decides)
//	AUTHORISATION success=true for less than  declined "partially_authorised" (released again)
//	  the amount
//	AUTHORISATION success=true, manual        succeeded, with the hold: open, or expired after an
//	                                          EXPIRE notification
//	EXPIRE success=true alone, manual         succeeded, the hold expired (its AUTHORISATION lost)
//	CAPTURE success=true about the attempt,   succeeded (the AUTHORISATION may be lost)
//	  automatic
//	AUTHORISATION success=true, automatic:
//	  CAPTURE_FAILED, CAPTURE success=false   unknown, with an error: held, not taken; a person
//	  no capture notification, the attempt    the capture replayed under its key: "received"
//	    younger than Config.NoShowHorizon     succeeded
//	  no capture notification, older          the technical cancel, unknown (never captured
//	                                          past the horizon)
//	AUTHORISATION success=true, either mode,  the technical cancel, unknown: once Settle may have
//	  CancelAwaitingAction (the challenge     sent it, it never captures or holds the attempt
//	  expired, or it waits for nobody)
//	AUTHORISATION success=false               declined (its reason)
//	nothing, and Settle holds the attempt as  requires_action: the shopper has not acted yet; an
//	  waiting for the shopper, not expired    authorisation that comes later is captured
//	  (AwaitingAction, not                    whatever the attempt's age, since no technical
//	  CancelAwaitingAction)                   cancel is ever sent for such an attempt
//	nothing, younger than the horizon and     unknown, with order.ErrNotYetKnown: the request may
//	  not CancelAwaitingAction                still reach Adyen; the reconciler waits for the
//	                                          horizon, or for a notification, which makes the
//	                                          attempt due, and counts no failed check
//	nothing, older, or CancelAwaitingAction   the technical cancel (POST /cancels by the attempt
//	                                          id, under its key), unknown until TECHNICAL_CANCEL
//
// A Lookup never sends a payment. What it sends (a capture of an amount
// Adyen authorized, under the key Charge used; a cancel) cannot charge
// twice. Past the horizon no request of the attempt can still arrive, so
// a TECHNICAL_CANCEL that succeeded proves that nothing will be taken.
// Lookup reports a hold as the attempt's own notifications have it (open,
// or expired); what captures and voids made of it their own lookups say.
//
// Lookup tells an attempt that waits for the shopper from one whose answer
// was lost by ChargeRequest.AwaitingAction (Settle holds it as
// REQUIRES_ACTION): a 3-D Secure challenge is ended by the technical
// cancel only once it expires (CancelAwaitingAction). One limit of
// answering from notifications: an AUTHORISATION of a manual-capture
// attempt that arrives after the technical cancel was sent is reported as
// a hold until the TECHNICAL_CANCEL arrives.
//
// # Amounts
//
// Order amounts are in ISO 4217 minor units (order.CurrencyExponent).
// Adyen counts CLP and ISK in hundredths (ISO: no decimals) and CVE and
// IDR in whole units (ISO: two decimals); CheckAmount refuses what Adyen
// cannot carry (CVE and IDR amounts that are not whole, currencies
// without a minor unit or with four decimals) when the order is created,
// and Charge before anything is sent.
//
// # The audit's listings
//
// Adyen has no API that lists payments: the audit's listing
// (order.ChargeLister) reads the account's daily Payment accounting
// reports, downloaded as the report user (report.go says which report,
// why, and how it is read).
//
// The API key, the HMAC keys and the report user's password never appear
// in errors or logs.
package adyen

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

const (
	// TestBaseURL is Adyen's test Checkout API, v71.
	TestBaseURL = "https://checkout-test.adyen.com/v71"
	// DefaultName is Config.Name when it is empty: the gateway's name in
	// Settle.
	DefaultName = "adyen"
	// DefaultTimeout bounds one call when Config.Timeout is zero.
	DefaultTimeout = 10 * time.Second
	// DefaultAuthorizationLifetime is Config.AuthorizationLifetime when it
	// is zero: a card authorization's shortest usual validity.
	DefaultAuthorizationLifetime = 7 * 24 * time.Hour
	// DefaultReturnURL is the returnUrl of a merchant-initiated charge
	// that names none, when Config.ReturnURL is empty. Adyen requires one
	// on every payment but never redirects a shopper who is not there;
	// .invalid never resolves (RFC 2606).
	DefaultReturnURL = "https://return.invalid/"

	// apiVersion is the last element of the base URL's path: the
	// Checkout API version the adapter speaks.
	apiVersion = "v71"
	// maxBody is the most of a response body the adapter reads.
	maxBody = 1 << 20
	// maxKeyLen is Adyen's limit on an Idempotency-Key, and maxSuffix the
	// longest suffix the adapter adds to an id for a derived call's key.
	maxKeyLen = 64
	maxSuffix = len(":release")
	// minHMACKeyLen is the fewest bytes an HMAC key may have (Adyen's
	// have 32).
	minHMACKeyLen = 16
)

// The suffixes of the keys and references of an attempt's derived calls.
const (
	detailsSuffix = ":details"
	captureSuffix = ":capture"
	cancelSuffix  = ":cancel"
	releaseSuffix = ":release"
)

// LiveBaseURL is the live Checkout API, v71, of the account whose live URL
// prefix (Customer Area, Developers, API URLs) is prefix.
func LiveBaseURL(prefix string) string {
	return "https://" + prefix + "-checkout-live.adyenpayments.com/checkout/" + apiVersion
}

// Config configures a Gateway.
type Config struct {
	// BaseURL is the Checkout API's address, ending in /v71: TestBaseURL
	// (the default when empty) or LiveBaseURL(prefix). It must be https,
	// except on a loopback address (a fake in tests).
	BaseURL string
	// APIKey is sent as X-API-Key. It never appears in errors or logs.
	APIKey string
	// MerchantAccount is the merchant account every payment is made on.
	MerchantAccount string
	// HMACKeys are the notifications' HMAC keys, in hexadecimal as the
	// Customer Area shows them; a notification signed with any of them is
	// accepted, so that a key can be rotated. With none, ReceiveEvents
	// refuses every notification.
	HMACKeys []string
	// NotifyUser and NotifyPassword, when set (both or neither), are the
	// basic authentication Adyen sends with every notification.
	NotifyUser, NotifyPassword string
	// Timeout bounds each call, all its requests included, on top of any
	// deadline of the caller's context. Zero means DefaultTimeout.
	Timeout time.Duration
	// Observer is told of every call. Nil means gateway.Unobserved.
	Observer gateway.Observer
	// Events reads the verified notifications Settle recorded: every
	// lookup answers from them. Required.
	Events order.EventLog
	// NoShowHorizon is the age past which a payment request of an attempt
	// can no longer reach Adyen (at least the reconciler's horizon, and
	// more than Timeout): past it, a lookup that found no verdict
	// technical-cancels the attempt, and the adapter never captures it.
	// Required.
	NoShowHorizon time.Duration
	// AuthorizationLifetime is how long after an attempt began its hold
	// is taken to last (Hold.CaptureBefore), since Adyen does not say.
	// Zero means DefaultAuthorizationLifetime.
	AuthorizationLifetime time.Duration
	// ReturnURL is sent as returnUrl for a charge that names none.
	// Empty means DefaultReturnURL.
	ReturnURL string
	// Name is the gateway's name in Settle, under which its notifications
	// are recorded. Empty means DefaultName.
	Name string
	// HTTPClient sends the requests. Nil means a client with its own
	// transport. The Gateway uses a copy that never follows redirects.
	HTTPClient *http.Client
	// Now is the clock that ages attempts against the horizon. Nil means
	// time.Now.
	Now func() time.Time

	// The reports, which the audit's listings read (report.go).
	//
	// ReportURL is the Customer Area's report folder of the merchant
	// account, https://ca-live.adyen.com/reports/download/MerchantAccount/<account>.
	// Empty means the test or live Customer Area's, after BaseURL (or,
	// for a fake on a loopback address, the fake's own).
	ReportURL string
	// ReportUser and ReportPassword, when set (both or neither), are the
	// report user's basic authentication (report@Company.<company>);
	// otherwise reports are downloaded with X-API-Key ReportAPIKey, or
	// APIKey when that is empty (an API credential with the report
	// download role). They never appear in errors or logs.
	ReportUser, ReportPassword string
	ReportAPIKey               string
	// ReportTimeZone is the account's time zone setting (Customer Area,
	// Account, Settings), in which Adyen books the reports' rows and cuts
	// its days. Nil means UTC.
	ReportTimeZone *time.Location
	// ReportTimeout bounds one report's download. Zero means
	// DefaultReportTimeout.
	ReportTimeout time.Duration
}

// Gateway charges payment methods through Adyen's Checkout API. It
// implements order.Gateway, order.Capturer, order.Refunder,
// order.AmountChecker, order.ActionCompleter and, from Adyen's reports,
// order.ChargeLister, and is safe for concurrent use.
type Gateway struct {
	base                       string
	apiKey                     string
	merchant                   string
	hmacKeys                   [][]byte
	notifyUser, notifyPassword string
	timeout                    time.Duration
	horizon                    time.Duration
	lifetime                   time.Duration
	returnURL                  string
	name                       string
	obs                        gateway.Observer
	events                     order.EventLog
	http                       *http.Client
	now                        func() time.Time
	// The reports' folder, credentials, time zone and timeout.
	reportURL, reportUser, reportPassword, reportKey string
	reportZone                                       *time.Location
	reportTimeout                                    time.Duration
}

var (
	_ order.Gateway         = (*Gateway)(nil)
	_ order.Capturer        = (*Gateway)(nil)
	_ order.Refunder        = (*Gateway)(nil)
	_ order.AmountChecker   = (*Gateway)(nil)
	_ order.ActionCompleter = (*Gateway)(nil)
)

// New returns a Gateway for cfg, or an error saying what in cfg is wrong.
// The error never holds a secret.
func New(cfg Config) (*Gateway, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = TestBaseURL
	}
	base, err := checkBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if err := checkToken("API key", cfg.APIKey); err != nil {
		return nil, err
	}
	if err := checkToken("merchant account", cfg.MerchantAccount); err != nil {
		return nil, err
	}
	keys := make([][]byte, 0, len(cfg.HMACKeys))
	for i, k := range cfg.HMACKeys {
		key, err := CheckHMACKey(k)
		if err != nil {
			return nil, fmt.Errorf("adyen: HMAC key %d of %d: %w", i+1, len(cfg.HMACKeys), err)
		}
		keys = append(keys, key)
	}
	if (cfg.NotifyUser == "") != (cfg.NotifyPassword == "") {
		return nil, errors.New("adyen: the notifications' basic authentication needs both a user and a password, or neither")
	}
	if strings.Contains(cfg.NotifyUser, ":") {
		return nil, errors.New("adyen: the notifications' basic authentication user must not contain a colon")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("adyen: timeout %s must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Events == nil {
		return nil, errors.New("adyen: the recorded notifications (Events) are required: Adyen has no status read, and lookups answer from them")
	}
	if cfg.NoShowHorizon <= cfg.Timeout {
		return nil, fmt.Errorf("adyen: no-show horizon %s must exceed the timeout %s: a payment request can arrive until its call times out",
			cfg.NoShowHorizon, cfg.Timeout)
	}
	if cfg.AuthorizationLifetime < 0 {
		return nil, fmt.Errorf("adyen: authorization lifetime %s must not be negative", cfg.AuthorizationLifetime)
	}
	if cfg.AuthorizationLifetime == 0 {
		cfg.AuthorizationLifetime = DefaultAuthorizationLifetime
	}
	if cfg.ReturnURL == "" {
		cfg.ReturnURL = DefaultReturnURL
	}
	if u, err := url.Parse(cfg.ReturnURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("adyen: return URL must be an absolute http or https URL")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Observer == nil {
		cfg.Observer = gateway.Unobserved
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ReportURL == "" {
		cfg.ReportURL = reportFolder(base, cfg.MerchantAccount)
	}
	reportURL, err := checkReportURL(cfg.ReportURL)
	if err != nil {
		return nil, err
	}
	if (cfg.ReportUser == "") != (cfg.ReportPassword == "") {
		return nil, errors.New("adyen: the report user's basic authentication needs both a user and a password, or neither")
	}
	if strings.Contains(cfg.ReportUser, ":") {
		return nil, errors.New("adyen: the report user must not contain a colon")
	}
	if cfg.ReportAPIKey == "" {
		cfg.ReportAPIKey = cfg.APIKey
	}
	if err := checkToken("report API key", cfg.ReportAPIKey); err != nil {
		return nil, err
	}
	if cfg.ReportTimeZone == nil {
		cfg.ReportTimeZone = time.UTC
	}
	if cfg.ReportTimeout < 0 {
		return nil, fmt.Errorf("adyen: report timeout %s must not be negative", cfg.ReportTimeout)
	}
	if cfg.ReportTimeout == 0 {
		cfg.ReportTimeout = DefaultReportTimeout
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	} else {
		hc.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// A redirect is no answer of the API; it is reported as what it is.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Gateway{
		base: strings.TrimSuffix(base.String(), "/"), apiKey: cfg.APIKey, merchant: cfg.MerchantAccount,
		hmacKeys: keys, notifyUser: cfg.NotifyUser, notifyPassword: cfg.NotifyPassword,
		timeout: cfg.Timeout, horizon: cfg.NoShowHorizon, lifetime: cfg.AuthorizationLifetime,
		returnURL: cfg.ReturnURL, name: cfg.Name, obs: cfg.Observer, events: cfg.Events, http: &hc, now: cfg.Now,
		reportURL: reportURL, reportUser: cfg.ReportUser, reportPassword: cfg.ReportPassword, reportKey: cfg.ReportAPIKey,
		reportZone: cfg.ReportTimeZone, reportTimeout: cfg.ReportTimeout,
	}, nil
}

// checkBaseURL parses the base URL: https (http only on a loopback
// address), no credentials, its path ending in the API version.
func checkBaseURL(s string) (*url.URL, error) {
	base, err := url.Parse(s)
	if err != nil {
		// The *url.Error would quote the whole URL.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("adyen: base URL does not parse: %w", err)
	}
	switch {
	case base.Host == "" || (base.Scheme != "https" && base.Scheme != "http"):
		return nil, fmt.Errorf("adyen: base URL %q must be an absolute https URL such as %s", base.Redacted(), TestBaseURL)
	case base.Scheme == "http" && !loopback(base.Hostname()):
		return nil, fmt.Errorf("adyen: base URL %q must be https (plain http only on a loopback address)", base.Redacted())
	case base.User != nil:
		return nil, fmt.Errorf("adyen: base URL %q must not carry credentials", base.Redacted())
	case base.RawQuery != "" || base.Fragment != "":
		return nil, fmt.Errorf("adyen: base URL %q must have no query or fragment", base.Redacted())
	case !strings.HasSuffix(strings.TrimSuffix(base.Path, "/"), "/"+apiVersion):
		return nil, fmt.Errorf("adyen: base URL %q must end in /%s, the Checkout API version this adapter speaks", base.Redacted(), apiVersion)
	}
	return base, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkToken refuses an empty value, or one with spaces or control
// characters, without quoting it.
func checkToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("adyen: %s is required", what)
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("adyen: %s must not contain spaces, line breaks or control characters", what)
		}
	}
	return nil
}

// CheckHMACKey returns the bytes of an HMAC key as the Customer Area shows
// it (hexadecimal), or why it is not one. The error never holds the key.
func CheckHMACKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(s)
	switch {
	case s == "":
		return nil, errors.New("is empty")
	case err != nil:
		return nil, errors.New("is not hexadecimal (the Customer Area shows HMAC keys as 64 hexadecimal digits)")
	case len(key) < minHMACKeyLen:
		return nil, fmt.Errorf("has %d hexadecimal digits; Adyen's have 64, and at least %d are required", len(s), 2*minHMACKeyLen)
	}
	return key, nil
}

// Charge makes the attempt's payment (see the package documentation). It
// always reports an outcome; a non-nil error explains any but a success
// or a decline, and is for logs.
func (g *Gateway) Charge(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	value, err := checkCharge(req)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: charge %s: %w", req.AttemptID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	ex, err := g.post(ctx, "/payments", req.AttemptID, g.paymentBody(req, value))
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: charge %s: %w", req.AttemptID, err)
	}
	res, err = g.answer(ctx, req, value, ex, "payment")
	if err != nil {
		err = fmt.Errorf("adyen: charge %s: %w", req.AttemptID, err)
	}
	return res, err
}

// CompleteAction sends the shopper's return from a redirect (3-D Secure)
// for the attempt req, with the redirectResult Adyen appended to the
// return URL, and reports what the payment came to as Charge does
// (capturing an automatic order at once while it is younger than the
// no-show horizon, or while Settle holds it as waiting for the shopper,
// for which no technical cancel is sent). It implements
// order.ActionCompleter: a replay sends the same key, and Adyen answers
// it with its first answer. It is observed as a charge.
func (g *Gateway) CompleteAction(ctx context.Context, req order.ChargeRequest, redirectResult string) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	value, err := checkCharge(req)
	if err == nil && (redirectResult == "" || len(redirectResult) > order.MaxActionResultLen) {
		err = fmt.Errorf("a redirectResult of at most %d characters is required", order.MaxActionResultLen)
	}
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: payment details %s: %w", req.AttemptID, err)
	}
	// The shopper is back: an action still asked for is theirs to take.
	req.CustomerPresent = true
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	body := detailsRequest{Details: map[string]string{"redirectResult": redirectResult}}
	ex, err := g.post(ctx, "/payments/details", req.AttemptID+detailsSuffix, body)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("adyen: payment details %s: %w", req.AttemptID, err)
	}
	res, err = g.answer(ctx, req, value, ex, "payment details")
	if err != nil {
		err = fmt.Errorf("adyen: payment details %s: %w", req.AttemptID, err)
	}
	return res, err
}

// Lookup says what became of the attempt req from the notifications
// recorded about it (see the package documentation): OutcomeSucceeded,
// OutcomeDeclined or OutcomeNotFound, or an error while they cannot say;
// the result's outcome is then OutcomeUnknown, with the pspReference when
// it is known.
func (g *Gateway) Lookup(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	value, err := checkCharge(req)
	if err == nil && req.CreatedAt.IsZero() {
		err = errors.New("the attempt's creation time is required to age it against the no-show horizon")
	}
	if err != nil {
		return order.Result{Outcome: order.OutcomeUnknown}, fmt.Errorf("adyen: lookup %s: %w", req.AttemptID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err = g.lookup(ctx, req, value)
	if err != nil {
		res.Outcome = order.OutcomeUnknown
		err = fmt.Errorf("adyen: lookup %s: %w", req.AttemptID, err)
	}
	return res, err
}

func (g *Gateway) lookup(ctx context.Context, req order.ChargeRequest, value int64) (order.Result, error) {
	evs, err := g.events.GatewayEventsAbout(ctx, g.name, req.AttemptID)
	if err != nil {
		return unknown(fmt.Errorf("read the attempt's notifications: %w", err))
	}
	v := judgeAttempt(evs, req.Amount)
	psp := v.psp
	if psp == "" {
		psp = req.GatewayChargeID
	}
	past := g.pastHorizon(req)
	// An attempt Settle holds as waiting for the shopper, not yet expired:
	// no technical cancel is ever sent for it, so an authorisation that
	// comes late is captured, and silence means the shopper has not acted.
	awaiting := waitsForShopper(req)
	switch {
	case v.techCanceled && v.captured:
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
			errors.New("the notifications report the payment both captured and technically canceled: a person decides")
	case v.techCanceled:
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	case v.partial:
		return g.declinePartial(ctx, req, psp)
	case (v.authorized || v.expired) && req.Capture == order.CaptureManual && !req.CancelAwaitingAction:
		// An EXPIRE proves the hold it ends, its AUTHORISATION lost or not.
		h := g.openHold(req)
		if v.expired {
			h.State = order.HoldExpired
		}
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: psp, Hold: h}, nil
	case v.captured && req.Capture != order.CaptureManual:
		// The money moved, whether or not the AUTHORISATION arrived.
		return order.Result{Outcome: order.OutcomeSucceeded, ChargeID: psp}, nil
	case v.authorized && v.captureFailed:
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
			errors.New("authorized, but its capture failed: the amount is held, not taken; a person decides")
	case v.authorized && !req.CancelAwaitingAction && (!past || awaiting):
		// Never once the technical cancel may have been sent: past the
		// horizon (unless the attempt waits for the shopper), or for an
		// attempt that expired or waits for nobody.
		return g.capture(ctx, req, value, psp)
	case v.declined != "":
		return order.Result{Outcome: order.OutcomeDeclined, ChargeID: psp, DeclineCode: v.declined}, nil
	case awaiting:
		return order.Result{Outcome: order.OutcomeRequiresAction, ChargeID: psp}, nil
	case !past && !req.CancelAwaitingAction:
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
			fmt.Errorf("no notification about the attempt yet, and its payment request may still reach Adyen: %w", order.ErrNotYetKnown)
	}
	why := "no verdict about the attempt past the no-show horizon"
	switch {
	case req.CancelAwaitingAction:
		why = "the attempt expired or waits for nobody"
	case v.authorized:
		why = "authorized but not captured past the no-show horizon"
	}
	if err := g.technicalCancel(ctx, req); err != nil {
		return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp}, fmt.Errorf("%s; the technical cancel: %w", why, err)
	}
	return order.Result{Outcome: order.OutcomeUnknown, ChargeID: psp},
		fmt.Errorf("%s: technical cancel sent, waiting for its TECHNICAL_CANCEL notification", why)
}

// waitsForShopper reports whether Settle holds req's attempt as waiting
// for the shopper, not expired: no technical cancel is sent for it.
func waitsForShopper(req order.ChargeRequest) bool {
	return req.AwaitingAction && !req.CancelAwaitingAction
}

// pastHorizon reports whether the attempt is older than the no-show
// horizon: no payment request of it can reach Adyen any more.
func (g *Gateway) pastHorizon(req order.ChargeRequest) bool {
	return !req.CreatedAt.IsZero() && g.now().Sub(req.CreatedAt) > g.horizon
}

// openHold is the hold of an authorization of req that nothing has
// touched yet.
func (g *Gateway) openHold(req order.ChargeRequest) *order.Hold {
	start := req.CreatedAt
	if start.IsZero() {
		start = g.now()
	}
	return &order.Hold{State: order.HoldOpen, AuthorizedMinor: req.Amount.AmountMinor, CaptureBefore: start.Add(g.lifetime)}
}

// CheckAmount refuses an amount Adyen cannot carry (see the package
// documentation); it implements order.AmountChecker.
func (g *Gateway) CheckAmount(m order.Money) error {
	_, err := adyenValue(m)
	return err
}

// adyenValue converts an order amount, in ISO 4217 minor units, into the
// minor units Adyen counts that currency in, and refuses what Adyen
// cannot carry, as a *order.ValidationError.
func adyenValue(m order.Money) (int64, error) {
	exp, ok := order.CurrencyExponent(m.Currency)
	switch {
	case !ok:
		return 0, &order.ValidationError{Field: "amount.currency", Reason: "must be an ISO 4217 currency code such as GBP"}
	case exp == order.NoMinorUnit || exp > 3:
		return 0, &order.ValidationError{Field: "amount.currency", Reason: "is not a currency Adyen charges in"}
	}
	switch m.Currency {
	case "CLP", "ISK":
		// No decimals in ISO 4217; two at Adyen.
		return m.AmountMinor * 100, nil
	case "CVE", "IDR":
		// Two decimals in ISO 4217; none at Adyen.
		if m.AmountMinor%100 != 0 {
			return 0, &order.ValidationError{Field: "amount.amount_minor",
				Reason: "must be a whole number of units (a multiple of 100 minor units): Adyen charges " + m.Currency + " without decimals"}
		}
		return m.AmountMinor / 100, nil
	}
	return m.AmountMinor, nil
}

// minorAmount converts an amount in Adyen's minor units of currency back
// into ISO 4217 minor units.
func minorAmount(currency string, value int64) int64 {
	switch currency {
	case "CLP", "ISK":
		return value / 100
	case "CVE", "IDR":
		return value * 100
	}
	return value
}

// checkCharge refuses what Adyen would refuse before anything is sent,
// and returns the amount in Adyen's units.
func checkCharge(req order.ChargeRequest) (int64, error) {
	switch {
	case req.AttemptID == "":
		return 0, errors.New("attempt id is required")
	case len(req.AttemptID)+maxSuffix > maxKeyLen:
		return 0, fmt.Errorf("attempt id is too long for Adyen's %d-character idempotency keys", maxKeyLen)
	case req.Amount.AmountMinor <= 0 || req.Amount.Currency == "":
		return 0, errors.New("a positive amount and a currency are required")
	case req.PaymentMethod == "":
		return 0, errors.New("payment method is required")
	}
	return adyenValue(req.Amount)
}

// The requests and answers of the Checkout API, as far as Settle uses
// them.
type (
	amount struct {
		Currency string `json:"currency"`
		Value    int64  `json:"value"`
	}
	paymentMethod struct {
		Type                  string `json:"type"`
		StoredPaymentMethodID string `json:"storedPaymentMethodId"`
	}
	paymentRequest struct {
		MerchantAccount          string            `json:"merchantAccount"`
		Reference                string            `json:"reference"`
		Amount                   amount            `json:"amount"`
		PaymentMethod            paymentMethod     `json:"paymentMethod"`
		ShopperReference         string            `json:"shopperReference"`
		ShopperInteraction       string            `json:"shopperInteraction"`
		RecurringProcessingModel string            `json:"recurringProcessingModel"`
		ReturnURL                string            `json:"returnUrl"`
		AdditionalData           map[string]string `json:"additionalData"`
	}
	detailsRequest struct {
		Details map[string]string `json:"details"`
	}
	// paymentResponse is the answer of /payments and /payments/details.
	paymentResponse struct {
		PSPReference      string  `json:"pspReference"`
		ResultCode        string  `json:"resultCode"`
		MerchantReference string  `json:"merchantReference"`
		Amount            *amount `json:"amount"`
		RefusalReason     string  `json:"refusalReason"`
		RefusalReasonCode string  `json:"refusalReasonCode"`
		Action            *struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"action"`
	}
	// serviceError is the body of an error answer.
	serviceError struct {
		Status       int    `json:"status"`
		ErrorCode    string `json:"errorCode"`
		ErrorType    string `json:"errorType"`
		Message      string `json:"message"`
		PSPReference string `json:"pspReference"`
	}
)

// paymentBody is the /payments request of an attempt: built from req
// alone, so that a replay under its key carries the same parameters.
func (g *Gateway) paymentBody(req order.ChargeRequest, value int64) paymentRequest {
	p := paymentRequest{
		MerchantAccount:          g.merchant,
		Reference:                req.AttemptID,
		Amount:                   amount{Currency: req.Amount.Currency, Value: value},
		PaymentMethod:            paymentMethod{Type: "scheme", StoredPaymentMethodID: req.PaymentMethod},
		ShopperReference:         req.Customer,
		ShopperInteraction:       "ContAuth",
		RecurringProcessingModel: "UnscheduledCardOnFile",
		ReturnURL:                req.ReturnURL,
		// Every payment only authorizes: an unknown one is a possible
		// hold, which a technical cancel ends; Settle captures.
		AdditionalData: map[string]string{"manualCapture": "true"},
	}
	if p.ShopperReference == "" {
		p.ShopperReference = req.OrderID
	}
	if req.CustomerPresent {
		p.ShopperInteraction, p.RecurringProcessingModel = "Ecommerce", "CardOnFile"
	}
	if p.ReturnURL == "" {
		p.ReturnURL = g.returnURL
	}
	return p
}

// exchange is what one HTTP call came to, as far as the adapter could see.
type exchange struct {
	// connected is true once the transport obtained a connection; from
	// then on some of the request may have reached Adyen.
	connected bool
	// status is the response's status code, 0 when there was no response.
	status int
	body   []byte
	// err is why there was no response, or why its body could not be
	// read in full.
	err error
}

// post sends body to path under the idempotency key key. Its error means
// nothing was sent.
func (g *Gateway) post(ctx context.Context, path, key string, body any) (exchange, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return exchange{}, fmt.Errorf("encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+path, bytes.NewReader(b))
	if err != nil {
		return exchange{}, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("X-API-Key", g.apiKey)
	hreq.Header.Set("Idempotency-Key", key)
	// Before GotConn no byte of the request can have been written. The
	// hooks run on the transport's goroutines. net/http may resend the
	// request on a new connection; Adyen answers a resend under the same
	// key with the first answer.
	var connected atomic.Bool
	hreq = hreq.WithContext(httptrace.WithClientTrace(hreq.Context(), &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { connected.Store(true) },
		WroteHeaders: func() { connected.Store(true) },
	}))
	resp, err := g.http.Do(hreq)
	if err != nil {
		return exchange{connected: connected.Load(), err: err}, nil
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && len(rb) > maxBody {
		err = fmt.Errorf("response body exceeds %d bytes", maxBody)
	}
	return exchange{connected: true, status: resp.StatusCode, body: rb, err: err}, nil
}
