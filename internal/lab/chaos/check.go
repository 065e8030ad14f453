package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/lab/receiver"
	"github.com/settlepay/settle/internal/order"
)

// The invariants a run checks at the end.
const (
	// InvOneCharge: at most one successful gateway charge per order, and
	// every charge is for one of Settle's attempts.
	InvOneCharge = 1
	// InvChargeSettled: every successful charge belongs to an order that is
	// PAID or NEEDS_REVIEW; every PAID order has its charge.
	InvChargeSettled = 2
	// InvSums: the sum charged at the gateway is the sum of the PAID
	// orders' amounts (and of the charged orders in review), per currency.
	InvSums = 3
	// InvNoCharging: nothing is left CHARGING after quiescence.
	InvNoCharging = 4
	// InvHistory: every order's history is a path of the transition table,
	// one event per transition, ending in the order's state.
	InvHistory = 5
	// InvAnswers: what clients were told stands: every order created
	// exists, and every PAID (CANCELED) answer is PAID (CANCELED).
	InvAnswers = 6
	// InvRequestID: every request_id names one attempt, and all its answers
	// named that attempt.
	InvRequestID = 7
	// InvEvents: every PAID order has exactly one order.paid event, and
	// every SUCCEEDED refund exactly one refund.succeeded event; every
	// event, an order's or a refund's, was delivered at least once, signed;
	// no event, in the database or received, is for a transition that did
	// not happen (each refund's history is a path of the refunds'
	// transition table, ending in the refund's state).
	InvEvents = 8
	// InvRefunds: per order, the gateway's succeeded refunds are Settle's
	// SUCCEEDED refunds (and refunds in review), their sum is the order's
	// refunded amount, never more than its charge, and its state says so
	// (PAID, PARTIALLY_REFUNDED, REFUNDED); nothing is left REFUNDING; every
	// refund answered SUCCEEDED is, and every refund request_id names one
	// refund.
	InvRefunds = 9
	// InvRefundOnce: no refund reference reaches the gateway twice (the
	// simulator does not deduplicate), and every refund at the gateway is
	// one of Settle's, for its order's charge.
	InvRefundOnce = 10
	// InvActionExit: no order leaves REQUIRES_ACTION but by a move of the
	// transition table (succeed, fail, escalate) recorded from
	// REQUIRES_ACTION, for the attempt that asked the customer to act, and
	// backed by the gateway: a fail only when the gateway declined or
	// canceled that charge, a succeed only when it charged it.
	InvActionExit = 11
	// InvActionCharge: no charge succeeds at the gateway for an order that
	// is PENDING or CANCELED at the end, and no charge still waits for the
	// customer (which they could yet complete) unless its order waits in
	// REQUIRES_ACTION for it (or in NEEDS_REVIEW, still looked up).
	InvActionCharge = 12
	// InvCaptureHold: captured ≤ authorized, for every capture MANUAL
	// order: at the gateway (the authorization's succeeded captures), in
	// Settle (captured_minor), and in what Settle asked for: the gateway
	// never refuses a capture of Settle's as more than the hold, since
	// Settle's claim admits only what is left of it.
	InvCaptureHold = 13
	// InvVoidCapture: no hold is both voided and captured, and nothing is
	// captured after a void succeeded.
	InvVoidCapture = 14
	// InvCaptureKnown: every capture and void Settle has SUCCEEDED exists,
	// succeeded, at the gateway; every capture and void at the gateway is
	// one of Settle's (for its order's authorization), reached it once,
	// and is SUCCEEDED (or in review) in Settle when it succeeded there;
	// nothing is left CAPTURING or VOIDING; every answer SUCCEEDED is, and
	// every request_id names one capture (void).
	InvCaptureKnown = 15
	// InvCapturedTotal: an order's captured total is the sum of its
	// SUCCEEDED captures, and the gateway's (give or take those in
	// review).
	InvCapturedTotal = 16
	// InvHoldState: a capture MANUAL order's state agrees with the
	// gateway's hold: PAID (or refunded since) when something was
	// captured, VOIDED when voided, EXPIRED when it lapsed with nothing
	// captured, AUTHORIZED while it is open.
	InvHoldState = 17

	// The invariants of the orders on the fake Adyen, against its ledger
	// (the sim's above check the simulator's orders only, but for the
	// histories, the answers and the events, which they check for all).

	// InvAdyenOneCharge: no order has two payments at Adyen with money
	// captured, no payment two captures of an AUTOMATIC order, and every
	// payment is for an attempt of one of Settle's Adyen orders.
	InvAdyenOneCharge = 18
	// InvAdyenChargeSettled: no forgotten charge: every payment with money
	// captured is the paying attempt of an order PAID (or refunded since),
	// or in NEEDS_REVIEW, or AUTHORIZED with a capture in review (its
	// notification lost); every PAID (or refunded) order has its payment captured, in
	// full when AUTOMATIC (or a capture_failed review item for it: Adyen
	// received the capture, then failed it), and its attempt records the
	// success.
	InvAdyenChargeSettled = 19
	// InvAdyenCapture: no capture beyond the hold: captured ≤ authorised
	// for every payment, Adyen never refuses one of Settle's captures or
	// refunds as beyond what is left, and a MANUAL order's captured total
	// is its SUCCEEDED captures' and Adyen's (give or take those in
	// review); every capture at Adyen is one of Settle's, once, and each
	// SUCCEEDED one succeeded there, or Adyen failed it after reporting
	// it done and a capture_failed review item says so (or its
	// CAPTURE_FAILED never reached Settle).
	InvAdyenCapture = 20
	// InvAdyenHold: no hold forgotten: every payment still holding money
	// at the end (authorised uncaptured, or waiting for 3-D Secure) is the
	// attempt its order waits on (AUTHORIZED, REQUIRES_ACTION, or
	// NEEDS_REVIEW or a capture_failed review item for a person); a VOIDED
	// order's payment is cancelled; no order is AUTHORIZED whose hold
	// lapsed at Adyen and whose EXPIRE reached Settle.
	InvAdyenHold = 21
	// InvAdyenTechnicalCancel: every technical cancel is backed by the
	// ledger: the attempt it names is Settle's and not the paying attempt
	// of a PAID order (but for a capture_failed review item), and no
	// payment with that reference holds or took money; every attempt Settle settled as never charged (not_found)
	// has a technical cancel that succeeded.
	InvAdyenTechnicalCancel = 22
	// InvAdyenRefunds: the refunds that succeeded at Adyen are Settle's
	// SUCCEEDED ones (or in review), for their order's payment, each
	// reference once; every SUCCEEDED refund succeeded there, or Adyen
	// failed it after its REFUND and a refund_failed review item says so
	// (or its REFUND_FAILED never reached Settle).
	InvAdyenRefunds = 23

	// InvDisputes: Settle's disputes are the simulator's, one for one,
	// each on the order whose attempt the gateway's charge was, with the
	// gateway's status, stage and amounts; each order's open disputes and
	// charged back amount are its disputes' at the gateway; and at the
	// gateway no charge paid out more in refunds and chargebacks than it
	// took.
	InvDisputes = 24
	// InvDisputeRefund: no refund was claimed while a dispute of its order
	// was open in Settle (the order's history numbers both).
	InvDisputeRefund = 25

	// The invariants of the orders with routes (issue #30), against the
	// ledger of every refpsp account (accounts.go).

	// InvRouteOneCharge: no order has succeeded charges on two accounts,
	// and no order with routes more than one succeeded charge over all of
	// them.
	InvRouteOneCharge = 26
	// InvCascadeWait: no attempt is claimed on another gateway while the
	// outcome of the attempt before it is unknown: in the order's history
	// the previous attempt was settled (back to PENDING) before the next
	// one's claim, to an outcome the cascade table takes for a proven
	// non-charge (order.CascadeAfter answers CascadeNext).
	InvCascadeWait = 27
	// InvCascadeProven: every attempt that cascaded (cascade_after) follows
	// an attempt on the gateway it names that the gateway's ledger shows
	// as not charged (no charge, or one declined).
	InvCascadeProven = 28

	// InvAudit: the gateway audit (issue #31), run over the whole run
	// after the drain on every simulator account (audit.go), finds
	// nothing but FOREIGN charges: the gateway's records and Settle's
	// agree, as the invariants above say from the ledgers.
	InvAudit = 29
)

// cascadeRequestSep joins a request id and a hop's number in the request
// id of the attempt of a cascade's hop (as package order's does).
const cascadeRequestSep = "/cascade-"

// adyenGateway is the gateway name of the orders on the fake Adyen.
const adyenGateway = "adyen"

var invariantNames = map[int]string{
	InvOneCharge: "one-charge", InvChargeSettled: "charge-settled", InvSums: "sums", InvNoCharging: "no-charging",
	InvHistory: "history", InvAnswers: "answers", InvRequestID: "request-id", InvEvents: "events",
	InvRefunds: "refunds", InvRefundOnce: "refund-once", InvActionExit: "action-exit", InvActionCharge: "action-charge",
	InvCaptureHold: "capture-hold", InvVoidCapture: "void-capture", InvCaptureKnown: "capture-known",
	InvCapturedTotal: "captured-total", InvHoldState: "hold-state",
	InvAdyenOneCharge: "adyen-one-charge", InvAdyenChargeSettled: "adyen-charge-settled", InvAdyenCapture: "adyen-capture",
	InvAdyenHold: "adyen-hold", InvAdyenTechnicalCancel: "adyen-technical-cancel", InvAdyenRefunds: "adyen-refunds",
	InvDisputes: "disputes", InvDisputeRefund: "dispute-refund",
	InvRouteOneCharge: "route-one-charge", InvCascadeWait: "cascade-wait", InvCascadeProven: "cascade-proven",
	InvAudit: "audit",
}

