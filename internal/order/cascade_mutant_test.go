package order_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/mutant"
)

// cascadeAfterTimeout is the orchestrator's classic double charge: an
// attempt that timed out is marked failed, and the charge cascades to the
// next gateway while the first may have charged.
var cascadeAfterTimeout = []mutant.Mutation{
	{File: "internal/order/charge.go",
		Old: "\t\t// Unknown, or an adapter that broke its contract: find out later.\n" +
			"\t\tst.Result.Outcome = OutcomeUnknown\n\t\treturn st\n\t}",
		New: "\t\tst.Event = EventFail\n\t}"},
	{File: "internal/order/cascade.go",
		Old: "\t\t// Unknown, in flight, or an outcome this table does not know:\n" +
			"\t\t// money may have moved.\n\t\treturn CascadeWait",
		New: "\t\treturn CascadeNext"},
}

// TestTestsCatchCascadeAfterTimeout runs the cascade's tests against a
// build with cascadeAfterTimeout (go test -overlay), and requires them to
// fail: green cascade tests must mean something.
func TestTestsCatchCascadeAfterTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the package's tests again")
	}
	t.Parallel()
	out, err := mutant.Test(context.Background(), ".", "./internal/order",
		"^(TestCascadeProperty|TestCascadeAfterProvenNonCharge)$", cascadeAfterTimeout...)
	if err == nil {
		t.Fatalf("the cascade's tests passed against a build that cascades after a timeout:\n%s", out)
	}
	if !strings.Contains(string(out), "charged 2 times") && !strings.Contains(string(out), "--- FAIL: TestCascadeAfterProvenNonCharge/timeout_waits") {
		t.Fatalf("the mutant did not fail the way expected (does it build?):\n%s", out)
	}
}
