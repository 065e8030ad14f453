package stripe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/form"
	"github.com/stripe/stripe-go/v76/paymentintent"
	"github.com/stripe/stripe-go/v76/refund"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Listings
//
// The audit reads an account's PaymentIntents and Refunds by the time
// Stripe created them:
//
//	GET /v1/payment_intents?created[gte]=<s>&created[lt]=<s>&limit=100&expand[0]=data.latest_charge
//	GET /v1/refunds?created[gte]=<s>&created[lt]=<s>&limit=100&expand[0]=data.payment_intent
//
// Stripe stamps records in whole seconds, so the window [from, to) is sent
// as the seconds it holds: from and to rounded up.
//
// Each PaymentIntent is one GatewayCharge: its id (pi_..., what Settle
// records as the attempt's charge id), metadata[attempt_id] as the
// reference (the create sends it, and Lookup checks it there), its amount
// and currency, and its status read as Lookup reads it. A PaymentIntent
// holds one Charge per confirm that reached the card: a retry after a
// decline makes a second. The latest charge decides, because a
// PaymentIntent succeeds at most once and the charges before the latest
// failed and moved no money: the listing reports the PaymentIntent's
// status, amount_received as captured and the latest charge's
// amount_refunded as refunded. Each Refund is one GatewayRefund: its
// metadata[refund_id] as the reference, its PaymentIntent's id and
// metadata[attempt_id] as the refunded charge's.
//
// # Order
//
// The audit checkpoints by the last record it matched (created, then id)
// and skips what sorts before it, so a listing must come oldest first,
// and by id within a second. Stripe lists newest first and offers no other
// sort; it does page towards newer records from a record named in
// ending_before. So each listing walks the window twice: once newest first
// to find its oldest record, keeping only that, and once from it towards
// the newest with ending_before, which stripe-go's iterator pages and
// turns oldest first. The records of one second are held until the next
// second starts and sorted by id. Memory is one page and one second's
// records; the price is twice the requests of a single walk. A window
// that fits in one page (has_more false on the first) is read once, and
// that page called in reverse.

var _ order.ChargeLister = (*Gateway)(nil)

// listLimit is the page size of a listing: Stripe's largest.
const listLimit = 100

// ListCharges calls fn with each PaymentIntent Stripe created in
// [from, to), oldest first (then by id), reading a page at a time (see
// Listings above). It stops at fn's first error, or when ctx ends, and
// returns that error.
func (g *Gateway) ListCharges(ctx context.Context, from, to time.Time, fn func(order.GatewayCharge) error) error {
	intents := paymentintent.Client{B: observedBackend{Backend: g.intents.B, g: g, op: gateway.OpListCharges}, Key: g.key}
	list := func(ctx context.Context, gte, lt int64, endingBefore string) iterator[*stripego.PaymentIntent] {
		p := &stripego.PaymentIntentListParams{CreatedRange: &stripego.RangeQueryParams{
			GreaterThanOrEqual: gte, LesserThan: lt}}
		p.Limit = stripego.Int64(listLimit)
		p.AddExpand("data.latest_charge")
		if endingBefore != "" {
			p.EndingBefore = stripego.String(endingBefore)
		}
		p.Context = ctx
		it := intents.List(p)
		return iterator[*stripego.PaymentIntent]{it.Iter, it.PaymentIntent}
	}
	err := walk(ctx, from, to, list,
		func(pi *stripego.PaymentIntent) (int64, string) { return pi.Created, pi.ID },
		func(pi *stripego.PaymentIntent) error { return callback(fn(gatewayCharge(pi))) })
	return g.listError("list charges", err)
}

// ListRefunds calls fn with each Refund Stripe created in [from, to), as
// ListCharges does with PaymentIntents.
func (g *Gateway) ListRefunds(ctx context.Context, from, to time.Time, fn func(order.GatewayRefund) error) error {
	refunds := refund.Client{B: observedBackend{Backend: g.intents.B, g: g, op: gateway.OpListRefunds}, Key: g.key}
	list := func(ctx context.Context, gte, lt int64, endingBefore string) iterator[*stripego.Refund] {
		p := &stripego.RefundListParams{CreatedRange: &stripego.RangeQueryParams{
			GreaterThanOrEqual: gte, LesserThan: lt}}
		p.Limit = stripego.Int64(listLimit)
		// The refunded PaymentIntent's metadata holds the attempt's id.
		p.AddExpand("data.payment_intent")
		if endingBefore != "" {
			p.EndingBefore = stripego.String(endingBefore)
		}
		p.Context = ctx
		it := refunds.List(p)
		return iterator[*stripego.Refund]{it.Iter, it.Refund}
	}
	err := walk(ctx, from, to, list,
		func(r *stripego.Refund) (int64, string) { return r.Created, r.ID },
		func(r *stripego.Refund) error { return callback(fn(gatewayRefund(r))) })
	return g.listError("list refunds", err)
}

