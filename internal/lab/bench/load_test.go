package bench

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestRefusal: the load client knows the server's refusal of an overload,
// wrapped as its operations wrap errors, and the delay it suggests; any
// other error is a failure.
func TestRefusal(t *testing.T) {
	t.Parallel()
	st, err := status.New(codes.ResourceExhausted, "at capacity").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(70 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want time.Duration
		ok   bool
	}{
		{fmt.Errorf("ChargeOrder: %w", st.Err()), 70 * time.Millisecond, true},
		{status.Error(codes.ResourceExhausted, "no hint"), defaultPushback, true},
		{fmt.Errorf("ChargeOrder: %w", status.Error(codes.DeadlineExceeded, "late")), 0, false},
		{errors.New("order is PENDING, want PAID"), 0, false},
		{nil, 0, false},
	} {
		if d, ok := refusal(tc.err); d != tc.want || ok != tc.ok {
			t.Errorf("refusal(%v) = %s, %v; want %s, %v", tc.err, d, ok, tc.want, tc.ok)
		}
	}
}

// TestBackoff: the wait after refusals in a row doubles from the
// suggested delay, up to its cap, and never goes below the suggestion.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pushback time.Duration
		n        int
		want     time.Duration
	}{
		{100 * time.Millisecond, 0, 100 * time.Millisecond},
		{100 * time.Millisecond, 1, 200 * time.Millisecond},
		{100 * time.Millisecond, 3, 800 * time.Millisecond},
		{100 * time.Millisecond, 60, maxBackoff},
		{3 * time.Second, 2, 3 * time.Second},
	} {
		if got := backoff(tc.pushback, tc.n); got != tc.want {
			t.Errorf("backoff(%s, %d) = %s, want %s", tc.pushback, tc.n, got, tc.want)
		}
	}
}
