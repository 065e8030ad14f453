package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// checkRoutes checks the invariants of the orders charged on several
// gateways (InvRouteOneCharge, InvCascadeWait, InvCascadeProven) against
// every account's ledger and the orders' histories.
func checkRoutes(s snapshot, orders map[string]dbOrder, attemptsOf map[string][]dbAttempt, events map[string][]dbEvent) []Violation {
	var out []Violation
	report := func(inv int, orderID, format string, args ...any) {
		out = append(out, Violation{Invariant: inv, Order: orderID, Msg: fmt.Sprintf(format, args...)})
	}
	orderOf := map[string]string{} // attempt → order
	for _, as := range attemptsOf {
		for _, a := range as {
			orderOf[a.id] = a.order
		}
	}
	// Each attempt's charges, by account.
	byRef := map[string][]sim.Charge{}
	succeeded := map[string][]sim.Charge{} // order → its succeeded charges, any account
	for _, c := range s.ledger {
		byRef[c.Reference] = append(byRef[c.Reference], c)
		if o, ok := orderOf[c.Reference]; ok && c.Status == sim.StatusSucceeded {
			succeeded[o] = append(succeeded[o], c)
		}
	}

	// 26. One succeeded charge over every account.
	for _, id := range slices.Sorted(maps.Keys(succeeded)) {
		cs := succeeded[id]
		accounts := map[string]bool{}
		for _, c := range cs {
			accounts[s.accountOf[c.ID]] = true
		}
		switch {
		case len(accounts) > 1:
			report(InvRouteOneCharge, id, "charged on %d gateways (%s): %s", len(accounts),
				strings.Join(slices.Sorted(maps.Keys(accounts)), ", "), chargeList(cs))
		case len(cs) > 1 && orders[id].routed:
			report(InvRouteOneCharge, id, "an order with routes charged %d times: %s", len(cs), chargeList(cs))
		}
	}

	for _, id := range slices.Sorted(maps.Keys(attemptsOf)) {
		as := claimOrder(attemptsOf[id], events[id])
		for i, a := range as {
			var prev *claimed
			if i > 0 {
				prev = &as[i-1]
			}
			// 27. No claim on another gateway before the previous
			// attempt was proven not to have charged.
			if prev != nil && prev.gateway != a.gateway {
				switch {
				case prev.settled == 0 || prev.settled > a.claimed:
					report(InvCascadeWait, id, "attempt %s was claimed on %s (event %d) while attempt %s on %s was not settled (%s)",
						a.id, a.gateway, a.claimed, prev.id, prev.gateway, settledAt(prev.settled))
				case order.CascadeAfter(order.Outcome(prev.outcome), prev.declineCode) != order.CascadeNext:
					report(InvCascadeWait, id, "attempt %s was claimed on %s after attempt %s on %s came to %q, not a proven non-charge",
						a.id, a.gateway, prev.id, prev.gateway, strings.TrimSpace(prev.outcome+" "+prev.declineCode))
				}
			}
			// 28. Every cascade after an attempt its gateway did not charge.
			if a.cascadeAfter == "" {
				continue
			}
			if prev == nil {
				report(InvCascadeProven, id, "attempt %s cascaded after %q, but is the order's first", a.id, a.cascadeAfter)
				continue
			}
			if g, _, _ := strings.Cut(a.cascadeAfter, " "); g != prev.gateway {
				report(InvCascadeProven, id, "attempt %s cascaded after %q, but the attempt before it, %s, was sent to %s",
					a.id, a.cascadeAfter, prev.id, prev.gateway)
			}
			for _, c := range byRef[prev.id] {
				if c.Status != sim.StatusDeclined {
					report(InvCascadeProven, id, "attempt %s on %s cascaded after %q, but %s's ledger has attempt %s's charge %s %s",
						a.id, a.gateway, a.cascadeAfter, s.accountOf[c.ID], prev.id, c.ID, c.Status)
				}
			}
		}
	}
	return out
}

func settledAt(id int64) string {
	if id == 0 {
		return "never settled"
	}
	return fmt.Sprintf("settled at event %d", id)
}

// claimed is an attempt with the numbers of the events of its history
// that claimed it and that settled it back to PENDING (0: none).
type claimed struct {
	dbAttempt
	claimed, settled int64
}

// claimOrder returns an order's attempts in the order they were claimed,
// each with its claim (the first event that names it) and its settle back
// to PENDING (the first such event that names it). Attempts no event
// names come last.
func claimOrder(as []dbAttempt, evs []dbEvent) []claimed {
	out := make([]claimed, 0, len(as))
	for _, a := range as {
		c := claimed{dbAttempt: a}
		for _, e := range evs {
			if e.attempt != a.id {
				continue
			}
			if c.claimed == 0 {
				c.claimed = e.id
			}
			if c.settled == 0 && e.to == string(order.StatePending) && e.id != c.claimed {
				c.settled = e.id
			}
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b claimed) int {
		switch {
		case a.claimed == b.claimed:
			return 0
		case a.claimed == 0:
			return 1
		case b.claimed == 0:
			return -1
		case a.claimed < b.claimed:
			return -1
		default:
			return 1
		}
	})
	return out
}

// routeCounts counts the orders made with routes, those with attempts on
// more than one gateway, and the attempts that cascaded.
func routeCounts(s snapshot) (routed, cascaded, cascades int) {
	gateways := map[string]map[string]bool{}
	for _, a := range s.attempts {
		if gateways[a.order] == nil {
			gateways[a.order] = map[string]bool{}
		}
		gateways[a.order][a.gateway] = true
		if a.cascadeAfter != "" {
			cascades++
		}
	}
	for _, o := range s.orders {
		if o.routed {
			routed++
		}
		if len(gateways[o.id]) > 1 {
			cascaded++
		}
	}
	return routed, cascaded, cascades
}