// gatewayCharge reads a listed PaymentIntent, its latest charge expanded.
func gatewayCharge(pi *stripego.PaymentIntent) order.GatewayCharge {
	cur := strings.ToUpper(string(pi.Currency))
	gc := order.GatewayCharge{
		ID:        pi.ID,
		Reference: pi.Metadata["attempt_id"],
		Amount:    order.Money{Currency: cur, AmountMinor: minorAmount(cur, pi.Amount)},
		Created:   time.Unix(pi.Created, 0).UTC(),
	}
	if c := pi.LatestCharge; c != nil {
		gc.Refunded = minorAmount(cur, c.AmountRefunded)
	}
	if pi.CaptureMethod == stripego.PaymentIntentCaptureMethodManual {
		// An authorization: where its hold stands, read as Lookup reads
		// it (hold.go). One that never held anything falls through.
		if h, ok := holdOf(pi); ok {
			gc.Outcome, gc.Hold, gc.Captured = order.OutcomeSucceeded, h.State, h.CapturedMinor
			return gc
		}
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		gc.Outcome, gc.Captured = order.OutcomeSucceeded, minorAmount(cur, pi.AmountReceived)
	case stripego.PaymentIntentStatusRequiresAction:
		gc.Outcome = order.OutcomeRequiresAction
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusCanceled,
		stripego.PaymentIntentStatusRequiresConfirmation:
		// Declined, canceled, or never confirmed: nothing moved.
		gc.Outcome = order.OutcomeDeclined
		switch {
		case pi.LastPaymentError != nil:
			gc.DeclineCode = declineCode(pi.LastPaymentError, string(pi.Status))
		case pi.Status == stripego.PaymentIntentStatusCanceled:
			gc.DeclineCode = "canceled"
		default:
			gc.DeclineCode = "unconfirmed_" + string(pi.Status)
		}
	default:
		// processing: money may yet move. Not a succeeded charge, so
		// the audit sees a paid order's charge as not (yet) paying it.
		gc.Outcome = order.OutcomeUnknown
	}
	return gc
}

// gatewayRefund reads a listed Refund, its PaymentIntent expanded.
func gatewayRefund(r *stripego.Refund) order.GatewayRefund {
	cur := strings.ToUpper(string(r.Currency))
	gr := order.GatewayRefund{
		ID:        r.ID,
		Reference: r.Metadata["refund_id"],
		Amount:    order.Money{Currency: cur, AmountMinor: minorAmount(cur, r.Amount)},
		Created:   time.Unix(r.Created, 0).UTC(),
	}
	switch {
	case r.PaymentIntent != nil:
		gr.ChargeID, gr.ChargeReference = r.PaymentIntent.ID, r.PaymentIntent.Metadata["attempt_id"]
	case r.Charge != nil:
		// A refund of a bare Charge, made outside Settle.
		gr.ChargeID = r.Charge.ID
	}
	switch r.Status {
	case stripego.RefundStatusSucceeded:
		gr.Outcome = order.OutcomeSucceeded
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		gr.Outcome, gr.FailureCode = order.OutcomeDeclined, string(r.FailureReason)
		if gr.FailureCode == "" {
			gr.FailureCode = string(r.Status)
		}
	default:
		// pending, requires_action: not decided yet.
		gr.Outcome = order.OutcomeUnknown
	}
	return gr
}

// iterator is a stripe-go list iterator and its typed Current.
type iterator[T any] struct {
	*stripego.Iter
	current func() T
}

