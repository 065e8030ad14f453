package grpcapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/settlepay/settle/internal/order"
)

// TestBudgetExhaustedIsUnavailableWithARetryHint: a call refused for the
// gateway's request budget is UNAVAILABLE, with a RetryInfo a gRPC client
// library can follow.
func TestBudgetExhaustedIsUnavailableWithARetryHint(t *testing.T) {
	t.Parallel()
	err := toStatus(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)),
		fmt.Errorf("look up order o attempt a: %w", order.ErrBudgetExhausted))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("code %s, want UNAVAILABLE", st.Code())
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() == order.BudgetRetryAfter {
			return
		}
	}
	t.Errorf("no RetryInfo of %s in %v", order.BudgetRetryAfter, st.Details())
}
