package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// routeJSON is one of an order's routes as orders.routes keeps it.
type routeJSON struct {
	Gateway       string `json:"gateway"`
	PaymentMethod string `json:"payment_method"`
	Rule          string `json:"rule,omitempty"`
	RouteVersion  int64  `json:"route_version,omitempty"`
}

// routesJSON is routes as the create statements take them: a JSON array,
// or ” (NULL) for an order with one route.
func routesJSON(routes []order.Route) string {
	if len(routes) == 0 {
		return ""
	}
	rs := make([]routeJSON, len(routes))
	for i, r := range routes {
		rs[i] = routeJSON(r)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		panic(err) // strings and numbers always marshal
	}
	return string(b)
}

// parseRoutes reads orders.routes as order_routing.sql selects it.
func parseRoutes(s string) ([]order.Route, error) {
	if s == "" {
		return nil, nil
	}
	var rs []routeJSON
	if err := json.Unmarshal([]byte(s), &rs); err != nil {
		return nil, fmt.Errorf("read the order's routes: %w", err)
	}
	routes := make([]order.Route, len(rs))
	for i, r := range rs {
		routes[i] = order.Route(r)
	}
	return routes, nil
}

//go:embed sql/order_routing.sql
var orderRoutingSQL string

// routingRow is what order_routing.sql returns.
type routingRow struct {
	Routes      string `db:"routes"`
	AmountMinor int64  `db:"amount_minor"`
	Currency    string `db:"currency"`
	CaptureMode string `db:"capture_mode"`
	AttemptID   string `db:"attempt_id"`
	Gateway     string `db:"attempt_gateway"`
	Outcome     string `db:"attempt_outcome"`
	DeclineCode string `db:"attempt_decline_code"`
}

// Routing implements order.Store.
func (s *Store) Routing(ctx context.Context, merchantID, orderID string) (order.Routing, error) {
	var r routingRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[routingRow](ctx, s.pool, orderRoutingSQL,
			pgx.StrictNamedArgs{"merchant_id": merchantID, "order_id": orderID})
		return err
	})
	if err != nil {
		return order.Routing{}, fmt.Errorf("read order %s routing: %w", orderID, err)
	}
	routes, err := parseRoutes(r.Routes)
	if err != nil {
		return order.Routing{}, fmt.Errorf("order %s: %w", orderID, err)
	}
	rt := order.Routing{Routes: routes, Amount: order.Money{Currency: r.Currency, AmountMinor: r.AmountMinor},
		Capture: order.CaptureMode(r.CaptureMode)}
	if r.AttemptID != "" {
		rt.Last = &order.Attempt{ID: r.AttemptID, OrderID: orderID, Gateway: r.Gateway, Outcome: order.Outcome(r.Outcome),
			DeclineCode: r.DeclineCode}
	}
	return rt, nil
}

// sameOrder reports whether got, the order found holding o's merchant
// reference, is the order o asks for. An order with routes is the same
// when its routes are: its gateway is its current attempt's, which a
// cascade moves.
func (s *Store) sameOrder(ctx context.Context, got, o order.Order) (bool, error) {
	if got.Amount != o.Amount || got.Capture != cmp.Or(o.Capture, order.CaptureAutomatic) {
		return false, nil
	}
	rt, err := s.Routing(ctx, got.MerchantID, got.ID)
	if err != nil {
		return false, err
	}
	if len(rt.Routes) > 0 || len(o.Routes) > 0 {
		return slices.Equal(rt.Routes, o.Routes), nil
	}
	return got.PaymentMethod == o.PaymentMethod && got.Gateway == o.Gateway, nil
}

// historyAttemptRow is an attempt as history_attempts.sql returns it,
// with how it was routed.
type historyAttemptRow struct {
	attemptRow
	CascadeAfter string `db:"attempt_cascade_after"`
	Skipped      string `db:"attempt_skipped"`
}

func (r historyAttemptRow) attempt() order.Attempt {
	a := r.attemptRow.attempt()
	a.CascadeAfter, a.Skipped = r.CascadeAfter, r.Skipped
	return a
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