// walk lists the records created in [from, to) through list, oldest first
// and by id within a second, calling each with every one (see Order
// above); key is a record's created time (Unix seconds) and id. It returns
// each's first error as it is.
func walk[T any](ctx context.Context, from, to time.Time,
	list func(ctx context.Context, gte, lt int64, endingBefore string) iterator[T],
	key func(T) (int64, string), each func(T) error) error {
	if to.Before(from) {
		return fmt.Errorf("window ends (%s) before it starts (%s)", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	gte, lt := ceilSecond(from), ceilSecond(to)
	if gte >= lt {
		return nil // no whole second starts in the window
	}
	var (
		second  []T // the records of the latest second, not yet called
		lastSec int64
		seen    int
	)
	flush := func() error {
		slices.SortFunc(second, func(a, b T) int {
			_, ida := key(a)
			_, idb := key(b)
			return cmp.Compare(ida, idb)
		})
		for _, r := range second {
			// A second's records are called after its pages were read:
			// the context is checked here too.
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := each(r); err != nil {
				return err
			}
		}
		second = second[:0]
		return nil
	}
	add := func(r T) error {
		created, id := key(r)
		switch {
		case created < gte || created >= lt:
			return fmt.Errorf("stripe: listed %s, created %d, outside the window [%d, %d)", clip(id), created, gte, lt)
		case seen > 0 && created < lastSec:
			return fmt.Errorf("stripe: listed %s, created %d, after a record created %d", clip(id), created, lastSec)
		case seen > 0 && created > lastSec:
			if err := flush(); err != nil {
				return err
			}
		case slices.ContainsFunc(second, func(r T) bool { _, other := key(r); return other == id }):
			// A record repeated, the cursor's own included: a listing
			// that does not move on.
			return fmt.Errorf("stripe: listed %s twice", clip(id))
		}
		second, lastSec = append(second, r), created
		seen++
		return nil
	}
	it := list(ctx, gte, lt, "")
	if err := it.Err(); err != nil {
		return err
	}
	if !it.Meta().HasMore {
		// The window fits in one page, read already: its records,
		// newest first, are called in reverse.
		var page []T
		for it.Next() {
			page = append(page, it.current())
		}
		for _, r := range slices.Backward(page) {
			if err := add(r); err != nil {
				return err
			}
		}
		return flush()
	}
	// The first walk, newest first, keeps only the last record: the
	// oldest.
	var (
		oldest T
		found  bool
	)
	for it.Next() {
		oldest, found = it.current(), true
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("find the window's oldest record: %w", err)
	}
	if !found {
		return errors.New("stripe: said it had more to list, then listed nothing")
	}
	if err := add(oldest); err != nil {
		return err
	}
	// The second walk, from the oldest towards the newest.
	_, oldestID := key(oldest)
	it = list(ctx, gte, lt, oldestID)
	for it.Next() {
		if err := add(it.current()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	return flush()
}

// ceilSecond is t in Unix seconds, rounded up.
func ceilSecond(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// observedBackend is the Gateway's backend for listings: each page read
// is one call the Observer is told of, within the Gateway's timeout.
type observedBackend struct {
	stripego.Backend
	g  *Gateway
	op string
}

// CallRaw is how stripe-go's iterators read a page.
func (b observedBackend) CallRaw(method, path, key string, body *form.Values, params *stripego.Params,
	v stripego.LastResponseSetter) (err error) {
	parent := params.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, done := b.g.obs.Start(parent, gateway.Call{Op: b.op})
	defer func() {
		res := order.Result{Outcome: order.OutcomeSucceeded}
		if err != nil {
			res.Outcome = order.OutcomeUnknown
		}
		done(res, err)
	}()
	ctx, cancel := context.WithTimeout(ctx, b.g.timeout)
	defer cancel()
	// The iterator reuses params for every page: each page gets its own
	// context, and the caller's is put back.
	params.Context = ctx
	defer func() { params.Context = parent }()
	return b.Backend.CallRaw(method, path, key, body, params, v)
}

// errCallback marks an error of the caller's fn, which a listing returns
// as it is.
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
// own as it is; Stripe's described without its message's secrets.
func (g *Gateway) listError(what string, err error) error {
	var (
		cb   errCallback
		se   *stripego.Error
		uerr *url.Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cb):
		return cb.err
	case errors.As(err, &se):
		return fmt.Errorf("stripe: %s: %s", what, g.describe(se))
	case errors.As(err, &uerr):
		return fmt.Errorf("stripe: %s: no answer from Stripe: %w", what, uerr)
	}
	return fmt.Errorf("stripe: %s: %w", what, err)
}