// Violation is one broken invariant.
type Violation struct {
	Invariant int
	// Order is the order concerned, when there is one.
	Order string
	Msg   string
}

func (v Violation) String() string {
	s := fmt.Sprintf("[%d %s] %s", v.Invariant, invariantNames[v.Invariant], v.Msg)
	if v.Order != "" {
		s += " (order " + v.Order + ")"
	}
	return s
}

type dbOrder struct {
	id, state, currency, current, gateway string
	// routed says the order was made with routes.
	routed              bool
	amount              int64
	refunded, refunding int64
	// manual says capture MANUAL; then the hold's totals.
	manual                          bool
	authorized, captured, capturing int64
	voiding, closed                 bool
	// openDisputes and chargedBack are the order's dispute totals.
	openDisputes int
	chargedBack  int64
}

// dbCapture is a row of captures, dbVoid one of voids.
type dbCapture struct {
	id, order, request, state, currency string
	amount                              int64
	final                               bool
	created                             time.Time
}

type dbVoid struct {
	id, order, request, state string
}

type dbRefund struct {
	id, order, request, state, currency string
	amount                              int64
}

type dbAttempt struct {
	id, order, request, outcome, chargeID, currency string
	amount                                          int64
	// gateway is the gateway the attempt was sent to, declineCode its
	// outcome's, cascadeAfter the proven outcome of the attempt it
	// cascaded after ("" when it did not).
	gateway, declineCode, cascadeAfter string
}

type dbEvent struct {
	// dispute is the dispute a dispute's row is about ("" for others);
	// reason is then the dispute's status after the change.
	order, from, to, event, actor, reason, attempt, dispute string
	id                                                      int64
	// typ is the event's type for merchants ("" for none); delivered
	// says the worker recorded it delivered.
	typ       string
	delivered bool
}

// dbRefundEvent is a row of a refund's history; id is its event number
// (refund_events.event_id), which it shares with the orders' events.
type dbRefundEvent struct {
	refund, order, from, to, event string
	id                             int64
	typ                            string
	delivered                      bool
}

// dbFindingEvent is an audit finding's event: its number, shared with the
// orders' events, the finding, and the order it names ("" for none).
type dbFindingEvent struct {
	id             int64
	finding, order string
}

// snapshot is the end state of a run: the database and the gateway's ledger.
type snapshot struct {
	orders   []dbOrder
	attempts []dbAttempt
	events   []dbEvent // by order, then id
	// refundEvents is every refund's history, by refund, then row.
	refundEvents []dbRefundEvent
	// findingEvents is every audit finding's event (audit.finding). The
	// harness audits after the drain, when no worker delivers: they are
	// checked only against what the endpoint received.
	findingEvents []dbFindingEvent
	// ledger is every refpsp account's charges; accountOf names the
	// account of each, by its id in ledger (see mergeLedgers).
	ledger    []sim.Charge
	accountOf map[string]string
	refunds   []dbRefund
	// refundLedger is the gateway's refunds.
	refundLedger []sim.Refund
	// received is what the merchant's endpoint received.
	received []receiver.Delivery
	// captures and voids are Settle's; captureLedger and voidLedger the
	// gateway's.
	captures      []dbCapture
	voids         []dbVoid
	captureLedger []sim.Capture
	voidLedger    []sim.Void
	// at is when the snapshot was taken, by the simulator's clock (this
	// process's): an authorization open past it has lapsed.
	at time.Time
	// adyen is the fake Adyen's ledger (empty when no order was on it).
	adyen adyenEnd
	// captureFailed holds the attempts with a review item of kind
	// capture_failed: Settle took the capture's "received" for a payment,
	// and the gateway then said it failed; a person is to look.
	captureFailed map[string]bool
	// refundFailed holds the attempts with a review item of kind
	// refund_failed: a refund Settle settled as succeeded, which the
	// gateway then said failed.
	refundFailed map[string]bool
	// disputes are Settle's, disputeLedger the simulator's.
	disputes      []dbDispute
	disputeLedger []sim.Dispute
}

// loadSnapshot reads the end state from the database, beside the
// ledgers of every refpsp account (the simulator "refpsp" first).
func loadSnapshot(ctx context.Context, pool *pgxpool.Pool, ledgers []accountLedger) (snapshot, error) {
	s := snapshot{at: time.Now()}
	s.ledger, s.refundLedger, s.captureLedger, s.voidLedger, s.accountOf = mergeLedgers(ledgers)
	var err error
	s.orders, err = queryAll(ctx, pool, `SELECT id::text, state, currency, coalesce(current_attempt::text, ''), gateway, amount_minor,
		refunded_minor, refunding_minor, capture_mode = 'manual', authorized_minor, captured_minor, capturing_minor,
		voiding, hold_closed, open_disputes, charged_back_minor, routes IS NOT NULL FROM orders`,
		func(r pgx.CollectableRow) (o dbOrder, err error) {
			return o, r.Scan(&o.id, &o.state, &o.currency, &o.current, &o.gateway, &o.amount, &o.refunded, &o.refunding,
				&o.manual, &o.authorized, &o.captured, &o.capturing, &o.voiding, &o.closed, &o.openDisputes, &o.chargedBack,
				&o.routed)
		})
	if err != nil {
		return s, err
	}
	s.captures, err = queryAll(ctx, pool, `SELECT id::text, order_id::text, request_id, state, currency, amount_minor, final,
		created_at FROM captures`,
		func(r pgx.CollectableRow) (c dbCapture, err error) {
			return c, r.Scan(&c.id, &c.order, &c.request, &c.state, &c.currency, &c.amount, &c.final, &c.created)
		})
	if err != nil {
		return s, err
	}
	s.voids, err = queryAll(ctx, pool, `SELECT id::text, order_id::text, request_id, state FROM voids`,
		func(r pgx.CollectableRow) (v dbVoid, err error) {
			return v, r.Scan(&v.id, &v.order, &v.request, &v.state)
		})
	if err != nil {
		return s, err
	}
	s.refunds, err = queryAll(ctx, pool, `SELECT id::text, order_id::text, request_id, state, currency, amount_minor FROM refunds`,
		func(r pgx.CollectableRow) (f dbRefund, err error) {
			return f, r.Scan(&f.id, &f.order, &f.request, &f.state, &f.currency, &f.amount)
		})
	if err != nil {
		return s, err
	}
	s.attempts, err = queryAll(ctx, pool, `SELECT id::text, order_id::text, request_id, coalesce(outcome, ''), gateway_charge_id,
		currency, amount_minor, gateway, decline_code, cascade_after FROM charge_attempts`,
		func(r pgx.CollectableRow) (a dbAttempt, err error) {
			return a, r.Scan(&a.id, &a.order, &a.request, &a.outcome, &a.chargeID, &a.currency, &a.amount,
				&a.gateway, &a.declineCode, &a.cascadeAfter)
		})
	if err != nil {
		return s, err
	}
	s.events, err = queryAll(ctx, pool, `SELECT order_id::text, coalesce(from_state, ''), to_state, event, actor, reason,
		coalesce(attempt_id::text, ''), coalesce(dispute_id::text, ''), id, coalesce(type, ''), delivered_at IS NOT NULL
		FROM order_events ORDER BY order_id, id`,
		func(r pgx.CollectableRow) (e dbEvent, err error) {
			return e, r.Scan(&e.order, &e.from, &e.to, &e.event, &e.actor, &e.reason, &e.attempt, &e.dispute, &e.id, &e.typ, &e.delivered)
		})
	if err != nil {
		return s, err
	}
	failed, err := queryAll(ctx, pool, `SELECT attempt_id::text FROM review_items WHERE kind = 'capture_failed'`,
		func(r pgx.CollectableRow) (id string, err error) { return id, r.Scan(&id) })
	if err != nil {
		return s, err
	}
	s.captureFailed = map[string]bool{}
	for _, id := range failed {
		s.captureFailed[id] = true
	}
	refundFailed, err := queryAll(ctx, pool, `SELECT attempt_id::text FROM review_items WHERE kind = 'refund_failed'`,
		func(r pgx.CollectableRow) (id string, err error) { return id, r.Scan(&id) })
	if err != nil {
		return s, err
	}
	s.refundFailed = map[string]bool{}
	for _, id := range refundFailed {
		s.refundFailed[id] = true
	}
	s.refundEvents, err = queryAll(ctx, pool, `SELECT refund_id::text, order_id::text, coalesce(from_state, ''), to_state, event,
		coalesce(event_id, 0), coalesce(type, ''), delivered_at IS NOT NULL FROM refund_events ORDER BY refund_id, id`,
		func(r pgx.CollectableRow) (e dbRefundEvent, err error) {
			return e, r.Scan(&e.refund, &e.order, &e.from, &e.to, &e.event, &e.id, &e.typ, &e.delivered)
		})
	if err != nil {
		return s, err
	}
	s.findingEvents, err = queryAll(ctx, pool, `SELECT event_id, id::text, coalesce(order_id::text, '')
		FROM audit_findings WHERE event_id IS NOT NULL ORDER BY event_id`,
		func(r pgx.CollectableRow) (e dbFindingEvent, err error) {
			return e, r.Scan(&e.id, &e.finding, &e.order)
		})
	if err != nil {
		return s, err
	}
	s.disputes, err = loadDisputes(ctx, pool)
	return s, err
}

