package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/mutant"
)

// blindEvent applies a success event without the guarded lookup: the
// statement that records it moves the order to PAID on the event's word.
var blindEvent = mutant.Mutation{
	File: "internal/postgres/sql/record_gateway_event.sql",
	Old:  "UPDATE orders o SET reconcile_at = least(o.reconcile_at, now())",
	New: "UPDATE orders o SET state = CASE WHEN @succeeded::bool THEN 'PAID' ELSE o.state END, " +
		"reconcile_at = CASE WHEN @succeeded::bool THEN NULL ELSE least(o.reconcile_at, now()) END",
}

// TestTestsCatchBlindEvents runs this package's test of an event's word
// against a build with blindEvent (go test -overlay), and requires it to
// fail: a green TestEventIsNotApplied must mean something.
func TestTestsCatchBlindEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the package's tests again")
	}
	t.Parallel()
	out, err := mutant.Test(context.Background(), ".", "./internal/webhook", "^TestEventIsNotApplied$", blindEvent)
	if err == nil {
		t.Fatalf("TestEventIsNotApplied passed against a build that applies events blindly:\n%s", out)
	}
	if !strings.Contains(string(out), "--- FAIL: TestEventIsNotApplied") {
		t.Fatalf("the mutant did not fail the way expected (does it build?):\n%s", out)
	}
}
