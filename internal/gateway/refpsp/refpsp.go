// Package refpsp is the order.Gateway adapter for the reference payment
// service provider, a gateway spoken to over HTTP with JSON bodies.
//
// # Protocol
//
// A charge:
//
//	POST /v1/charges
//	Authorization: Bearer <key>
//	Idempotency-Key: <attempt id>    (gateways may ignore it)
//
//	{"reference": "<attempt id>", "amount": <int64 minor units>, "currency": "GBP",
//	 "payment_method": "<token>", "description": "<merchant reference>"}
//
// is answered with one of:
//
//	201  {"id": "<gateway charge id>", "reference": "...", "status": "succeeded", "amount": ..., "currency": "..."}
//	402  the same shape with "status": "declined", "decline_code": "..."
//	429  rate limited, nothing charged
//	4xx  (any other) rejected, nothing charged
//	5xx  unknown: the charge may or may not have happened
//
// A lookup of an earlier charge by its reference:
//
//	GET /v1/charges?reference=<attempt id>
//	Authorization: Bearer <key>
//
// is answered with one of:
//
//	200  the charge object, with status "succeeded" or "declined"
//	404  no charge with that reference exists
//
// Refunds (POST /v1/refunds, GET /v1/refunds?reference=) follow the same
// rules; refund.go describes them. A charge with "capture": false only
// authorizes; its captures (POST /v1/captures) and voids (POST /v1/voids)
// follow the same rules too, and capture.go describes them. Disputes of a
// succeeded charge come as events, and are read and accepted at
// /v1/disputes/{id}: dispute.go describes them. GET /v1/charges and GET
// /v1/refunds without a reference list the charges and refunds created in
// a window, for the audit: list.go describes them.
//
// # Outcomes
//
// Charge says OutcomeSucceeded or OutcomeDeclined only when the gateway
// answered 201 or 402 with a charge that matches the request (reference,
// amount, currency) and the status code. It says OutcomeNotSent only when the
// request provably never reached the gateway (the dial failed before a
// connection was obtained) or the gateway promised it charged nothing (429).
// Other 4xx answers are rejections: OutcomeDeclined with decline code
// "rejected_<status>". Everything else (timeouts, 5xx, a connection lost after
// the request was written, a body that cannot be read or does not match) is
// OutcomeUnknown, for the reconciler to settle with Lookup.
//
// A gateway may ignore Idempotency-Key, so this client never sends a charge
// twice: see Client.Charge for the retry that net/http would otherwise make.
//
// Errors never contain the API key or the payment method token.
package refpsp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// DefaultTimeout bounds one call to the gateway when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxBody is the most of a response body the client reads. A charge object
// is a few hundred bytes; anything much larger is not an answer we can trust.
const maxBody = 1 << 20

// Config configures a Client.
type Config struct {
	// BaseURL is the gateway's address, such as "https://psp.example.com".
	// Paths of the protocol are appended to it.
	BaseURL string
	// APIKey is sent as a bearer token. It never appears in errors.
	APIKey string
	// Timeout bounds each call, on top of any deadline of the caller's
	// context. Zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests. Nil means a client with its own
	// transport. The Client uses a copy that never follows redirects.
	HTTPClient *http.Client
	// Observer is told of every charge, lookup and refund call (telemetry
	// counts, times and traces them). Nil means gateway.Unobserved.
	Observer gateway.Observer
	// EventSecrets are the signing secrets of the gateway's events, each
	// at least MinEventSecretLen bytes; an event signed with any of them is
	// accepted, so that a secret can be rotated. With none, ReceiveEvents
	// refuses every event.
	EventSecrets []string
	// EventTolerance bounds how far an event signature's timestamp may lie
	// from now, either way. Zero means DefaultEventTolerance.
	EventTolerance time.Duration
	// ListPageSize is the limit of each page ListCharges and ListRefunds
	// read, from 1 to MaxListLimit. Zero means MaxListLimit.
	ListPageSize int
}

// Client charges and looks up charges at the reference gateway. It
// implements order.Gateway and is safe for concurrent use.
type Client struct {
	chargesURL string
	refundsURL string
	// capturesURL and voidsURL are capture.go's.
	capturesURL, voidsURL string
	// disputesURL is dispute.go's.
	disputesURL *url.URL
	apiKey      string
	timeout     time.Duration
	http        *http.Client
	obs         gateway.Observer
	// The events' signing secrets and tolerance (events.go).
	eventSecrets   []string
	eventTolerance time.Duration
	// pageSize is the limit of a listing's pages (list.go).
	pageSize int
}