func queryAll[T any](ctx context.Context, pool *pgxpool.Pool, sql string, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// check checks every invariant against the end state and what the clients
// were told.
func check(s snapshot, hist *history) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	orders := map[string]dbOrder{}
	for _, o := range s.orders {
		orders[o.id] = o
	}
	attempts := map[string]dbAttempt{}
	attemptsOf := map[string][]dbAttempt{}
	byRequest := map[string][]dbAttempt{}
	for _, a := range s.attempts {
		attempts[a.id] = a
		attemptsOf[a.order] = append(attemptsOf[a.order], a)
		byRequest[a.request] = append(byRequest[a.request], a)
	}
	events := map[string][]dbEvent{}
	for _, e := range s.events {
		events[e.order] = append(events[e.order], e)
	}

	// 1. At most one successful charge per order.
	charges := map[string][]sim.Charge{} // order → its successful charges
	charged := map[string]int64{}        // currency → sum charged
	for _, c := range s.ledger {
		if c.Status != "succeeded" {
			continue
		}
		charged[c.Currency] += c.Amount
		a, ok := attempts[c.Reference]
		if !ok {
			report(InvOneCharge, "", "gateway charge %s has reference %q, which is no attempt of Settle's", c.ID, c.Reference)
			continue
		}
		charges[a.order] = append(charges[a.order], c)
		if acc := s.accountOf[c.ID]; acc != "" && a.gateway != "" && acc != a.gateway {
			report(InvOneCharge, a.order, "gateway charge %s is in the ledger of %s; its attempt %s was sent to %s", c.ID, acc, a.id, a.gateway)
		}
		if c.Amount != a.amount || c.Currency != a.currency {
			report(InvSums, a.order, "gateway charge %s is for %d %s, its attempt %s for %d %s",
				c.ID, c.Amount, c.Currency, a.id, a.amount, a.currency)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(charges)) {
		if cs := charges[id]; len(cs) > 1 {
			report(InvOneCharge, id, "charged %d times at the gateway: %s", len(cs), chargeList(cs))
		}
	}

	// 2. Every charge settled: PAID, or in review for a person.
	paid := map[string]int64{} // currency → sum of PAID orders
	for _, o := range s.orders {
		cs := charges[o.id]
		if o.gateway == adyenGateway {
			continue // checkAdyen checks it against Adyen's ledger
		}
		if o.manual && len(cs) == 0 {
			continue // authorized, and captured or not: checkHolds checks it
		}
		switch o.state {
		case string(order.StatePaid), string(order.StatePartiallyRefunded), string(order.StateRefunded):
			// Refunds give money back; the charge stays.
			paid[o.currency] += o.amount
			if len(cs) == 0 {
				report(InvChargeSettled, o.id, "PAID, but the gateway has no charge for any of its attempts")
				break
			}
			if !slices.ContainsFunc(cs, func(c sim.Charge) bool { return c.Reference == o.current }) {
				report(InvChargeSettled, o.id, "PAID with attempt %s, but the gateway charged %s", o.current, chargeList(cs))
			}
			if a := attempts[o.current]; a.outcome != string(order.OutcomeSucceeded) {
				report(InvChargeSettled, o.id, "PAID, but its attempt %s records outcome %q", o.current, a.outcome)
			}
		case string(order.StateNeedsReview):
			for _, c := range cs {
				paid[o.currency] += c.Amount // charged, and visible to an operator
			}
		default:
			if len(cs) > 0 {
				report(InvChargeSettled, o.id, "%s, but the gateway charged it: %s", o.state, chargeList(cs))
			}
		}
	}

	// 3. The money adds up, currency by currency.
	for _, cur := range slices.Sorted(maps.Keys(mergeKeys(charged, paid))) {
		if charged[cur] != paid[cur] {
			report(InvSums, "", "%s: the gateway charged %d, the PAID orders (and charged orders in review) amount to %d",
				cur, charged[cur], paid[cur])
		}
	}

	// 4. Nothing left CHARGING, and 5. every history a path of the table.
	for _, o := range s.orders {
		if order.State(o.state).AwaitsGateway() {
			report(InvNoCharging, o.id, "still %s (attempt %s) after quiescence", o.state, o.current)
		}
		for _, msg := range checkHistory(o, events[o.id], attemptsOf[o.id]) {
			report(InvHistory, o.id, "%s", msg)
		}
	}
	for id := range events {
		if _, ok := orders[id]; !ok {
			report(InvHistory, id, "events of an order that does not exist")
		}
	}

	// 6. What the clients were told stands.
	for _, id := range slices.Sorted(maps.Keys(hist.orders)) {
		if _, ok := orders[id]; !ok {
			report(InvAnswers, id, "CreateOrder answered with this order (%s), the database does not have it", hist.orders[id])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hist.paid)) {
		if o, ok := orders[id]; ok && !order.State(o.state).Refundable() && o.state != string(order.StateRefunded) {
			report(InvAnswers, id, "ChargeOrder answered PAID, the order is %s", o.state)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hist.canceled)) {
		if o, ok := orders[id]; ok && o.state != string(order.StateCanceled) {
			report(InvAnswers, id, "CancelOrder answered CANCELED, the order is %s", o.state)
		}
	}

	// 8. Events: one order.paid per PAID order, each event delivered, and
	// nothing announced that did not happen.
	for _, msg := range checkEvents(s, orders) {
		report(InvEvents, msg.order, "%s", msg.msg)
	}

	// 7. One attempt per request_id, and every answer named it.
	for _, rid := range slices.Sorted(maps.Keys(byRequest)) {
		if as := byRequest[rid]; len(as) > 1 {
			report(InvRequestID, as[0].order, "request_id %s names %d attempts", rid, len(as))
		}
	}
	for _, rid := range slices.Sorted(maps.Keys(hist.requests)) {
		r := hist.requests[rid]
		// An answer names the last hop of the request's cascade, whose
		// attempt has a request id of its own (rid + cascadeRequestSep +
		// its number): it stands for the request's attempt here, once
		// checked to be a hop of it.
		hops := map[string]bool{}
		for id := range r.attempts {
			if a, ok := attempts[id]; ok && strings.HasPrefix(a.request, rid+cascadeRequestSep) {
				hops[id] = true
				if a.order != r.order {
					report(InvRequestID, r.order, "an answer to request_id %s named attempt %s, a hop of its cascade, for order %s", rid, id, a.order)
				}
			}
		}
		named := slices.Sorted(maps.Keys(r.attempts))
		named = slices.DeleteFunc(named, func(id string) bool { return hops[id] })
		if len(named) == 0 && len(hops) > 0 && len(byRequest[rid]) > 0 {
			named = []string{byRequest[rid][0].id}
		}
		if len(named) > 1 {
			report(InvRequestID, r.order, "the answers to request_id %s named %d attempts: %s", rid, len(named), strings.Join(named, ", "))
		}
		as := byRequest[rid]
		for _, id := range named {
			switch {
			case len(as) == 0:
				report(InvRequestID, r.order, "an answer to request_id %s named attempt %s; the database has no attempt for it", rid, id)
			case as[0].id != id:
				report(InvRequestID, r.order, "an answer to request_id %s named attempt %s; the database says %s", rid, id, as[0].id)
			}
		}
		if len(as) > 0 && as[0].order != r.order {
			report(InvRequestID, r.order, "request_id %s was sent for this order; its attempt %s is for order %s", rid, as[0].id, as[0].order)
		}
	}
	out = append(out, checkRefunds(s, hist, attempts)...)
	out = append(out, checkActions(s, orders, attempts, events)...)
	out = append(out, checkHolds(s, hist, orders, attempts)...)
	out = append(out, checkAdyen(s, orders, attempts)...)
	out = append(out, checkDisputes(s, orders, attempts, events)...)
	out = append(out, checkRoutes(s, orders, attemptsOf, events)...)
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Invariant, b.Invariant) })
	return out
}

