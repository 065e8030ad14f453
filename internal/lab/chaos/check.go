package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
)

var invariantNames = map[int]string{
	InvOneCharge: "one-charge", InvChargeSettled: "charge-settled", InvSums: "sums", InvNoCharging: "no-charging",
	InvHistory: "history", InvAnswers: "answers", InvRequestID: "request-id", InvEvents: "events",
	InvRefunds: "refunds", InvRefundOnce: "refund-once", InvActionExit: "action-exit", InvActionCharge: "action-charge",
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
	id, state, currency, current string
	amount                       int64
	refunded, refunding          int64
}

type dbRefund struct {
	id, order, request, state, currency string
	amount                              int64
}

type dbAttempt struct {
	id, order, request, outcome, chargeID, currency string
	amount                                          int64
}

type dbEvent struct {
	order, from, to, event, actor, reason, attempt string
	id                                             int64
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

// snapshot is the end state of a run: the database and the gateway's ledger.
type snapshot struct {
	orders   []dbOrder
	attempts []dbAttempt
	events   []dbEvent // by order, then id
	// refundEvents is every refund's history, by refund, then row.
	refundEvents []dbRefundEvent
	ledger       []sim.Charge
	refunds      []dbRefund
	// refundLedger is the gateway's refunds.
	refundLedger []sim.Refund
	// received is what the merchant's endpoint received.
	received []receiver.Delivery
}

func loadSnapshot(ctx context.Context, pool *pgxpool.Pool, ledger []sim.Charge, refundLedger []sim.Refund) (snapshot, error) {
	s := snapshot{ledger: ledger, refundLedger: refundLedger}
	var err error
	s.orders, err = queryAll(ctx, pool, `SELECT id::text, state, currency, coalesce(current_attempt::text, ''), amount_minor,
		refunded_minor, refunding_minor FROM orders`,
		func(r pgx.CollectableRow) (o dbOrder, err error) {
			return o, r.Scan(&o.id, &o.state, &o.currency, &o.current, &o.amount, &o.refunded, &o.refunding)
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
		currency, amount_minor FROM charge_attempts`,
		func(r pgx.CollectableRow) (a dbAttempt, err error) {
			return a, r.Scan(&a.id, &a.order, &a.request, &a.outcome, &a.chargeID, &a.currency, &a.amount)
		})
	if err != nil {
		return s, err
	}
	s.events, err = queryAll(ctx, pool, `SELECT order_id::text, coalesce(from_state, ''), to_state, event, actor, reason,
		coalesce(attempt_id::text, ''), id, coalesce(type, ''), delivered_at IS NOT NULL FROM order_events ORDER BY order_id, id`,
		func(r pgx.CollectableRow) (e dbEvent, err error) {
			return e, r.Scan(&e.order, &e.from, &e.to, &e.event, &e.actor, &e.reason, &e.attempt, &e.id, &e.typ, &e.delivered)
		})
	if err != nil {
		return s, err
	}
	s.refundEvents, err = queryAll(ctx, pool, `SELECT refund_id::text, order_id::text, coalesce(from_state, ''), to_state, event,
		coalesce(event_id, 0), coalesce(type, ''), delivered_at IS NOT NULL FROM refund_events ORDER BY refund_id, id`,
		func(r pgx.CollectableRow) (e dbRefundEvent, err error) {
			return e, r.Scan(&e.refund, &e.order, &e.from, &e.to, &e.event, &e.id, &e.typ, &e.delivered)
		})
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
		named := slices.Sorted(maps.Keys(r.attempts))
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
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Invariant, b.Invariant) })
	return out
}

// checkRefunds checks the refund invariants.
func checkRefunds(s snapshot, hist *history, attempts map[string]dbAttempt) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
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
			if !slices.ContainsFunc(s.refundLedger, func(g sim.Refund) bool { return g.Reference == r.id && g.Status == "succeeded" }) {
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
		if g := atGateway[o.id]; g > o.amount {
			report(InvRefunds, o.id, "the gateway refunded %d of a charge of %d", g, o.amount)
		} else if g < succeeded[o.id] || g > succeeded[o.id]+review[o.id] {
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
		case order.EventSucceed, order.EventFail, order.EventEscalate:
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
		if st := order.State(o.state); (st.Refundable() || st == order.StateRefunded) && paidEvents[o.id] != 1 {
			// Paid, and perhaps refunded since.
			out = append(out, orderMsg{o.id, fmt.Sprintf("%s with %d order.paid events, want 1", o.state, paidEvents[o.id])})
		}
	}
	refundOf := map[string]string{} // event id → refund
	out = append(out, checkRefundEvents(s, byID, refundOf, received)...)
	for _, d := range s.received {
		e, ok := byID[d.EventID]
		switch {
		case !d.Verified:
			out = append(out, orderMsg{d.OrderID, fmt.Sprintf("delivery of %s did not verify with the merchant's secret", d.EventID)})
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
	switch {
	case e.to == string(order.StatePending) && e.from != "":
		return "order.payment_failed"
	case e.to == string(order.StatePending), e.to == string(order.StateCharging):
		return ""
	}
	return "order." + strings.ToLower(e.to)
}
