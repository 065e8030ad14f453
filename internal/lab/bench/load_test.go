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
		err        error
		want       time.Duration
		hinted, ok bool
	}{
		{fmt.Errorf("ChargeOrder: %w", st.Err()), 70 * time.Millisecond, true, true},
		{status.Error(codes.ResourceExhausted, "no hint"), defaultPushback, false, true},
		{fmt.Errorf("ChargeOrder: %w", status.Error(codes.DeadlineExceeded, "late")), 0, false, false},
		{errors.New("order is PENDING, want PAID"), 0, false, false},
		{nil, 0, false, false},
	} {
		if d, hinted, ok := refusal(tc.err); d != tc.want || hinted != tc.hinted || ok != tc.ok {
			t.Errorf("refusal(%v) = %s, %v, %v; want %s, %v, %v", tc.err, d, hinted, ok, tc.want, tc.hinted, tc.ok)
		}
	}
}

// TestBackoff: the wait after a refusal is the server's suggestion,
// however many came before it; without one it doubles from the default
// after refusals in a row, up to its cap.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pushback time.Duration
		hinted   bool
		n        int
		want     time.Duration
	}{
		{100 * time.Millisecond, true, 0, 100 * time.Millisecond},
		{100 * time.Millisecond, true, 3, 100 * time.Millisecond},
		{3 * time.Second, true, 60, 3 * time.Second},
		{defaultPushback, false, 0, defaultPushback},
		{defaultPushback, false, 1, 2 * defaultPushback},
		{defaultPushback, false, 3, 8 * defaultPushback},
		{defaultPushback, false, 60, maxBackoff},
	} {
		if got := backoff(tc.pushback, tc.hinted, tc.n); got != tc.want {
			t.Errorf("backoff(%s, %v, %d) = %s, want %s", tc.pushback, tc.hinted, tc.n, got, tc.want)
		}
	}
}
