package refpsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Listings
//
// The charges created in a window, for the audit:
//
//	GET /v1/charges?created_gte=<RFC 3339>&created_lt=<RFC 3339>&limit=<1..100>&starting_after=<cursor>
//	Authorization: Bearer <key>
//
// is answered with
//
//	200  {"data": [<charge>...], "has_more": bool, "next_cursor": "<cursor>"}
//	400  {"error": "..."}: a parameter is missing or wrong
//
// Each charge is the charge object with "created" (RFC 3339, nanoseconds)
// and "amount_refunded" (its succeeded refunds). The window is
// [created_gte, created_lt); times are UTC, fractional seconds allowed.
// limit defaults to 100; starting_after is the next_cursor of the page
// before, opaque. Records come by created, then id, and a page holds those
// after the cursor's record. GET /v1/refunds takes the same parameters and
// lists refund objects with "charge_id" and "created". With a reference,
// both are the lookups they were.
//
// The gateway gives a record its created time when it makes it, never
// earlier than one it gave before; so a cursor, which names the last
// record listed, makes no page skip or repeat a record however many are
// made while the client pages, and a record made meanwhile inside the
// window is listed once. A record the gateway shows late (a charge still
// in flight, whose lookups say 404 until it lands) may appear behind a
// cursor that passed it: a window should be listed once its end is
// further back than the longest such delay.

var _ order.ChargeLister = (*Client)(nil)

// ListCharges calls fn with each charge the gateway created in [from, to),
// in the gateway's order (created, then id), a page at a time. It stops at
// fn's first error, or when ctx ends, and returns that error.
func (c *Client) ListCharges(ctx context.Context, from, to time.Time, fn func(order.GatewayCharge) error) error {
	err := listPages(ctx, c, gateway.OpListCharges, c.chargesURL, from, to,
		func(lc ListedCharge) position { return position{lc.Created, lc.ID} },
		func(lc ListedCharge) error {
			gc, err := lc.gatewayCharge()
			if err != nil {
				return err
			}
			return callback(fn(gc))
		})
	return listError("list charges", err)
}

// ListRefunds calls fn with each refund the gateway created in [from,
// to), as ListCharges does with charges.
func (c *Client) ListRefunds(ctx context.Context, from, to time.Time, fn func(order.GatewayRefund) error) error {
	err := listPages(ctx, c, gateway.OpListRefunds, c.refundsURL, from, to,
		func(lr ListedRefund) position { return position{lr.Created, lr.ID} },
		func(lr ListedRefund) error {
			gr, err := lr.gatewayRefund()
			if err != nil {
				return err
			}
			return callback(fn(gr))
		})
	return listError("list refunds", err)
}

// errCallback marks an error of the caller's fn, which listPages returns
// as it is, unwrapped by anything of the listing's.
type errCallback struct{ err error }

func (e errCallback) Error() string { return e.err.Error() }

// callback marks err, if any, as the caller's.
func callback(err error) error {
	if err != nil {
		return errCallback{err}
	}
	return nil
}

// listError is the error a listing (what) returns for err: the caller's
// own as it is, any other wrapped.
func listError(what string, err error) error {
	var cb errCallback
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cb):
		return cb.err
	}
	return fmt.Errorf("refpsp: %s: %w", what, err)
}

// position is where a listed record sorts: by created, then id.
type position struct {
	created time.Time
	id      string
}

func (p position) after(q position) bool {
	if c := p.created.Compare(q.created); c != 0 {
		return c > 0
	}
	return p.id > q.id
}

