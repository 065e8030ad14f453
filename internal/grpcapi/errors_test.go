package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestNotDelegatedIsUnavailable: a checkout call that the database keeps
// refusing with SQLSTATE SE001 (on Citus, a call not delegated to its
// merchant's worker, which the store retries on other connections) is
// UNAVAILABLE, a retry with the same request_id, logged at ERROR for
// operators; once the database runs it, the retry charges. A trigger
// raises the SQLSTATE as migration 00016's functions do on the coordinator,
// so the test runs on plain PostgreSQL.
func TestNotDelegatedIsUnavailable(t *testing.T) {
	t.Parallel()
	if postgrestest.Citus() {
		t.Skip("the trigger that raises SE001 would be on a distributed table; the mapping is the same on both engines")
	}
	s := newStack(t)
	ctx := context.Background()
	o := s.create(t, "not-delegated-1", "tok_ok")
	if _, err := s.pool.Exec(ctx, `CREATE FUNCTION test_not_delegated() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'a Settle function ran on the Citus coordinator: its call was not delegated to a worker' USING ERRCODE = 'SE001';
		END $$;
		CREATE TRIGGER test_not_delegated BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION test_not_delegated()`); err != nil {
		t.Fatal(err)
	}
	req := &settlev1.ChargeOrderRequest{OrderId: o.GetId(), RequestId: "not-delegated-req-1"}
	_, err := s.orders.ChargeOrder(ctx, req)
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "retry with the same request_id") {
		t.Fatalf("ChargeOrder = %v; want UNAVAILABLE asking for a retry with the same request_id", err)
	}
	if strings.Contains(st.Message(), "coordinator") || strings.Contains(st.Message(), "SE001") {
		t.Errorf("the database's error text reached the client: %q", st.Message())
	}
	if logs := s.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "SE001") {
		t.Errorf("nothing logged at ERROR with the SQLSTATE:\n%s", logs)
	}
	if _, err := s.pool.Exec(ctx, `DROP TRIGGER test_not_delegated ON orders`); err != nil {
		t.Fatal(err)
	}
	if resp := s.charge(t, o.GetId(), req.GetRequestId()); resp.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID {
		t.Fatalf("the retry with the same request_id: %v, want PAID", resp.GetOrder().GetState())
	}
	if n := s.charges(t, o.GetId()); n != 1 {
		t.Fatalf("%d charges at the gateway, want 1", n)
	}
}