// checkRefunds checks the refund invariants.
func checkRefunds(s snapshot, hist *history, attempts map[string]dbAttempt) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	onAdyen := map[string]bool{} // orders checkAdyen checks against Adyen's ledger
	for _, o := range s.orders {
		onAdyen[o.id] = o.gateway == adyenGateway
	}
	refunds := map[string]dbRefund{}
	byRequest := map[string]dbRefund{}
	for _, r := range s.refunds {
		refunds[r.id] = r
		byRequest[r.request] = r
	}

	// 9. Each refund reference once at the gateway, and each one Settle's.
	seen := map[string]int{}
	atGateway := map[string]int64{} // order → sum of the gateway's succeeded refunds
	for _, g := range s.refundLedger {
		seen[g.Reference]++
		r, ok := refunds[g.Reference]
		if !ok {
			report(InvRefundOnce, "", "gateway refund %s has reference %q, which is no refund of Settle's", g.ID, g.Reference)
			continue
		}
		if a, ok := attempts[g.ChargeReference]; !ok || a.order != r.order {
			report(InvRefundOnce, r.order, "gateway refund %s of refund %s refunds charge %s, not one of its order's", g.ID, r.id, g.ChargeReference)
		}
		if g.Amount != r.amount || g.Currency != r.currency {
			report(InvRefunds, r.order, "gateway refund %s is for %d %s, refund %s for %d %s", g.ID, g.Amount, g.Currency, r.id, r.amount, r.currency)
		}
		if g.Status != "succeeded" {
			continue
		}
		atGateway[r.order] += g.Amount
		if r.state != string(order.RefundSucceeded) && r.state != string(order.RefundNeedsReview) {
			report(InvRefunds, r.order, "the gateway refunded refund %s (%s); Settle has it %s", r.id, g.ID, r.state)
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[ref]; n > 1 {
			report(InvRefundOnce, refunds[ref].order, "refund reference %s reached the gateway %d times", ref, n)
		}
	}

	// 8. Per order, the sums and the state agree.
	succeeded := map[string]int64{}
	review := map[string]int64{}
	for _, r := range s.refunds {
		switch r.state {
		case string(order.RefundSucceeded):
			succeeded[r.order] += r.amount
			if !onAdyen[r.order] && !slices.ContainsFunc(s.refundLedger, func(g sim.Refund) bool { return g.Reference == r.id && g.Status == "succeeded" }) {
				report(InvRefunds, r.order, "refund %s is SUCCEEDED; the gateway has not refunded it", r.id)
			}
		case string(order.RefundNeedsReview):
			review[r.order] += r.amount
		case string(order.RefundRefunding), string(order.RefundPending):
			report(InvRefunds, r.order, "refund %s still %s after quiescence", r.id, r.state)
		}
	}
	for _, o := range s.orders {
		if o.refunded != succeeded[o.id] {
			report(InvRefunds, o.id, "refunded %d, its SUCCEEDED refunds amount to %d", o.refunded, succeeded[o.id])
		}
		if o.refunding != review[o.id] {
			report(InvRefunds, o.id, "refunding %d after quiescence, its refunds in review amount to %d", o.refunding, review[o.id])
		}
		switch g := atGateway[o.id]; {
		case onAdyen[o.id]:
			// checkAdyen compares an Adyen order's with Adyen's refunds.
		case g > o.amount:
			report(InvRefunds, o.id, "the gateway refunded %d of a charge of %d", g, o.amount)
		case g < succeeded[o.id] || g > succeeded[o.id]+review[o.id]:
			report(InvRefunds, o.id, "the gateway refunded %d; Settle's SUCCEEDED refunds amount to %d (and %d in review)", g, succeeded[o.id], review[o.id])
		}
		var want string
		switch {
		case o.refunded == 0:
			want = o.state // PAID or any state before
			if o.state == string(order.StatePartiallyRefunded) || o.state == string(order.StateRefunded) {
				want = string(order.StatePaid)
			}
		case o.refunded < o.amount:
			want = string(order.StatePartiallyRefunded)
		default:
			want = string(order.StateRefunded)
		}
		if o.state != want {
			report(InvRefunds, o.id, "%s with %d of %d refunded", o.state, o.refunded, o.amount)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hist.refunded)) {
		if r, ok := refunds[id]; !ok || r.state != string(order.RefundSucceeded) {
			report(InvRefunds, r.order, "RefundOrder answered refund %s SUCCEEDED; Settle has it %q", id, r.state)
		}
	}
	for _, rid := range slices.Sorted(maps.Keys(hist.refundReqs)) {
		req := hist.refundReqs[rid]
		named := slices.Sorted(maps.Keys(req.refunds))
		if len(named) > 1 {
			report(InvRefunds, req.order, "the answers to refund request_id %s named %d refunds: %s", rid, len(named), strings.Join(named, ", "))
		}
		for _, id := range named {
			if r, ok := byRequest[rid]; !ok || r.id != id || r.order != req.order {
				report(InvRefunds, req.order, "an answer to refund request_id %s named refund %s; the database says %q", rid, id, r.id)
			}
		}
	}
	return out
}

// checkActions checks the 3-D Secure invariants: how orders left
// REQUIRES_ACTION, against the gateway's ledger, and that no charge is
// taken, or can still be taken, for an order that is not to be paid.
func checkActions(s snapshot, orders map[string]dbOrder, attempts map[string]dbAttempt, events map[string][]dbEvent) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	// The gateway's last word on each attempt (the simulator does not
	// deduplicate, so an attempt may have several charges: any succeeded
	// one counts, else any that still waits, else a decline).
	gateway := map[string]string{}
	rank := map[string]int{sim.StatusSucceeded: 3, sim.StatusRequiresAction: 2, sim.StatusDeclined: 1}
	for _, c := range s.ledger {
		if rank[c.Status] > rank[gateway[c.Reference]] {
			gateway[c.Reference] = c.Status
		}
	}
	for _, p := range s.adyen.payments {
		st := simStatus(p)
		if s.captureFailed[p.Reference] {
			st = sim.StatusSucceeded // a person was told the capture Settle took for done failed
		}
		if rank[st] > rank[gateway[p.Reference]] {
			gateway[p.Reference] = st
		}
	}

	// 11. Out of REQUIRES_ACTION only by a guarded move of the table.
	for _, id := range slices.Sorted(maps.Keys(events)) {
		evs := events[id]
		asked := "" // the attempt that asked the customer to act
		for i, e := range evs {
			if order.EventName(e.event) == order.EventRequireAction {
				asked = e.attempt
				if gateway[e.attempt] == "" {
					report(InvActionExit, id, "event %d: REQUIRES_ACTION for attempt %s, which the gateway never saw", i, e.attempt)
				}
				continue
			}
			if e.from != string(order.StateRequiresAction) {
				continue
			}
			if _, err := order.Next(order.StateRequiresAction, order.EventName(e.event)); err != nil {
				report(InvActionExit, id, "event %d: %s (by %s) leaves REQUIRES_ACTION, which the transition table refuses", i, e.event, e.actor)
				continue
			}
			if i == 0 || evs[i-1].to != string(order.StateRequiresAction) || e.attempt != asked {
				report(InvActionExit, id, "event %d: %s leaves REQUIRES_ACTION for attempt %s; the order was waiting for attempt %s (previous event to %s)",
					i, e.event, e.attempt, asked, evs[max(i-1, 0)].to)
			}
			switch st := gateway[e.attempt]; order.EventName(e.event) {
			case order.EventFail:
				if st != sim.StatusDeclined {
					report(InvActionExit, id, "event %d: fail (%s) out of REQUIRES_ACTION, but the gateway has attempt %s %q, not declined or canceled",
						i, e.reason, e.attempt, st)
				}
			case order.EventSucceed:
				if st != sim.StatusSucceeded {
					report(InvActionExit, id, "event %d: succeed out of REQUIRES_ACTION, but the gateway has attempt %s %q", i, e.attempt, st)
				}
			default: // no other event leaves REQUIRES_ACTION for the gateway's reason
			}
		}
	}

	// 12. No charge taken, or still open to the customer, for an order that
	// is not to be paid.
	for _, ref := range slices.Sorted(maps.Keys(gateway)) {
		a, ok := attempts[ref]
		if !ok {
			continue // InvOneCharge reports it
		}
		o := orders[a.order]
		switch st := gateway[ref]; {
		case st == sim.StatusSucceeded && (o.state == string(order.StatePending) || o.state == string(order.StateCanceled)):
			report(InvActionCharge, o.id, "the gateway charged attempt %s; the order is %s", ref, o.state)
		case st == sim.StatusRequiresAction && o.state == string(order.StateNeedsReview):
			// A person decides; the reconciler still looks, and a charge
			// the customer completes meanwhile makes the order PAID.
		case st == sim.StatusRequiresAction && (o.state != string(order.StateRequiresAction) || o.current != ref):
			report(InvActionCharge, o.id, "the gateway's charge for attempt %s still waits for the customer, who can complete it; the order is %s (attempt %s)",
				ref, o.state, o.current)
		}
	}
	return out
}

// checkHistory checks one order's history: it starts with the creation in
// PENDING, every later event is a move of the transition table from the
// state the previous one left, settling events name the attempt in flight,
// each attempt was made by one charge event, and the last event leaves the
// order in the state it is in.
func checkHistory(o dbOrder, evs []dbEvent, attempts []dbAttempt) []string {
	if len(evs) == 0 {
		return []string{"no history"}
	}
	var bad []string
	if e := evs[0]; e.event != string(order.EventCreate) || e.from != "" || e.to != string(order.StatePending) {
		bad = append(bad, fmt.Sprintf("history starts with %s from %q to %s, not its creation in PENDING", e.event, e.from, e.to))
	}
	state := order.StatePending
	inFlight := ""
	made := map[string]bool{}
	for i, e := range evs[1:] {
		if ev := order.EventName(e.event); ev == order.EventCaptured || ev == order.EventCaptureFailed || e.dispute != "" {
			// A capture, or a dispute's change, that moves no order: a
			// row from and to its state.
			if e.from != string(state) || e.to != string(state) {
				bad = append(bad, fmt.Sprintf("event %d: %s recorded from %s to %s; the order was %s", i+1, e.event, e.from, e.to, state))
			}
			continue
		}
		to, err := order.Next(state, order.EventName(e.event))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("event %d: %s (by %s) from %s, which the transition table refuses", i+1, e.event, e.actor, state))
		case e.from != string(state) || e.to != string(to):
			bad = append(bad, fmt.Sprintf("event %d: %s recorded from %s to %s; the order was %s, so it leads to %s",
				i+1, e.event, e.from, e.to, state, to))
		}
		switch order.EventName(e.event) {
		case order.EventCharge:
			if made[e.attempt] || e.attempt == "" {
				bad = append(bad, fmt.Sprintf("event %d: charge with attempt %q, which another charge event made or is empty", i+1, e.attempt))
			}
			made[e.attempt] = true
			inFlight = e.attempt
		case order.EventSucceed, order.EventFail, order.EventEscalate, order.EventAuthorize:
			if e.attempt != inFlight {
				bad = append(bad, fmt.Sprintf("event %d: %s settles attempt %s, but attempt %s is in flight", i+1, e.event, e.attempt, inFlight))
			}
		default: // the others make or settle no attempt
		}
		if err == nil {
			state = to
		} else {
			state = order.State(e.to)
		}
	}
	if string(state) != o.state {
		bad = append(bad, fmt.Sprintf("history ends in %s, the order is %s", state, o.state))
	}
	for _, a := range attempts {
		if !made[a.id] {
			bad = append(bad, fmt.Sprintf("attempt %s (request_id %s) has no charge event", a.id, a.request))
		}
	}
	if len(made) != len(attempts) {
		bad = append(bad, fmt.Sprintf("%d charge events for %d attempts", len(made), len(attempts)))
	}
	if inFlight != "" && o.current != inFlight {
		bad = append(bad, fmt.Sprintf("current attempt is %s, the last charge event made %s", o.current, inFlight))
	}
	return bad
}

func chargeList(cs []sim.Charge) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = fmt.Sprintf("%s (reference %s, %d %s)", c.ID, c.Reference, c.Amount, c.Currency)
	}
	return strings.Join(s, ", ")
}

