package postgres

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

//go:embed sql/route_rules.sql
var routeRulesSQL string

//go:embed sql/route_rules_insert.sql
var routeRulesInsertSQL string

var _ order.RouteStore = (*Store)(nil)

// ruleJSON is a route rule as route_rules.rules keeps it.
type ruleJSON struct {
	Name       string         `json:"name"`
	Currencies []string       `json:"currencies,omitempty"`
	MinAmount  int64          `json:"min_amount_minor,omitempty"`
	MaxAmount  int64          `json:"max_amount_minor,omitempty"`
	Capture    string         `json:"capture,omitempty"`
	Gateways   []string       `json:"gateways,omitempty"`
	Split      []weightedJSON `json:"split,omitempty"`
}

type weightedJSON struct {
	Gateway string `json:"gateway"`
	Weight  int    `json:"weight"`
}

// ruleRow is a version of route rules as the statements return it.
type ruleRow struct {
	Version   int64     `db:"version"`
	Rules     string    `db:"rules"`
	Actor     string    `db:"actor"`
	Note      string    `db:"note"`
	CreatedAt time.Time `db:"created_at"`
}

func (r ruleRow) config(merchantID string) (order.RouteConfig, error) {
	var rs []ruleJSON
	if err := json.Unmarshal([]byte(r.Rules), &rs); err != nil {
		return order.RouteConfig{}, fmt.Errorf("read merchant %s route rules version %d: %w", merchantID, r.Version, err)
	}
	c := order.RouteConfig{MerchantID: merchantID, Version: r.Version, Actor: r.Actor, Note: r.Note, CreatedAt: r.CreatedAt,
		Rules: make([]order.RouteRule, len(rs))}
	for i, x := range rs {
		c.Rules[i] = order.RouteRule{Name: x.Name, Currencies: x.Currencies, MinAmount: x.MinAmount, MaxAmount: x.MaxAmount,
			Capture: order.CaptureMode(x.Capture), Gateways: x.Gateways}
		for _, w := range x.Split {
			c.Rules[i].Split = append(c.Rules[i].Split, order.WeightedGateway(w))
		}
	}
	return c, nil
}

// RouteConfig implements order.RouteStore.
func (s *Store) RouteConfig(ctx context.Context, merchantID string) (order.RouteConfig, error) {
	var r ruleRow
	err := retry(ctx, func() (err error) {
		r, err = queryOne[ruleRow](ctx, s.pool, routeRulesSQL, pgx.StrictNamedArgs{"merchant_id": merchantID})
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		return order.RouteConfig{MerchantID: merchantID}, nil
	case err != nil:
		return order.RouteConfig{}, fmt.Errorf("read merchant %s route rules: %w", merchantID, err)
	}
	return r.config(merchantID)
}

// SetRouteConfig implements order.RouteStore: it reads the latest
// version, and inserts the next one only when that is expected; the key
// refuses a version another change took in between.
func (s *Store) SetRouteConfig(ctx context.Context, c order.RouteConfig, expected int64) (order.RouteConfig, error) {
	cur, err := s.RouteConfig(ctx, c.MerchantID)
	if err != nil {
		return order.RouteConfig{}, err
	}
	if cur.Version != expected {
		return order.RouteConfig{}, &order.RoutesVersionError{Expected: expected, Current: cur.Version}
	}
	rs := make([]ruleJSON, len(c.Rules))
	for i, x := range c.Rules {
		rs[i] = ruleJSON{Name: x.Name, Currencies: x.Currencies, MinAmount: x.MinAmount, MaxAmount: x.MaxAmount,
			Capture: string(x.Capture), Gateways: x.Gateways}
		for _, w := range x.Split {
			rs[i].Split = append(rs[i].Split, weightedJSON(w))
		}
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return order.RouteConfig{}, err
	}
	var r ruleRow
	err = retry(ctx, func() (err error) {
		r, err = queryOne[ruleRow](ctx, s.pool, routeRulesInsertSQL, pgx.StrictNamedArgs{"merchant_id": c.MerchantID,
			"version": expected + 1, "rules": string(b), "actor": c.Actor, "note": c.Note})
		return err
	})
	switch {
	case errors.Is(err, order.ErrNotFound):
		// Another change took the version first.
		return order.RouteConfig{}, &order.RoutesVersionError{Expected: expected, Current: expected + 1}
	case err != nil:
		return order.RouteConfig{}, fmt.Errorf("record merchant %s route rules: %w", c.MerchantID, err)
	}
	return r.config(c.MerchantID)
}
