package order_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/mutant"
)

// TestTestsCatchCascadeAfterTimeout runs the cascade's tests against a
// build with mutant.CascadeAfterTimeout (go test -overlay), and requires them to
// fail: green cascade tests must mean something.
func TestTestsCatchCascadeAfterTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the package's tests again")
	}
	t.Parallel()
	out, err := mutant.Test(context.Background(), ".", "./internal/order",
		"^(TestCascadeProperty|TestCascadeAfterProvenNonCharge)$", mutant.CascadeAfterTimeout...)
	if err == nil {
		t.Fatalf("the cascade's tests passed against a build that cascades after a timeout:\n%s", out)
	}
	if !strings.Contains(string(out), "charged 2 times") && !strings.Contains(string(out), "--- FAIL: TestCascadeAfterProvenNonCharge/timeout_waits") {
		t.Fatalf("the mutant did not fail the way expected (does it build?):\n%s", out)
	}
}