func mergeKeys(a, b map[string]int64) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// describe renders an order's history for a report.
func describe(o dbOrder, evs []dbEvent, attempts []dbAttempt, cs []sim.Charge) string {
	var b strings.Builder
	fmt.Fprintf(&b, "order %s: %s, %d %s, current attempt %s\n", o.id, o.state, o.amount, o.currency, o.current)
	for _, e := range evs {
		fmt.Fprintf(&b, "  event %d: %-8s %-12s -> %-12s by %-10s attempt %s %s\n", e.id, e.event, e.from, e.to, e.actor, e.attempt, e.reason)
	}
	for _, a := range attempts {
		fmt.Fprintf(&b, "  attempt %s: request_id %s, outcome %q, charge %q\n", a.id, a.request, a.outcome, a.chargeID)
	}
	for _, c := range cs {
		fmt.Fprintf(&b, "  gateway: %s %s reference %s %d %s at %s\n", c.ID, c.Status, c.Reference, c.Amount, c.Currency, c.Created.Format("15:04:05.000"))
	}
	return b.String()
}

type orderMsg struct{ order, msg string }

// checkEvents checks the events against the orders and what the merchant's
// endpoint received.
func checkEvents(s snapshot, orders map[string]dbOrder) []orderMsg {
	var out []orderMsg
	byID := map[string]dbEvent{}
	paidEvents := map[string]int{}
	firstCaptures := map[string]int{} // order → its moves AUTHORIZED → PAID
	received := map[string]int{}
	for _, d := range s.received {
		received[d.EventID]++
	}
	for _, e := range s.events {
		if e.typ == "" {
			if want := announcement(e); want != "" {
				out = append(out, orderMsg{e.order, fmt.Sprintf("the move %s→%s (%s) is announced by no event, want %s", e.from, e.to, e.event, want)})
			}
			continue
		}
		id := order.EventID(e.id)
		byID[id] = e
		if e.typ == "order.paid" {
			paidEvents[e.order]++
		}
		if order.EventName(e.event) == order.EventCapture {
			firstCaptures[e.order]++
		}
		if want := announcement(e); e.typ != want {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s is %s for the move %s→%s (%s), which announces %q",
				id, e.typ, e.from, e.to, e.event, want)})
		}
		// The order's history is checked as a path of the table (5); an
		// announced state must be where the order is, or has been since.
		if o, ok := orders[e.order]; ok && order.State(e.to).Terminal() && o.state != e.to {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s (%s) announces %s, the order is %s", id, e.typ, e.to, o.state)})
		}
		if !e.delivered {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s (%s) was never recorded delivered", id, e.typ)})
		}
		if received[id] == 0 {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s (%s) never reached the merchant's endpoint", id, e.typ)})
		}
	}
	for _, o := range s.orders {
		if o.manual {
			// Paid by its first capture, announced as capture.succeeded.
			if st := order.State(o.state); (st.Refundable() || st == order.StateRefunded) && (paidEvents[o.id] != 0 || firstCaptures[o.id] != 1) {
				out = append(out, orderMsg{o.id, fmt.Sprintf("%s by capture with %d order.paid events and %d captures from AUTHORIZED, want 0 and 1",
					o.state, paidEvents[o.id], firstCaptures[o.id])})
			}
			continue
		}
		if st := order.State(o.state); (st.Refundable() || st == order.StateRefunded) && paidEvents[o.id] != 1 {
			// Paid, and perhaps refunded since.
			out = append(out, orderMsg{o.id, fmt.Sprintf("%s with %d order.paid events, want 1", o.state, paidEvents[o.id])})
		}
	}
	refundOf := map[string]string{} // event id → refund
	out = append(out, checkRefundEvents(s, byID, refundOf, received)...)
	findings := map[string]dbFindingEvent{} // event id → the finding's event
	for _, e := range s.findingEvents {
		findings[order.EventID(e.id)] = e
	}
	for _, d := range s.received {
		e, ok := byID[d.EventID]
		switch {
		case !d.Verified:
			out = append(out, orderMsg{d.OrderID, fmt.Sprintf("delivery of %s did not verify with the merchant's secret", d.EventID)})
		case d.Type == order.EventAuditFinding:
			// An audit finding's event is no order's change: it must be
			// the event of the finding it carries.
			if f, ok := findings[d.EventID]; !ok || f.finding != d.FindingID || f.order != d.OrderID {
				out = append(out, orderMsg{d.OrderID, fmt.Sprintf("the endpoint received %s as finding %q of order %q; the database has %+v",
					d.EventID, d.FindingID, d.OrderID, f)})
			}
		case !ok:
			out = append(out, orderMsg{d.OrderID, fmt.Sprintf("the endpoint received %s (%s), which is no event in the database", d.EventID, d.Type)})
		case e.typ != d.Type || e.order != d.OrderID || e.to != d.State || refundOf[d.EventID] != d.RefundID:
			out = append(out, orderMsg{d.OrderID, fmt.Sprintf("the endpoint received %s as %s of order %s (refund %q) in %s; the database has %s of order %s (refund %q) in %s",
				d.EventID, d.Type, d.OrderID, d.RefundID, d.State, e.typ, e.order, refundOf[d.EventID], e.to)})
		}
	}
	return out
}

// checkRefundEvents checks the refunds' events: each refund's history is a
// path of the refunds' transition table from its creation, ending in the
// refund's state; each row docs/api.md announces is an event of that type,
// delivered and received; and every SUCCEEDED refund has exactly one
// refund.succeeded event. It adds the refunds' events to byID (for the
// check of what was received) and their refunds to refundOf.
func checkRefundEvents(s snapshot, byID map[string]dbEvent, refundOf map[string]string, received map[string]int) []orderMsg {
	var out []orderMsg
	state := map[string]order.RefundState{} // refund → the state its history has reached
	succeeded := map[string]int{}
	for _, e := range s.refundEvents {
		prev, seen := state[e.refund]
		switch {
		case !seen && (e.event != string(order.EventCreate) || e.from != "" || e.to != string(order.RefundPending)):
			out = append(out, orderMsg{e.order, fmt.Sprintf("refund %s: history starts with %s from %q to %s, not its creation in PENDING",
				e.refund, e.event, e.from, e.to)})
		case seen:
			to, err := order.NextRefund(prev, order.EventName(e.event))
			if err != nil || e.from != string(prev) || e.to != string(to) {
				out = append(out, orderMsg{e.order, fmt.Sprintf("refund %s: %s recorded from %s to %s; the refund was %s, which the refunds' table does not lead there",
					e.refund, e.event, e.from, e.to, prev)})
			}
		}
		state[e.refund] = order.RefundState(e.to)
		want := refundAnnouncement(e.to)
		if !seen {
			want = ""
		}
		if e.typ != want {
			out = append(out, orderMsg{e.order, fmt.Sprintf("refund %s: the move %s→%s (%s) is event %q, want %q", e.refund, e.from, e.to, e.event, e.typ, want)})
		}
		if e.typ == "" {
			continue
		}
		id := order.EventID(e.id)
		if _, dup := byID[id]; dup {
			out = append(out, orderMsg{e.order, fmt.Sprintf("refund %s: event %s has the number of another event", e.refund, id)})
		}
		byID[id] = dbEvent{order: e.order, from: e.from, to: e.to, event: e.event, id: e.id, typ: e.typ, delivered: e.delivered}
		refundOf[id] = e.refund
		if e.typ == "refund.succeeded" {
			succeeded[e.refund]++
		}
		if !e.delivered {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s (%s of refund %s) was never recorded delivered", id, e.typ, e.refund)})
		}
		if received[id] == 0 {
			out = append(out, orderMsg{e.order, fmt.Sprintf("event %s (%s of refund %s) never reached the merchant's endpoint", id, e.typ, e.refund)})
		}
	}
	for _, r := range s.refunds {
		if st, ok := state[r.id]; !ok || string(st) != r.state {
			out = append(out, orderMsg{r.order, fmt.Sprintf("refund %s is %s; its history ends in %q", r.id, r.state, st)})
		}
		if r.state == string(order.RefundSucceeded) && succeeded[r.id] != 1 {
			out = append(out, orderMsg{r.order, fmt.Sprintf("refund %s is SUCCEEDED with %d refund.succeeded events, want 1", r.id, succeeded[r.id])})
		}
	}
	return out
}

// refundAnnouncement is the event type that docs/api.md promises for a
// refund's move to state to, worked out apart from the database's mapping:
// "" for the claim.
func refundAnnouncement(to string) string {
	if to == string(order.RefundPending) || to == string(order.RefundRefunding) {
		return ""
	}
	return "refund." + strings.ToLower(to)
}

// announcement is the event type that docs/api.md promises for a move of
// the history, worked out here apart from the database's mapping: "" for
// the creation and the claims.
func announcement(e dbEvent) string {
	switch order.EventName(e.event) {
	case order.EventCapture, order.EventCaptured:
		return "capture.succeeded"
	case order.EventCaptureFailed:
		return "capture.failed"
	default:
	}
	if e.dispute != "" {
		// dispute_opened, dispute_updated, dispute_closed.
		return strings.Replace(e.event, "_", ".", 1)
	}
	switch {
	case e.to == string(order.StateExpired):
		return "order.authorization_expired"
	case e.to == string(order.StatePending) && e.from != "":
		return "order.payment_failed"
	case e.to == string(order.StatePending), e.to == string(order.StateCharging):
		return ""
	}
	return "order." + strings.ToLower(e.to)
}

