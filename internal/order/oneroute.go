package order

import "sync"

// oneRouteCap bounds oneRoute: about 100 bytes an entry, a few hundred
// kilobytes in all, and more orders than a server charges in the seconds
// between their creation and their charge.
const oneRouteCap = 4096

// oneRoute remembers the orders this server knows to have at most one
// route, so that their charges skip reading the order's routing, a round
// trip to the database that told the charge nothing it needs (a charge
// looks at an order's routing only when it has two routes or more). An
// order's routes are fixed when it is created (migrations/00022_routes.sql)
// and an order is never deleted, so what was once true stays true: an
// entry never goes stale, and a charge of an order it does not hold reads
// the routing as before. When full, it forgets its oldest entry. The zero
// value is empty and ready.
type oneRoute struct {
	mu   sync.Mutex
	has  map[oneRouteKey]struct{}
	ring [oneRouteCap]oneRouteKey
	next int
}

// oneRouteKey is an order, by its merchant and its id: a charge names its
// order with the merchant of the calling key, and another merchant's call
// must not skip the read that finds no such order.
type oneRouteKey struct{ merchantID, orderID string }

// add remembers that the merchant's order has at most one route.
func (c *oneRoute) add(merchantID, orderID string) {
	k := oneRouteKey{merchantID, orderID}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.has == nil {
		c.has = make(map[oneRouteKey]struct{}, oneRouteCap)
	}
	if _, ok := c.has[k]; ok {
		return
	}
	if old := c.ring[c.next]; old != (oneRouteKey{}) {
		delete(c.has, old)
	}
	c.ring[c.next] = k
	c.next = (c.next + 1) % oneRouteCap
	c.has[k] = struct{}{}
}

// holds reports whether the merchant's order is known to have at most one
// route.
func (c *oneRoute) holds(merchantID, orderID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.has[oneRouteKey{merchantID, orderID}]
	return ok
}