var _ order.Gateway = (*Client)(nil)

// New returns a Client for cfg, or an error saying what in cfg is wrong.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		// The *url.Error would quote the whole URL, user info and all.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("refpsp: base URL does not parse: %w", err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("refpsp: base URL %q must be an absolute http or https URL", base.Redacted())
	}
	if cfg.APIKey == "" {
		return nil, errors.New("refpsp: API key is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("refpsp: timeout %s must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	for i, secret := range cfg.EventSecrets {
		if err := CheckEventSecret(secret); err != nil {
			return nil, fmt.Errorf("refpsp: event secret %d of %d: %w", i+1, len(cfg.EventSecrets), err)
		}
	}
	if cfg.EventTolerance < 0 {
		return nil, fmt.Errorf("refpsp: event tolerance %s must not be negative", cfg.EventTolerance)
	}
	if cfg.EventTolerance == 0 {
		cfg.EventTolerance = DefaultEventTolerance
	}
	if cfg.Observer == nil {
		cfg.Observer = gateway.Unobserved
	}
	if cfg.ListPageSize < 0 || cfg.ListPageSize > MaxListLimit {
		return nil, fmt.Errorf("refpsp: list page size %d must be from 1 to %d (0 for %[2]d)", cfg.ListPageSize, MaxListLimit)
	}
	if cfg.ListPageSize == 0 {
		cfg.ListPageSize = MaxListLimit
	}

	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	} else {
		hc.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// A redirected POST turns into a GET (301, 302, 303) or needs the body
	// again (307, 308); neither is part of the protocol, so a redirect is
	// reported as the answer it is and classified as unknown.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	return &Client{
		chargesURL:  base.JoinPath("v1", "charges").String(),
		refundsURL:  base.JoinPath("v1", "refunds").String(),
		capturesURL: base.JoinPath("v1", "captures").String(),
		voidsURL:    base.JoinPath("v1", "voids").String(),
		disputesURL: base.JoinPath("v1", "disputes"),
		apiKey:      cfg.APIKey,
		timeout:     cfg.Timeout,
		http:        &hc,
		obs:         cfg.Observer,

		eventSecrets:   cfg.EventSecrets,
		eventTolerance: cfg.EventTolerance,
		pageSize:       cfg.ListPageSize,
	}, nil
}

// Charge asks the gateway to charge req.PaymentMethod, with req.AttemptID as
// the reference and idempotency key. It always reports an outcome; a non-nil
// error explains any outcome but a success or a 402 decline, and is for logs.
//
// The request is sent at most once. net/http would otherwise send it again
// on a new connection when a reused keep-alive connection fails after the
// request was written, because a POST carrying an Idempotency-Key header
// counts as replayable. Against a gateway that ignores the key that replay
// is a second charge, so the request is made non-replayable instead.
func (c *Client) Charge(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpCharge, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	if req.AttemptID == "" {
		return order.Result{Outcome: order.OutcomeNotSent}, errors.New("refpsp: charge: attempt id is required")
	}
	in := ChargeBody{
		Reference:       req.AttemptID,
		Amount:          req.Amount.AmountMinor,
		Currency:        req.Amount.Currency,
		PaymentMethod:   req.PaymentMethod,
		Description:     req.MerchantReference,
		CustomerPresent: req.CustomerPresent,
		ReturnURL:       req.ReturnURL,
	}
	if req.Capture == order.CaptureManual {
		in.Capture = new(false)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("refpsp: charge %s: encode request: %w", req.AttemptID, err)
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.chargesURL, bytes.NewReader(body))
	if err != nil {
		return order.Result{Outcome: order.OutcomeNotSent}, fmt.Errorf("refpsp: charge %s: build request: %w", req.AttemptID, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", req.AttemptID)

	res, err = classifyCharge(req, c.do(hreq))
	if err != nil {
		err = fmt.Errorf("refpsp: charge %s: %w", req.AttemptID, err)
	}
	return res, err
}

// Lookup asks the gateway about the charge with reference req.AttemptID. It
// returns OutcomeSucceeded or OutcomeDeclined with the charge, OutcomeNotFound
// when the gateway has no such charge, or an error when the gateway cannot
// say (the result's outcome is then OutcomeUnknown).
func (c *Client) Lookup(ctx context.Context, req order.ChargeRequest) (res order.Result, err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: gateway.OpLookup, OrderID: req.OrderID, AttemptID: req.AttemptID})
	defer func() { done(res, err) }()
	if req.AttemptID == "" {
		return order.Result{Outcome: order.OutcomeUnknown}, errors.New("refpsp: lookup: attempt id is required")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.chargesURL + "?" + url.Values{"reference": {req.AttemptID}}.Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return order.Result{Outcome: order.OutcomeUnknown}, fmt.Errorf("refpsp: lookup %s: build request: %w", req.AttemptID, err)
	}

	res, err = classifyLookup(req, c.do(hreq))
	if err == nil && res.Outcome == order.OutcomeRequiresAction && req.CancelAwaitingAction {
		// The customer did not authenticate in time: cancel, which proves
		// the charge will not happen, or learn that it ended meanwhile.
		res, err = c.cancel(ctx, req)
	}
	if err != nil {
		err = fmt.Errorf("refpsp: lookup %s: %w", req.AttemptID, err)
	}
	return res, err
}