// holdStatus is the gateway's word on an authorization at the end of a
// run: its ledger's status, an open one past capture_before taken as
// lapsed (the simulator lapses it at its next lookup), "" for none.
func holdStatus(a sim.Charge, at time.Time) string {
	if a.Status == sim.StatusAuthorized && !a.CaptureBefore.After(at) {
		if a.AmountCaptured > 0 {
			return sim.StatusCaptured
		}
		return sim.StatusExpired
	}
	return a.Status
}

// isHold reports whether the gateway's charge c is an authorization that
// succeeded (whatever became of it since).
func isHold(c sim.Charge) bool {
	switch c.Status {
	case sim.StatusAuthorized, sim.StatusCaptured, sim.StatusVoided, sim.StatusExpired:
		return c.Manual
	}
	return false
}

// checkHolds checks the invariants of authorizations, captures and voids
// against the gateway's ledgers.
func checkHolds(s snapshot, hist *history, orders map[string]dbOrder, attempts map[string]dbAttempt) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	// The gateway's authorizations, by attempt (the latest record of a
	// reference, which the simulator does not deduplicate), and its
	// captures and voids by reference.
	holds := map[string]sim.Charge{}
	holdsOf := map[string][]string{} // order → its attempts the gateway authorized
	for _, c := range s.ledger {
		if !isHold(c) {
			continue
		}
		a, ok := attempts[c.Reference]
		if !ok {
			continue // InvOneCharge reports it
		}
		if _, seen := holds[c.Reference]; !seen {
			holdsOf[a.order] = append(holdsOf[a.order], c.Reference)
		}
		holds[c.Reference] = c
	}
	for _, id := range slices.Sorted(maps.Keys(holdsOf)) {
		if refs := holdsOf[id]; len(refs) > 1 {
			report(InvOneCharge, id, "authorized %d times at the gateway: attempts %s", len(refs), strings.Join(refs, ", "))
		}
	}
	captures := map[string]dbCapture{}
	capturesOf := map[string][]dbCapture{}
	captureByRequest := map[string][]dbCapture{}
	for _, c := range s.captures {
		captures[c.id] = c
		capturesOf[c.order] = append(capturesOf[c.order], c)
		captureByRequest[c.request] = append(captureByRequest[c.request], c)
	}
	voids := map[string]dbVoid{}
	voidsOf := map[string][]dbVoid{}
	voidByRequest := map[string][]dbVoid{}
	for _, v := range s.voids {
		voids[v.id] = v
		voidsOf[v.order] = append(voidsOf[v.order], v)
		voidByRequest[v.request] = append(voidByRequest[v.request], v)
	}

	// The gateway's captures: each one Settle's, once, for its order's
	// authorization; never refused as more than the hold.
	seen := map[string]int{}
	gwCaptured := map[string]int64{}       // order → the gateway's succeeded captures
	gwCaptures := map[string]sim.Capture{} // Settle's capture → the gateway's succeeded one
	voidedAt := map[string]time.Time{}     // authorization → its succeeded void
	for _, v := range s.voidLedger {
		if v.Status == refpsp.OpSucceeded {
			if t, ok := voidedAt[v.ChargeReference]; !ok || v.Created.Before(t) {
				voidedAt[v.ChargeReference] = v.Created
			}
		}
	}
	for _, g := range s.captureLedger {
		seen[g.Reference]++
		c, ok := captures[g.Reference]
		if !ok {
			report(InvCaptureKnown, "", "gateway capture %s has reference %q, which is no capture of Settle's", g.ID, g.Reference)
			continue
		}
		if a, ok := attempts[g.ChargeReference]; !ok || a.order != c.order {
			report(InvCaptureKnown, c.order, "gateway capture %s of capture %s captures authorization %s, not its order's", g.ID, c.id, g.ChargeReference)
		}
		if g.Amount != c.amount || g.Currency != c.currency || g.Final != c.final {
			report(InvCaptureKnown, c.order, "gateway capture %s is for %d %s (final %t), capture %s for %d %s (final %t)",
				g.ID, g.Amount, g.Currency, g.Final, c.id, c.amount, c.currency, c.final)
		}
		if g.Status == refpsp.OpFailed && g.FailureCode == refpsp.FailureTooLarge {
			o := orders[c.order]
			report(InvCaptureHold, c.order, "the gateway refused capture %s of %d as more than the hold: Settle admitted it with %d captured of %d authorized",
				c.id, c.amount, o.captured, o.authorized)
		}
		if g.Status != refpsp.OpSucceeded {
			continue
		}
		gwCaptured[c.order] += g.Amount
		gwCaptures[c.id] = g
		if c.state != string(order.CaptureSucceeded) && c.state != string(order.CaptureNeedsReview) {
			report(InvCaptureKnown, c.order, "the gateway captured capture %s (%s); Settle has it %s", c.id, g.ID, c.state)
		}
		if t, ok := voidedAt[g.ChargeReference]; ok {
			report(InvVoidCapture, c.order, "the gateway captured capture %s at %s and voided authorization %s at %s",
				c.id, g.Created.Format("15:04:05.000"), g.ChargeReference, t.Format("15:04:05.000"))
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[ref]; n > 1 {
			report(InvCaptureKnown, captures[ref].order, "capture reference %s reached the gateway %d times", ref, n)
		}
	}
	gwVoided := map[string]bool{} // Settle's void → succeeded at the gateway
	seen = map[string]int{}
	for _, g := range s.voidLedger {
		seen[g.Reference]++
		v, ok := voids[g.Reference]
		if !ok {
			report(InvCaptureKnown, "", "gateway void %s has reference %q, which is no void of Settle's", g.ID, g.Reference)
			continue
		}
		if a, ok := attempts[g.ChargeReference]; !ok || a.order != v.order {
			report(InvCaptureKnown, v.order, "gateway void %s of void %s voids authorization %s, not its order's", g.ID, v.id, g.ChargeReference)
		}
		if g.Status != refpsp.OpSucceeded {
			continue
		}
		gwVoided[v.id] = true
		if v.state != string(order.VoidSucceeded) && v.state != string(order.VoidNeedsReview) {
			report(InvCaptureKnown, v.order, "the gateway voided void %s (%s); Settle has it %s", v.id, g.ID, v.state)
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[ref]; n > 1 {
			report(InvCaptureKnown, voids[ref].order, "void reference %s reached the gateway %d times", ref, n)
		}
	}

	// Settle's captures and voids: each SUCCEEDED one at the gateway,
	// none left in flight, every answer standing.
	for _, c := range s.captures {
		switch c.state {
		case string(order.CaptureSucceeded):
			if _, ok := gwCaptures[c.id]; !ok && orders[c.order].gateway != adyenGateway {
				report(InvCaptureKnown, c.order, "capture %s is SUCCEEDED; the gateway has not captured it", c.id)
			}
		case string(order.CapturePending), string(order.CaptureCapturing):
			report(InvCaptureKnown, c.order, "capture %s still %s after quiescence", c.id, c.state)
		}
	}
	for _, v := range s.voids {
		switch v.state {
		case string(order.VoidSucceeded):
			if !gwVoided[v.id] && orders[v.order].gateway != adyenGateway {
				report(InvCaptureKnown, v.order, "void %s is SUCCEEDED; the gateway has not voided it", v.id)
			}
		case string(order.VoidPending), string(order.VoidVoiding):
			report(InvCaptureKnown, v.order, "void %s still %s after quiescence", v.id, v.state)
		}
	}
	for _, kind := range []struct {
		name   string
		done   map[string]bool
		reqs   map[string]*holdRequest
		state  func(id string) (string, bool)
		ids    func(request string) []string
		wanted string
	}{
		{"capture", hist.captured, hist.captureReqs,
			func(id string) (string, bool) { c, ok := captures[id]; return c.state, ok },
			func(rid string) []string {
				return idsOf(captureByRequest[rid], func(c dbCapture) string { return c.id })
			},
			string(order.CaptureSucceeded)},
		{"void", hist.voided, hist.voidReqs,
			func(id string) (string, bool) { v, ok := voids[id]; return v.state, ok },
			func(rid string) []string { return idsOf(voidByRequest[rid], func(v dbVoid) string { return v.id }) },
			string(order.VoidSucceeded)},
	} {
		for _, id := range slices.Sorted(maps.Keys(kind.done)) {
			if st, ok := kind.state(id); !ok || st != kind.wanted {
				report(InvCaptureKnown, "", "the answer said %s %s SUCCEEDED; Settle has it %q", kind.name, id, st)
			}
		}
		for _, rid := range slices.Sorted(maps.Keys(kind.reqs)) {
			req := kind.reqs[rid]
			named := slices.Sorted(maps.Keys(req.named))
			have := kind.ids(rid)
			if len(named) > 1 || len(have) > 1 {
				report(InvCaptureKnown, req.order, "%s request_id %s: the answers named %s, the database has %s",
					kind.name, rid, strings.Join(named, ", "), strings.Join(have, ", "))
			}
			for _, id := range named {
				if !slices.Contains(have, id) {
					report(InvCaptureKnown, req.order, "an answer to %s request_id %s named %s; the database has %v", kind.name, rid, id, have)
				}
			}
		}
	}

	// Per order: the totals, the hold and the state agree.
	for _, o := range s.orders {
		if o.gateway == adyenGateway {
			continue // checkAdyen checks it
		}
		if !o.manual {
			if len(capturesOf[o.id]) > 0 || len(voidsOf[o.id]) > 0 || len(holdsOf[o.id]) > 0 {
				report(InvHoldState, o.id, "capture AUTOMATIC, with %d captures, %d voids and %d authorizations at the gateway",
					len(capturesOf[o.id]), len(voidsOf[o.id]), len(holdsOf[o.id]))
			}
			continue
		}
		var succeeded, review int64
		var voided, voidReview, captureReview bool
		for _, c := range capturesOf[o.id] {
			switch c.state {
			case string(order.CaptureSucceeded):
				succeeded += c.amount
			case string(order.CaptureNeedsReview):
				review += c.amount
				captureReview = true
			}
		}
		for _, v := range voidsOf[o.id] {
			voided = voided || v.state == string(order.VoidSucceeded)
			voidReview = voidReview || v.state == string(order.VoidNeedsReview)
		}
		if o.captured > o.authorized {
			report(InvCaptureHold, o.id, "captured %d of %d authorized", o.captured, o.authorized)
		}
		if o.captured != succeeded {
			report(InvCapturedTotal, o.id, "captured %d, its SUCCEEDED captures amount to %d", o.captured, succeeded)
		}
		if o.capturing != review {
			report(InvCapturedTotal, o.id, "capturing %d after quiescence, its captures in review amount to %d", o.capturing, review)
		}
		if g := gwCaptured[o.id]; g < succeeded || g > succeeded+review {
			report(InvCapturedTotal, o.id, "the gateway captured %d; Settle's SUCCEEDED captures amount to %d (and %d in review)", g, succeeded, review)
		}
		if voided && (succeeded > 0 || gwCaptured[o.id] > 0) {
			report(InvVoidCapture, o.id, "voided, and captured %d (the gateway %d)", succeeded, gwCaptured[o.id])
		}
		if voided {
			for _, c := range capturesOf[o.id] {
				if c.state == string(order.CaptureSucceeded) || c.state == string(order.CaptureNeedsReview) {
					report(InvVoidCapture, o.id, "void SUCCEEDED beside capture %s %s", c.id, c.state)
				}
			}
		}

		// The gateway's hold of the order's attempt against its state.
		st := order.State(o.state)
		if st == order.StateNeedsReview {
			continue // the charge is a person's to decide
		}
		hold, held := holds[o.current]
		for _, ref := range holdsOf[o.id] {
			if ref != o.current {
				report(InvHoldState, o.id, "the gateway authorized attempt %s (%s), which is not the order's attempt %s", ref, holds[ref].Status, o.current)
			}
		}
		if held && hold.Amount != o.authorized && st != order.StatePending && st != order.StateCanceled {
			report(InvCaptureHold, o.id, "authorized %d; the gateway holds %d", o.authorized, hold.Amount)
		}
		var gw, want string // the gateway's hold, and the state it means
		switch gw = holdStatus(hold, s.at); {
		case !held:
			gw = "none"
		case gwCaptured[o.id] > 0:
			gw, want = "captured", string(order.StatePaid)
		case gw == sim.StatusVoided:
			want = string(order.StateVoided)
		case gw == sim.StatusExpired:
			want = string(order.StateExpired)
		case gw == sim.StatusAuthorized:
			want = string(order.StateAuthorized)
		}
		have := o.state
		if st.Refundable() || st == order.StateRefunded {
			have = string(order.StatePaid) // captured, and perhaps refunded since
		}
		held = have == string(order.StatePaid) || have == string(order.StateVoided) ||
			have == string(order.StateExpired) || have == string(order.StateAuthorized)
		switch {
		case have == want, want == "" && !held:
		case have == string(order.StateAuthorized) && (captureReview && want == string(order.StatePaid) ||
			voidReview && want == string(order.StateVoided)):
			// A capture or void in review: a person decides.
		default:
			report(InvHoldState, o.id, "%s (captured %d); the gateway's hold of attempt %s is %s (captured %d, capture_before %s)",
				o.state, o.captured, o.current, gw, gwCaptured[o.id], hold.CaptureBefore.Format("15:04:05.000"))
		}
	}
	return out
}

func idsOf[T any](rows []T, id func(T) string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = id(r)
	}
	return out
}

