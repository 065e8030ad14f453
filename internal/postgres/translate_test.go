package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlepay/settle/internal/order"
)

// TestTranslateUnavailable: errors that say the database (or, on Citus, a
// worker) failed are order.ErrUnavailable, which clients may retry; an
// error about the request is not.
func TestTranslateUnavailable(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"08006": true,  // connection failure
		"57P01": true,  // admin shutdown
		"40001": true,  // serialization failure, retries exhausted
		"58030": true,  // Citus: failed to COPY to shard (a worker went away)
		"23505": false, // unique violation: the request's
		"42P01": false, // undefined table: a bug, not an outage
		"SE001": true,  // Citus: a call not delegated to its worker, retries exhausted
	} {
		err := translate(&pgconn.PgError{Code: code})
		if got := errors.Is(err, order.ErrUnavailable); got != want {
			t.Errorf("translate(%s) unavailable = %v, want %v", code, got, want)
		}
	}
}

// TestTranslateNotDelegated: a call that Citus still ran on the coordinator
// after the store's retries (SQLSTATE SE001) is order.ErrMisrouted, which
// the API answers UNAVAILABLE and logs for operators; no other error is.
func TestTranslateNotDelegated(t *testing.T) {
	t.Parallel()
	if err := translate(&pgconn.PgError{Code: notDelegated}); !errors.Is(err, order.ErrMisrouted) {
		t.Errorf("translate(%s) = %v, want ErrMisrouted", notDelegated, err)
	}
	for _, code := range []string{"08006", "25006", "40001", "58030"} {
		if err := translate(&pgconn.PgError{Code: code}); errors.Is(err, order.ErrMisrouted) {
			t.Errorf("translate(%s) = %v, want not ErrMisrouted", code, err)
		}
	}
}
