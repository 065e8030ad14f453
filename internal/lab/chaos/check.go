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
)

var invariantNames = map[int]string{
	InvOneCharge: "one-charge", InvChargeSettled: "charge-settled", InvSums: "sums", InvNoCharging: "no-charging",
	InvHistory: "history", InvAnswers: "answers", InvRequestID: "request-id",
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
}

type dbAttempt struct {
	id, order, request, outcome, chargeID, currency string
	amount                                          int64
}

type dbEvent struct {
	order, from, to, event, actor, reason, attempt string
	id                                             int64
}

// snapshot is the end state of a run: the database and the gateway's ledger.
type snapshot struct {
	orders   []dbOrder
	attempts []dbAttempt
	events   []dbEvent // by order, then id
	ledger   []sim.Charge
}

func loadSnapshot(ctx context.Context, pool *pgxpool.Pool, ledger []sim.Charge) (snapshot, error) {
	s := snapshot{ledger: ledger}
	var err error
	s.orders, err = queryAll(ctx, pool, `SELECT id::text, state, currency, coalesce(current_attempt::text, ''), amount_minor FROM orders`,
		func(r pgx.CollectableRow) (o dbOrder, err error) {
			return o, r.Scan(&o.id, &o.state, &o.currency, &o.current, &o.amount)
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
		coalesce(attempt_id::text, ''), id FROM order_events ORDER BY order_id, id`,
		func(r pgx.CollectableRow) (e dbEvent, err error) {
			return e, r.Scan(&e.order, &e.from, &e.to, &e.event, &e.actor, &e.reason, &e.attempt, &e.id)
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
		case string(order.StatePaid):
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
		if o, ok := orders[id]; ok && o.state != string(order.StatePaid) {
			report(InvAnswers, id, "ChargeOrder answered PAID, the order is %s", o.state)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hist.canceled)) {
		if o, ok := orders[id]; ok && o.state != string(order.StateCanceled) {
			report(InvAnswers, id, "CancelOrder answered CANCELED, the order is %s", o.state)
		}
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
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Invariant, b.Invariant) })
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