// simStatus is an Adyen payment's status in the simulator's words, for the
// 3-D Secure invariants: charged (whatever became of the hold since),
// waiting for the customer, or declined or canceled.
func simStatus(p adyenfake.Payment) string {
	switch p.Status {
	case adyenfake.StatusAuthorised, adyenfake.StatusCaptured, adyenfake.StatusExpired:
		return sim.StatusSucceeded
	case adyenfake.StatusRedirectShopper:
		return sim.StatusRequiresAction
	case adyenfake.StatusRefused, adyenfake.StatusError, adyenfake.StatusCancelled:
		return sim.StatusDeclined
	}
	return ""
}

// holdsMoney reports whether an Adyen payment still holds the customer's
// money uncaptured, or can still be authorised (3-D Secure).
func holdsMoney(p adyenfake.Payment) bool {
	switch p.Status {
	case adyenfake.StatusAuthorised, adyenfake.StatusReceived, adyenfake.StatusRedirectShopper:
		return true
	}
	return false
}

// paidState reports whether an order in state st was paid (and perhaps
// refunded since).
func paidState(st string) bool {
	return order.State(st).Refundable() || st == string(order.StateRefunded)
}

// checkAdyen checks the orders on the fake Adyen against its ledger.
func checkAdyen(s snapshot, orders map[string]dbOrder, attempts map[string]dbAttempt) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	payments := map[string][]adyenfake.Payment{} // attempt → its payments
	capturedOf := map[string][]string{}          // order → its payments with money captured
	for _, p := range s.adyen.payments {
		a, ok := attempts[p.Reference]
		if !ok || orders[a.order].gateway != adyenGateway {
			report(InvAdyenOneCharge, a.order, "Adyen payment %s has reference %q, which is no attempt of an Adyen order", p.PSPReference, p.Reference)
			continue
		}
		payments[p.Reference] = append(payments[p.Reference], p)
		if p.AmountCaptured > 0 {
			capturedOf[a.order] = append(capturedOf[a.order], p.PSPReference+" (attempt "+p.Reference+")")
		}
		if p.Amount != a.amount || p.Currency != a.currency {
			report(InvAdyenChargeSettled, a.order, "Adyen payment %s is for %d %s, its attempt %s for %d %s",
				p.PSPReference, p.Amount, p.Currency, a.id, a.amount, a.currency)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(capturedOf)) {
		if ps := capturedOf[id]; len(ps) > 1 {
			report(InvAdyenOneCharge, id, "%d payments captured at Adyen: %s", len(ps), strings.Join(ps, ", "))
		}
	}
	for ref, ps := range payments {
		if len(ps) > 1 {
			report(InvAdyenOneCharge, attempts[ref].order, "attempt %s reached Adyen as %d payments", ref, len(ps))
		}
	}
	captures := map[string]dbCapture{}
	inReview := map[string]bool{} // orders with a capture in review
	for _, c := range s.captures {
		captures[c.id] = c
		inReview[c.order] = inReview[c.order] || c.state == string(order.CaptureNeedsReview)
	}
	refunds := map[string]dbRefund{}
	for _, r := range s.refunds {
		refunds[r.id] = r
	}
	voids := map[string]dbVoid{}
	for _, v := range s.voids {
		voids[v.id] = v
	}

	// told reports whether a replica accepted the notification: what
	// only a notification tells (a lapse, a capture that failed after
	// Adyen reported it done), Settle can know only once it arrived.
	told := func(code, ref string) bool { return s.adyen.delivered[noteKey(code, ref)] }
	// failedLater holds the captures Adyen reported done (CAPTURE) and
	// then failed (CAPTURE_FAILED); untold the attempts of payments with
	// one whose CAPTURE_FAILED never reached Settle.
	failedLater, untold := map[string]bool{}, map[string]bool{}
	refundFailedLater := map[string]bool{} // the refunds Adyen reported done (REFUND), then failed (REFUND_FAILED)

	// Per payment: what it took, and what was asked of it.
	gwCaptured := map[string]int64{} // Settle's capture → its succeeded capture at Adyen
	gwRefunded := map[string]int64{} // Settle's refund → its succeeded refund at Adyen
	capturedByOrder := map[string]int64{}
	seen := map[string]int{}
	for _, p := range s.adyen.payments {
		a, ok := attempts[p.Reference]
		if !ok {
			continue
		}
		o := orders[a.order]
		if p.AmountCaptured > p.AmountAuthorised {
			report(InvAdyenCapture, o.id, "Adyen payment %s captured %d of %d authorised", p.PSPReference, p.AmountCaptured, p.AmountAuthorised)
		}
		var autoCaptures int
		for _, m := range p.Captures {
			seen["capture "+m.Reference]++
			if m.Status == adyenfake.ModFailed && m.Reason == adyenfake.ReasonCaptureFailed {
				failedLater[m.Reference] = true
				if !told("CAPTURE_FAILED", m.Reference) {
					untold[p.Reference] = true
				}
			}
			if m.Status == adyenfake.ModFailed && strings.Contains(m.Reason, "Insufficient balance") {
				report(InvAdyenCapture, o.id, "Adyen refused capture %s of %d as beyond the hold of payment %s (captured %d of %d)",
					m.Reference, m.Amount, p.PSPReference, p.AmountCaptured, p.AmountAuthorised)
			}
			if !o.manual {
				if m.Reference != p.Reference+":capture" {
					report(InvAdyenCapture, o.id, "Adyen capture %s of an AUTOMATIC order's payment %s has reference %q, not its attempt's",
						m.PSPReference, p.PSPReference, m.Reference)
				}
				if m.Status == adyenfake.ModSucceeded {
					autoCaptures++
				}
				continue
			}
			c, ok := captures[m.Reference]
			if !ok || c.order != o.id {
				report(InvAdyenCapture, o.id, "Adyen capture %s of payment %s has reference %q, which is no capture of the order's", m.PSPReference, p.PSPReference, m.Reference)
				continue
			}
			if m.Amount != c.amount || m.Currency != c.currency {
				report(InvAdyenCapture, o.id, "Adyen capture %s is for %d %s, capture %s for %d %s", m.PSPReference, m.Amount, m.Currency, c.id, c.amount, c.currency)
			}
			if m.Status == adyenfake.ModSucceeded {
				gwCaptured[c.id] += m.Amount
				capturedByOrder[o.id] += m.Amount
				if c.state != string(order.CaptureSucceeded) && c.state != string(order.CaptureNeedsReview) {
					report(InvAdyenCapture, o.id, "Adyen captured capture %s (%s); Settle has it %s", c.id, m.PSPReference, c.state)
				}
			}
			if failedLater[c.id] && c.state == string(order.CaptureSucceeded) && !s.captureFailed[p.Reference] && told("CAPTURE_FAILED", c.id) {
				report(InvAdyenCapture, o.id, "Adyen failed capture %s (%s) after reporting it done, and told Settle; Settle has it SUCCEEDED and raised no capture_failed review item",
					c.id, m.PSPReference)
			}
		}
		if autoCaptures > 1 {
			report(InvAdyenOneCharge, o.id, "the AUTOMATIC order's payment %s was captured %d times", p.PSPReference, autoCaptures)
		}
		for _, m := range p.Refunds {
			seen["refund "+m.Reference]++
			refundFailedLater[m.Reference] = refundFailedLater[m.Reference] ||
				m.Status == adyenfake.ModFailed && m.Reason == adyenfake.ReasonRefundFailed
			r, ok := refunds[m.Reference]
			if !ok || r.order != o.id {
				report(InvAdyenRefunds, o.id, "Adyen refund %s of payment %s has reference %q, which is no refund of the order's", m.PSPReference, p.PSPReference, m.Reference)
				continue
			}
			if m.Amount != r.amount || m.Currency != r.currency {
				report(InvAdyenRefunds, o.id, "Adyen refund %s is for %d %s, refund %s for %d %s", m.PSPReference, m.Amount, m.Currency, r.id, r.amount, r.currency)
			}
			// A refund of an order whose capture failed after Adyen reported
			// it done (a person was told, or Settle never heard) finds
			// nothing taken: Settle had it for paid.
			capFailed := s.captureFailed[p.Reference] || untold[p.Reference]
			if m.Status == adyenfake.ModFailed && strings.Contains(m.Reason, "Insufficient balance") && !capFailed {
				report(InvAdyenRefunds, o.id, "Adyen refused refund %s of %d as beyond what payment %s took (%d, %d refunded)",
					r.id, m.Amount, p.PSPReference, p.AmountCaptured, p.AmountRefunded)
			}
			if m.Status != adyenfake.ModSucceeded {
				continue
			}
			gwRefunded[r.id] += m.Amount
			if r.state != string(order.RefundSucceeded) && r.state != string(order.RefundNeedsReview) {
				report(InvAdyenRefunds, o.id, "Adyen refunded refund %s (%s); Settle has it %s", r.id, m.PSPReference, r.state)
			}
		}
		for _, m := range p.Cancels {
			seen["void "+m.Reference]++
			if v, ok := voids[m.Reference]; !ok || v.order != o.id {
				report(InvAdyenHold, o.id, "Adyen cancel %s of payment %s has reference %q, which is no void of the order's", m.PSPReference, p.PSPReference, m.Reference)
			}
		}

		// The money held or taken against the order's state.
		paying := o.current == p.Reference
		switch {
		case p.AmountCaptured > 0 && (o.state == string(order.StateNeedsReview) ||
			paying && o.state == string(order.StateAuthorized) && inReview[o.id]):
			// A person decides: the order, or a capture of its hold whose
			// outcome Settle never learnt.
		case p.AmountCaptured > 0 && (!paying || !paidState(o.state)):
			report(InvAdyenChargeSettled, o.id, "Adyen payment %s (attempt %s) took %d; the order is %s with attempt %s",
				p.PSPReference, p.Reference, p.AmountCaptured, o.state, o.current)
		case p.AmountCaptured > 0 && !o.manual && p.AmountCaptured != o.amount:
			report(InvAdyenChargeSettled, o.id, "Adyen payment %s of the AUTOMATIC order took %d of %d", p.PSPReference, p.AmountCaptured, o.amount)
		}
		if holdsMoney(p) {
			// A capture_failed review item tells a person of the hold.
			waits := paying && (o.state == string(order.StateNeedsReview) || s.captureFailed[p.Reference] || untold[p.Reference] ||
				p.Status == adyenfake.StatusRedirectShopper && o.state == string(order.StateRequiresAction) ||
				p.Status != adyenfake.StatusRedirectShopper && o.state == string(order.StateAuthorized))
			if !waits {
				report(InvAdyenHold, o.id, "Adyen payment %s (attempt %s) still holds %d %s (%s); the order is %s with attempt %s",
					p.PSPReference, p.Reference, p.Amount, p.Currency, p.Status, o.state, o.current)
			}
		}
		// A capture in review (its outcome never learnt) holds the order
		// AUTHORIZED for a person, lapsed or not.
		if p.Status == adyenfake.StatusExpired && paying && o.state == string(order.StateAuthorized) && !inReview[o.id] &&
			told("EXPIRE", p.Reference) {
			report(InvAdyenHold, o.id, "Adyen's hold %s (attempt %s) lapsed and its EXPIRE reached Settle; the order is still AUTHORIZED",
				p.PSPReference, p.Reference)
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(seen)) {
		if n := seen[ref]; n > 1 {
			report(InvAdyenCapture, "", "%s reached Adyen %d times", ref, n)
		}
	}

	// Per order: Settle's word against Adyen's.
	for _, o := range s.orders {
		if o.gateway != adyenGateway {
			continue
		}
		var pay *adyenfake.Payment
		if ps := payments[o.current]; len(ps) > 0 {
			pay = &ps[len(ps)-1]
		}
		if paidState(o.state) {
			switch {
			case (pay == nil || pay.AmountCaptured == 0) && !s.captureFailed[o.current] && !untold[o.current]:
				report(InvAdyenChargeSettled, o.id, "%s with attempt %s; Adyen took nothing for it, and no review item says its capture failed",
					o.state, o.current)
			case attempts[o.current].outcome != string(order.OutcomeSucceeded):
				report(InvAdyenChargeSettled, o.id, "%s, but its attempt %s records outcome %q", o.state, o.current, attempts[o.current].outcome)
			}
		}
		if o.state == string(order.StateVoided) && pay != nil && pay.Status != adyenfake.StatusCancelled {
			report(InvAdyenHold, o.id, "VOIDED; Adyen's payment %s of attempt %s is %s", pay.PSPReference, o.current, pay.Status)
		}
		if !o.manual {
			continue
		}
		var succeeded, review, failed int64
		for _, c := range s.captures {
			if c.order != o.id {
				continue
			}
			switch c.state {
			case string(order.CaptureSucceeded):
				succeeded += c.amount
				if failedLater[c.id] {
					// Adyen took nothing for it: checked above, with
					// what Settle was told.
					failed += c.amount
					continue
				}
				if gwCaptured[c.id] != c.amount {
					report(InvAdyenCapture, o.id, "capture %s is SUCCEEDED; Adyen captured %d of its %d", c.id, gwCaptured[c.id], c.amount)
				}
			case string(order.CaptureNeedsReview):
				review += c.amount
			}
		}
		if o.captured > o.authorized {
			report(InvAdyenCapture, o.id, "captured %d of %d authorized", o.captured, o.authorized)
		}
		if o.captured != succeeded {
			report(InvAdyenCapture, o.id, "captured %d, its SUCCEEDED captures amount to %d", o.captured, succeeded)
		}
		if g := capturedByOrder[o.id]; g < succeeded-failed || g > succeeded+review {
			report(InvAdyenCapture, o.id, "Adyen captured %d; Settle's SUCCEEDED captures amount to %d (and %d in review)", g, succeeded, review)
		}
	}
	for _, r := range s.refunds {
		if orders[r.order].gateway == adyenGateway && r.state == string(order.RefundSucceeded) && gwRefunded[r.id] != r.amount {
			if refundFailedLater[r.id] && gwRefunded[r.id] == 0 &&
				(s.refundFailed[orders[r.order].current] || !told("REFUND_FAILED", r.id)) {
				// A person was told the money did not go back, or Settle
				// never heard that it did not.
				continue
			}
			report(InvAdyenRefunds, r.order, "refund %s is SUCCEEDED; Adyen refunded %d of its %d", r.id, gwRefunded[r.id], r.amount)
		}
	}

	// Technical cancels: each backed by the ledger, and each attempt
	// settled as never charged backed by one.
	canceled := map[string]bool{} // attempt → a technical cancel succeeded
	for _, tc := range s.adyen.techCancels {
		a, ok := attempts[tc.PaymentReference]
		if !ok {
			report(InvAdyenTechnicalCancel, "", "technical cancel %s names %q, which is no attempt of Settle's", tc.PSPReference, tc.PaymentReference)
			continue
		}
		o := orders[a.order]
		if tc.Status != adyenfake.ModSucceeded {
			continue
		}
		canceled[a.id] = true
		if o.current == a.id && paidState(o.state) && !s.captureFailed[a.id] {
			report(InvAdyenTechnicalCancel, o.id, "technical cancel %s of attempt %s, which paid the order (%s)", tc.PSPReference, a.id, o.state)
		}
		for _, p := range payments[a.id] {
			if holdsMoney(p) || p.AmountCaptured > 0 {
				report(InvAdyenTechnicalCancel, o.id, "technical cancel %s of attempt %s succeeded, yet Adyen's payment %s is %s (captured %d)",
					tc.PSPReference, a.id, p.PSPReference, p.Status, p.AmountCaptured)
			}
		}
	}
	for _, a := range s.attempts {
		if orders[a.order].gateway == adyenGateway && a.outcome == string(order.OutcomeNotFound) && !canceled[a.id] {
			report(InvAdyenTechnicalCancel, a.order, "attempt %s is settled as never charged (not_found); no technical cancel of it succeeded at Adyen", a.id)
		}
	}
	return out
}
