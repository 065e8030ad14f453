package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestGroupedStatementsKeepTheirPlan runs the grouped create, claim,
// settle and create-and-claim, two rows at a time, on one connection to a table of 100,000
// orders, and checks that PostgreSQL settles on one plan for each rather
// than planning every run for the group at hand (see internal/onerow):
// with the arrays as plain arguments it made a custom plan at every run,
// which cost more of its CPU than running the statement.
func TestGroupedStatementsKeepTheirPlan(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("on Citus the store runs migration 00016's functions, not these statements")
	}
	t.Parallel()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, postgrestest.URL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
		SELECT gen_random_uuid(), 'default', 'bulk-' || g, 100, 'GBP', 'tok_ok', 'instant', 'PAID' FROM generate_series(1, 100000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE orders`); err != nil {
		t.Fatal(err)
	}
	s := postgres.NewStore(pool)
	const runs = 8 // PostgreSQL makes five custom plans before it weighs the generic one
	for n := range runs {
		news := []order.Order{newOrder(fmt.Sprintf("a-%d", n)), newOrder(fmt.Sprintf("b-%d", n))}
		created, _, err := s.CreateOrders(ctx, news)
		if err != nil {
			t.Fatal(err)
		}
		res, errs, err := s.ClaimMany(ctx, []order.Claim{claimOf(created[0], fmt.Sprintf("req-a-%d", n)), claimOf(created[1], fmt.Sprintf("req-b-%d", n))})
		if err != nil || errs[0] != nil || errs[1] != nil || !res[0].Claimed || !res[1].Claimed {
			t.Fatalf("claim: %v %v %+v", err, errs, res)
		}
		var sts []order.Settlement
		for _, r := range res {
			sts = append(sts, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: r.Order.ID, AttemptID: r.Attempt.ID,
				Event: order.EventSucceed, To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"},
				Actor: "api"})
		}
		if _, applied, err := s.SettleMany(ctx, sts); err != nil || !applied[0] || !applied[1] {
			t.Fatalf("settle: %v %v", err, applied)
		}
		one := []order.Order{newOrder(fmt.Sprintf("c-%d", n)), newOrder(fmt.Sprintf("d-%d", n))}
		if _, isNew, err := s.CreateClaimedMany(ctx, one, []order.Claim{claimOf(one[0], fmt.Sprintf("req-c-%d", n)),
			claimOf(one[1], fmt.Sprintf("req-d-%d", n))}); err != nil || !isNew[0] || !isNew[1] {
			t.Fatalf("create and claim: %v %v", err, isNew)
		}
	}
	rows, err := pool.Query(ctx, `SELECT left(regexp_replace(statement, '\s+', ' ', 'g'), 60), generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '%unnest(%WITH ORDINALITY%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var (
			stmt            string
			generic, custom int64
		)
		if err := rows.Scan(&stmt, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		seen++
		if generic == 0 {
			t.Errorf("%s…: %d custom plans in %d runs and no generic plan", stmt, custom, runs)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != 4 {
		t.Errorf("%d grouped statements prepared on the connection, want 4 (create, claim, settle, create-and-claim)", seen)
	}
}
