package postgres

import (
	"cmp"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// A grouped statement takes its rows as one array per column, the group's
// i-th row at index i of each, so that a group of any size is one round
// trip (see internal/onerow for how its one-row form reads them). Each
// grouped statement has a column struct: one field per array, tagged arg
// with the statement's argument; add appends a row, and columnArgs makes
// the statement's arguments. A field tagged uuid holds ids as text, sent
// as UUIDs; the tag names them in the error when one is not a UUID.

// columnArgs returns the statement arguments of cols, a pointer to a
// column struct: each field under its arg tag.
func columnArgs(cols any) (pgx.StrictNamedArgs, error) {
	v := reflect.ValueOf(cols).Elem()
	t := v.Type()
	args := make(pgx.StrictNamedArgs, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if v.Field(i).IsNil() {
			// An empty group's arrays are empty, not NULL.
			v.Field(i).Set(reflect.MakeSlice(f.Type, 0, 0))
		}
		val := v.Field(i).Interface()
		if what, ok := f.Tag.Lookup("uuid"); ok {
			u, err := uuids(val.([]string))
			if err != nil {
				return nil, fmt.Errorf("%s %w", what, err)
			}
			val = u
		}
		args[f.Tag.Get("arg")] = val
	}
	return args, nil
}

// createColumns are the rows of create_orders.sql.
type createColumns struct {
	ID                []string `arg:"id" uuid:"order"`
	MerchantID        []string `arg:"merchant_id"`
	MerchantReference []string `arg:"merchant_reference"`
	AmountMinor       []int64  `arg:"amount_minor"`
	Currency          []string `arg:"currency"`
	PaymentMethod     []string `arg:"payment_method"`
	Gateway           []string `arg:"gateway"`
	State             []string `arg:"state"`
	CaptureMode       []string `arg:"capture_mode"`
	Routes            []string `arg:"routes"`
}

func (c *createColumns) add(o order.Order) {
	c.ID = append(c.ID, o.ID)
	c.MerchantID = append(c.MerchantID, o.MerchantID)
	c.MerchantReference = append(c.MerchantReference, o.MerchantReference)
	c.AmountMinor = append(c.AmountMinor, o.Amount.AmountMinor)
	c.Currency = append(c.Currency, o.Amount.Currency)
	c.PaymentMethod = append(c.PaymentMethod, o.PaymentMethod)
	c.Gateway = append(c.Gateway, o.Gateway)
	c.State = append(c.State, string(o.State))
	c.CaptureMode = append(c.CaptureMode, string(cmp.Or(o.Capture, order.CaptureAutomatic)))
	c.Routes = append(c.Routes, routesJSON(o.Routes))
}

// claimColumns are the rows of claims.sql.
type claimColumns struct {
	MerchantID    []string        `arg:"merchant_id"`
	OrderID       []string        `arg:"order_id" uuid:"order"`
	RequestID     []string        `arg:"request_id"`
	AttemptID     []string        `arg:"attempt_id" uuid:"attempt"`
	PaymentMethod []string        `arg:"payment_method"`
	Customer      []string        `arg:"customer"`
	From          []string        `arg:"from_state"`
	To            []string        `arg:"to_state"`
	Lease         []time.Duration `arg:"lease"`
	Event         []string        `arg:"event"`
	Actor         []string        `arg:"actor"`
	Gateway       []string        `arg:"gateway"`
	CascadeAfter  []string        `arg:"cascade_after"`
	Skipped       []string        `arg:"skipped"`
	Reason        []string        `arg:"reason"`
	CheckFollows  []bool          `arg:"check_follows"`
	Follows       []string        `arg:"follows"`
}

func (c *claimColumns) add(cl order.Claim) {
	c.MerchantID = append(c.MerchantID, cl.MerchantID)
	c.OrderID = append(c.OrderID, cl.OrderID)
	c.RequestID = append(c.RequestID, cl.RequestID)
	c.AttemptID = append(c.AttemptID, cl.AttemptID)
	c.PaymentMethod = append(c.PaymentMethod, cl.PaymentMethod)
	c.Customer = append(c.Customer, cl.Customer)
	c.From = append(c.From, string(cl.From))
	c.To = append(c.To, string(cl.To))
	c.Lease = append(c.Lease, cl.Lease)
	c.Event = append(c.Event, string(cl.Event))
	c.Actor = append(c.Actor, string(cl.Actor))
	c.Gateway = append(c.Gateway, cl.Gateway)
	c.CascadeAfter = append(c.CascadeAfter, cl.CascadeAfter)
	c.Skipped = append(c.Skipped, cl.Skipped)
	c.Reason = append(c.Reason, cl.Reason)
	c.CheckFollows = append(c.CheckFollows, cl.Follows != nil)
	c.Follows = append(c.Follows, deref(cl.Follows))
}

// createClaimedColumns are the rows of create_claimed_orders.sql: an order
// and its claim.
type createClaimedColumns struct {
	ID                []string        `arg:"id" uuid:"order"`
	MerchantID        []string        `arg:"merchant_id"`
	MerchantReference []string        `arg:"merchant_reference"`
	AmountMinor       []int64         `arg:"amount_minor"`
	Currency          []string        `arg:"currency"`
	PaymentMethod     []string        `arg:"payment_method"`
	Gateway           []string        `arg:"gateway"`
	To                []string        `arg:"to_state"`
	AttemptID         []string        `arg:"attempt_id" uuid:"attempt"`
	Lease             []time.Duration `arg:"lease"`
	RequestID         []string        `arg:"request_id"`
	From              []string        `arg:"from_state"`
	Event             []string        `arg:"claim_event"`
	Actor             []string        `arg:"actor"`
	Customer          []string        `arg:"customer"`
	CaptureMode       []string        `arg:"capture_mode"`
	Routes            []string        `arg:"routes"`
	Skipped           []string        `arg:"skipped"`
}

func (c *createClaimedColumns) add(o order.Order, cl order.Claim) {
	c.ID = append(c.ID, o.ID)
	c.MerchantID = append(c.MerchantID, o.MerchantID)
	c.MerchantReference = append(c.MerchantReference, o.MerchantReference)
	c.AmountMinor = append(c.AmountMinor, o.Amount.AmountMinor)
	c.Currency = append(c.Currency, o.Amount.Currency)
	c.PaymentMethod = append(c.PaymentMethod, o.PaymentMethod)
	c.Gateway = append(c.Gateway, o.Gateway)
	c.To = append(c.To, string(cl.To))
	c.AttemptID = append(c.AttemptID, cl.AttemptID)
	c.Lease = append(c.Lease, cl.Lease)
	c.RequestID = append(c.RequestID, cl.RequestID)
	c.From = append(c.From, string(cl.From))
	c.Event = append(c.Event, string(cl.Event))
	c.Actor = append(c.Actor, string(cl.Actor))
	c.Customer = append(c.Customer, cl.Customer)
	c.CaptureMode = append(c.CaptureMode, string(cmp.Or(o.Capture, order.CaptureAutomatic)))
	c.Routes = append(c.Routes, routesJSON(o.Routes))
	c.Skipped = append(c.Skipped, cl.Skipped)
}

// settleColumns are the rows of settles.sql (and of citus/settles.sql, which
// takes one merchant instead of a column of them).
type settleColumns struct {
	MerchantID  []string        `arg:"merchant_id"`
	OrderID     []string        `arg:"order_id" uuid:"order"`
	AttemptID   []string        `arg:"attempt_id" uuid:"attempt"`
	To          []string        `arg:"to_state"`
	RecheckIn   []time.Duration `arg:"recheck_in"`
	Checked     []bool          `arg:"checked"`
	LastError   []string        `arg:"last_error"`
	Outcome     []string        `arg:"outcome"`
	DeclineCode []string        `arg:"decline_code"`
	ChargeID    []string        `arg:"charge_id"`
	Event       []string        `arg:"event"`
	Actor       []string        `arg:"actor"`
	Reason      []string        `arg:"reason"`
	From        []string        `arg:"from_state"`
	// AuthorizedMinor and CaptureBefore are the hold of a settlement to
	// AUTHORIZED (Result.Hold; the order's amount when the gateway did
	// not say), unused otherwise; a zero CaptureBefore is NULL.
	AuthorizedMinor []int64      `arg:"authorized_minor"`
	CaptureBefore   []*time.Time `arg:"capture_before"`
	// Lease is the reconcile_at a reconciler's settlement is guarded by
	// (Settlement.Lease); NULL for the charge path's.
	Lease []*time.Time `arg:"lease"`
}

func (c *settleColumns) add(st order.Settlement) {
	from := string(cmp.Or(st.From, order.StateCharging))
	to := string(st.To)
	if st.Event == "" {
		to = from // a settlement that records no move keeps the state
	}
	c.MerchantID = append(c.MerchantID, st.MerchantID)
	c.OrderID = append(c.OrderID, st.OrderID)
	c.AttemptID = append(c.AttemptID, st.AttemptID)
	c.To = append(c.To, to)
	c.RecheckIn = append(c.RecheckIn, st.RecheckIn)
	c.Checked = append(c.Checked, st.Checked)
	c.LastError = append(c.LastError, truncate(st.LastError, 1000))
	c.Outcome = append(c.Outcome, string(st.Result.Outcome))
	c.DeclineCode = append(c.DeclineCode, truncate(st.Result.DeclineCode, 255))
	c.ChargeID = append(c.ChargeID, truncate(st.Result.ChargeID, 255))
	c.Event = append(c.Event, string(st.Event))
	c.Actor = append(c.Actor, string(st.Actor))
	c.Reason = append(c.Reason, truncate(st.Reason, 1000))
	c.From = append(c.From, from)
	var held int64
	var before *time.Time
	if h := st.Result.Hold; h != nil {
		held = h.AuthorizedMinor
		if !h.CaptureBefore.IsZero() {
			before = &h.CaptureBefore
		}
	}
	c.AuthorizedMinor = append(c.AuthorizedMinor, held)
	c.CaptureBefore = append(c.CaptureBefore, before)
	c.Lease = append(c.Lease, leaseArg(st.Lease))
}

// leaseArg is a settlement's lease as its statement takes it: NULL when
// the settlement has none (the charge path's).
func leaseArg(lease time.Time) *time.Time {
	if lease.IsZero() {
		return nil
	}
	return &lease
}

// deliveryColumns are the rows of record_deliveries.sql.
type deliveryColumns struct {
	MerchantID []string        `arg:"merchant_id"`
	Num        []int64         `arg:"id"`
	Outcome    []string        `arg:"outcome"`
	Status     []int32         `arg:"status"`
	Backoff    []time.Duration `arg:"backoff"`
}

func (c *deliveryColumns) add(d order.Delivery) {
	c.MerchantID = append(c.MerchantID, d.MerchantID)
	c.Num = append(c.Num, d.Num)
	c.Outcome = append(c.Outcome, string(d.Outcome))
	c.Status = append(c.Status, int32(d.Status))
	c.Backoff = append(c.Backoff, d.Backoff)
}

// refundClaimColumns are the rows of refund_claims.sql.
type refundClaimColumns struct {
	MerchantID  []string        `arg:"merchant_id"`
	OrderID     []string        `arg:"order_id" uuid:"order"`
	RequestID   []string        `arg:"request_id"`
	RefundID    []string        `arg:"refund_id" uuid:"refund"`
	AmountMinor []int64         `arg:"amount_minor"`
	Reason      []string        `arg:"reason"`
	Actor       []string        `arg:"actor"`
	Lease       []time.Duration `arg:"lease"`
	// Gateways are the claim's gateways joined by commas, "" for any.
	Gateways []string `arg:"gateways"`
}

func (c *refundClaimColumns) add(rc order.RefundClaim) {
	c.MerchantID = append(c.MerchantID, rc.MerchantID)
	c.OrderID = append(c.OrderID, rc.OrderID)
	c.RequestID = append(c.RequestID, rc.RequestID)
	c.RefundID = append(c.RefundID, rc.RefundID)
	c.AmountMinor = append(c.AmountMinor, rc.AmountMinor)
	c.Reason = append(c.Reason, rc.Reason)
	c.Actor = append(c.Actor, string(rc.Actor))
	c.Lease = append(c.Lease, rc.Lease)
	c.Gateways = append(c.Gateways, strings.Join(rc.Gateways, ","))
}

// refundSettleColumns are the rows of refund_settles.sql.
type refundSettleColumns struct {
	MerchantID      []string        `arg:"merchant_id"`
	OrderID         []string        `arg:"order_id" uuid:"order"`
	RefundID        []string        `arg:"refund_id" uuid:"refund"`
	From            []string        `arg:"from_state"`
	To              []string        `arg:"to_state"`
	Outcome         []string        `arg:"outcome"`
	DeclineCode     []string        `arg:"decline_code"`
	GatewayRefundID []string        `arg:"gateway_refund_id"`
	RecheckIn       []time.Duration `arg:"recheck_in"`
	Checked         []bool          `arg:"checked"`
	LastError       []string        `arg:"last_error"`
	Event           []string        `arg:"event"`
	Actor           []string        `arg:"actor"`
	Reason          []string        `arg:"reason"`
	PartialEvent    []string        `arg:"partial_event"`
	PartialTo       []string        `arg:"partial_to"`
	FullEvent       []string        `arg:"full_event"`
	FullTo          []string        `arg:"full_to"`
	// Lease is the reconcile_at a reconciler's settlement is guarded by
	// (RefundSettlement.Lease); NULL for the refund path's.
	Lease []*time.Time `arg:"lease"`
}

func (c *refundSettleColumns) add(st order.RefundSettlement) {
	from, to := refundSettleStates(st)
	c.MerchantID = append(c.MerchantID, st.MerchantID)
	c.OrderID = append(c.OrderID, st.OrderID)
	c.RefundID = append(c.RefundID, st.RefundID)
	c.From = append(c.From, string(from))
	c.To = append(c.To, string(to))
	c.Outcome = append(c.Outcome, string(st.Result.Outcome))
	c.DeclineCode = append(c.DeclineCode, st.Result.DeclineCode)
	c.GatewayRefundID = append(c.GatewayRefundID, st.Result.ChargeID)
	c.RecheckIn = append(c.RecheckIn, st.RecheckIn)
	c.Checked = append(c.Checked, st.Checked)
	c.LastError = append(c.LastError, truncate(st.LastError, 1000))
	c.Event = append(c.Event, string(st.Event))
	c.Actor = append(c.Actor, string(st.Actor))
	c.Reason = append(c.Reason, truncate(st.Reason, 1000))
	c.PartialEvent = append(c.PartialEvent, string(st.OrderPartial))
	c.PartialTo = append(c.PartialTo, string(order.MustNext(order.StatePaid, st.OrderPartial)))
	c.FullEvent = append(c.FullEvent, string(st.OrderFull))
	c.FullTo = append(c.FullTo, string(order.MustNext(order.StatePaid, st.OrderFull)))
	c.Lease = append(c.Lease, leaseArg(st.Lease))
}
