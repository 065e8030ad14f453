package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// testRouteRulesVersioned: a merchant's route rules are read back as they
// were set, each change a new version with its actor and note; a change
// made on a stale version is refused, and of two concurrent changes on
// one version exactly one lands; another merchant's rules are its own.
func testRouteRulesVersioned(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	if c, err := s.RouteConfig(ctx, "m-routes"); err != nil || c.Version != 0 || len(c.Rules) != 0 {
		t.Fatalf("rules of a merchant with none: %+v %v", c, err)
	}
	rules := []order.RouteRule{
		{Name: "eu-manual", Currencies: []string{"EUR", "GBP"}, MinAmount: 100, MaxAmount: 500000,
			Capture: order.CaptureManual, Gateways: []string{"adyen", "sim"}},
		{Name: "rest", Split: []order.WeightedGateway{{Gateway: "sim", Weight: 3}, {Gateway: "sim2", Weight: 1}}},
	}
	c1, err := s.SetRouteConfig(ctx, order.RouteConfig{MerchantID: "m-routes", Rules: rules, Actor: "ops-ana", Note: "first"}, 0)
	if err != nil || c1.Version != 1 || c1.Actor != "ops-ana" || c1.Note != "first" || c1.CreatedAt.IsZero() {
		t.Fatalf("first change: %+v %v", c1, err)
	}
	got, err := s.RouteConfig(ctx, "m-routes")
	if err != nil || !reflect.DeepEqual(got.Rules, rules) || got.Version != 1 {
		t.Fatalf("read back %+v %v, want the rules set %+v", got, err, rules)
	}
	var verr *order.RoutesVersionError
	if _, err := s.SetRouteConfig(ctx, order.RouteConfig{MerchantID: "m-routes", Actor: "ops-bo"}, 0); !errors.As(err, &verr) || verr.Current != 1 {
		t.Fatalf("a change on version 0 after version 1: %v, want a RoutesVersionError at 1", err)
	}

	// Two operators change version 1 at once: one lands as 2.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.SetRouteConfig(ctx, order.RouteConfig{MerchantID: "m-routes", Rules: rules[1:], Actor: "ops"}, 1)
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two changes on version 1: %v and %v, want one landed and one refused", errs[0], errs[1])
	}
	if got, err := s.RouteConfig(ctx, "m-routes"); err != nil || got.Version != 2 || len(got.Rules) != 1 {
		t.Fatalf("after the race: %+v %v", got, err)
	}
	if c, err := s.RouteConfig(ctx, "m-other"); err != nil || c.Version != 0 {
		t.Fatalf("another merchant's rules: %+v %v", c, err)
	}
	// An empty list is a version too: the merchant's rules are removed.
	if c, err := s.SetRouteConfig(ctx, order.RouteConfig{MerchantID: "m-routes", Actor: "ops"}, 2); err != nil || c.Version != 3 || len(c.Rules) != 0 {
		t.Fatalf("removing every rule: %+v %v", c, err)
	}
}