// cancel cancels a charge waiting for the customer (see CancelBody).
func (c *Client) cancel(ctx context.Context, req order.ChargeRequest) (order.Result, error) {
	body, err := json.Marshal(CancelBody{Reference: req.AttemptID})
	if err != nil {
		return unknown(err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.chargesURL+"/cancel", bytes.NewReader(body))
	if err != nil {
		return unknown(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	ex := c.do(hreq)
	if ex.status != http.StatusOK && ex.status != http.StatusConflict {
		return unknown(fmt.Errorf("cancel: gateway answered %d", ex.status))
	}
	if ex.err != nil {
		return unknown(fmt.Errorf("cancel: %w", ex.err))
	}
	ch, err := parseCharge(ex.body)
	if err != nil {
		return unknown(fmt.Errorf("cancel: %w", err))
	}
	if err := ch.matches(req); err != nil {
		return unknown(fmt.Errorf("cancel: %w", err))
	}
	if ch.Status == StatusRequiresAction {
		return unknown(errors.New("cancel: the charge still waits for the customer"))
	}
	return ch.result(req), nil
}

// post sends body to u with key as the Idempotency-Key, within the
// client's timeout: the write of a refund, a capture or a void. An error means nothing was sent.
func (c *Client) post(ctx context.Context, u, key string, body any) (exchange, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return exchange{}, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return exchange{}, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", key)
	return c.do(hreq), nil
}

// get looks up the object at u with reference ref, within the client's
// timeout: read parses a 200's body, 404 is OutcomeNotFound, and anything
// else an error.
func (c *Client) get(ctx context.Context, u, ref string, read func([]byte) (order.Result, error)) (order.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+url.Values{"reference": {ref}}.Encode(), nil)
	if err != nil {
		return unknown(fmt.Errorf("build request: %w", err))
	}
	ex := c.do(hreq)
	switch {
	case ex.status == 0:
		return unknown(fmt.Errorf("no answer: %w", ex.err))
	case ex.status == http.StatusNotFound:
		return order.Result{Outcome: order.OutcomeNotFound}, nil
	case ex.status != http.StatusOK:
		return unknown(fmt.Errorf("gateway answered %d", ex.status))
	case ex.err != nil:
		return unknown(fmt.Errorf("gateway answered 200 but the body could not be read: %w", ex.err))
	}
	res, err := read(ex.body)
	if err != nil {
		return unknown(fmt.Errorf("gateway answered 200: %w", err))
	}
	return res, nil
}

// do sends req with the API key and reports what came of it.
func (c *Client) do(req *http.Request) exchange {
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	// GetBody is what lets net/http replay a request on a new connection
	// (with the Idempotency-Key header, even a POST). Without it a request
	// with a body is never sent twice. See Client.Charge.
	req.GetBody = nil

	// Whether a connection was obtained decides whether a failure can be
	// "not sent": before GotConn no byte of the request can have been
	// written. The trace hooks run on the transport's goroutines.
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { connected.Store(true) },
		WroteHeaders: func() { connected.Store(true) },
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))

	resp, err := c.http.Do(req)
	if err != nil {
		return exchange{connected: connected.Load(), err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = fmt.Errorf("response body exceeds %d bytes", maxBody)
	}
	return exchange{connected: true, status: resp.StatusCode, body: body, err: err}
}