// listPages reads the listing at u of the window [from, to) page by page,
// and calls each with every record, in turn, once it has checked what the
// audit relies on: a record in the window, after the one before (at pos),
// and cursors that move on. It returns each's first error as it is.
func listPages[T any](ctx context.Context, c *Client, op, u string, from, to time.Time, pos func(T) position, each func(T) error) error {
	if to.Before(from) {
		return fmt.Errorf("window ends (%s) before it starts (%s)", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	q := url.Values{
		"created_gte": {from.UTC().Format(time.RFC3339Nano)},
		"created_lt":  {to.UTC().Format(time.RFC3339Nano)},
		"limit":       {strconv.Itoa(c.pageSize)},
	}
	var last *position
	for pages := 1; ; pages++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		pg, err := listPage[T](ctx, c, op, u+"?"+q.Encode())
		if err != nil {
			return fmt.Errorf("page %d: %w", pages, err)
		}
		if len(pg.Data) > c.pageSize {
			return fmt.Errorf("page %d: the gateway listed %d records, more than the limit %d", pages, len(pg.Data), c.pageSize)
		}
		for _, item := range pg.Data {
			p := pos(item)
			switch {
			case p.created.Before(from) || !p.created.Before(to):
				return fmt.Errorf("page %d: the gateway listed %s, created %s, outside the window", pages, clip(p.id), p.created.Format(time.RFC3339Nano))
			case last != nil && !p.after(*last):
				return fmt.Errorf("page %d: the gateway listed %s out of order (or twice)", pages, clip(p.id))
			}
			last = &p
			if err := each(item); err != nil {
				if errors.As(err, new(errCallback)) {
					return err
				}
				return fmt.Errorf("page %d: %w", pages, err)
			}
		}
		if !pg.HasMore {
			return nil
		}
		if pg.NextCursor == "" || len(pg.Data) == 0 || pg.NextCursor == q.Get("starting_after") {
			return fmt.Errorf("page %d: the gateway has more to list but gave no new cursor", pages)
		}
		q.Set("starting_after", pg.NextCursor)
	}
}

// listPage reads one page, within the client's timeout, and tells the
// Observer of it.
func listPage[T any](ctx context.Context, c *Client, op, u string) (pg Page[T], err error) {
	ctx, done := c.obs.Start(ctx, gateway.Call{Op: op})
	defer func() {
		res := order.Result{Outcome: order.OutcomeSucceeded}
		if err != nil {
			res.Outcome = order.OutcomeUnknown
		}
		done(res, err)
	}()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Page[T]{}, fmt.Errorf("build request: %w", err)
	}
	ex := c.do(hreq)
	switch {
	case ex.status == 0:
		return Page[T]{}, fmt.Errorf("no answer: %w", ex.err)
	case ex.status != http.StatusOK:
		return Page[T]{}, fmt.Errorf("gateway answered %d%s", ex.status, problem(ex.body))
	case ex.err != nil:
		return Page[T]{}, fmt.Errorf("gateway answered 200 but the body could not be read: %w", ex.err)
	}
	if err := json.Unmarshal(ex.body, &pg); err != nil {
		return Page[T]{}, fmt.Errorf("malformed page: %w", err)
	}
	return pg, nil
}

// problem is the gateway's own message in an error answer's body, clipped,
// for the error of a listing (which carries no key and no card).
func problem(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return ""
	}
	return ": " + clip(e.Error)
}

// gatewayCharge is lc as the audit reads it.
func (lc ListedCharge) gatewayCharge() (order.GatewayCharge, error) {
	gc := order.GatewayCharge{
		ID: lc.ID, Reference: lc.Reference, Amount: order.Money{Currency: lc.Currency, AmountMinor: lc.Amount},
		DeclineCode: lc.DeclineCode, Refunded: lc.AmountRefunded, Created: lc.Created,
	}
	if lc.ID == "" {
		return order.GatewayCharge{}, errors.New("the gateway listed a charge with no id")
	}
	if h := lc.hold(); h != nil {
		gc.Outcome, gc.Hold, gc.Captured = order.OutcomeSucceeded, h.State, lc.AmountCaptured
		return gc, nil
	}
	switch lc.Status {
	case StatusSucceeded:
		gc.Outcome, gc.Captured = order.OutcomeSucceeded, lc.Amount
	case StatusDeclined:
		gc.Outcome = order.OutcomeDeclined
	case StatusRequiresAction:
		gc.Outcome = order.OutcomeRequiresAction
	default:
		return order.GatewayCharge{}, fmt.Errorf("the gateway listed charge %s with unknown status %q", clip(lc.ID), clip(lc.Status))
	}
	return gc, nil
}

// gatewayRefund is lr as the audit reads it.
func (lr ListedRefund) gatewayRefund() (order.GatewayRefund, error) {
	gr := order.GatewayRefund{
		ID: lr.ID, Reference: lr.Reference, ChargeID: lr.ChargeID, ChargeReference: lr.ChargeReference,
		Amount: order.Money{Currency: lr.Currency, AmountMinor: lr.Amount}, FailureCode: lr.FailureCode, Created: lr.Created,
	}
	if lr.ID == "" {
		return order.GatewayRefund{}, errors.New("the gateway listed a refund with no id")
	}
	switch lr.Status {
	case RefundSucceeded:
		gr.Outcome = order.OutcomeSucceeded
	case RefundFailed:
		gr.Outcome = order.OutcomeDeclined
	case RefundPending:
		gr.Outcome = order.OutcomeUnknown
	default:
		return order.GatewayRefund{}, fmt.Errorf("the gateway listed refund %s with unknown status %q", clip(lr.ID), clip(lr.Status))
	}
	return gr, nil
}
