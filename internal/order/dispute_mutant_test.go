package order_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/lab/mutant"
)

// refundThroughDispute is the double payout disputes exist to prevent: the
// refund claim stops asking whether a dispute of the order is open, on
// both engines (the statement PostgreSQL runs, and the function Citus
// runs), so a refund is sent on top of a chargeback.
var refundThroughDispute = []mutant.Mutation{
	{File: "internal/postgres/sql/refund_claims.sql", Old: "\t\tAND ord.open_disputes = 0\n", New: ""},
	{File: "internal/postgres/sql/refund_claim.sql", Old: "\t\tAND ord.open_disputes = 0\n", New: ""},
	{File: "migrations/00025_disputes.sql",
		Old: "v_o.state = ANY(p_refundable) AND v_o.open_disputes = 0 AND",
		New: "v_o.state = ANY(p_refundable) AND"},
}

// TestTestsCatchRefundThroughDispute runs the disputes' refund tests
// against a build with refundThroughDispute (go test -overlay), and
// requires them to fail.
func TestTestsCatchRefundThroughDispute(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the package's tests again")
	}
	t.Parallel()
	out, err := mutant.Test(context.Background(), ".", "./internal/order",
		"^(TestRefundRefusedWhileDisputeOpen|TestRefundsRacingADisputeOpening)$", refundThroughDispute...)
	if err == nil {
		t.Fatalf("the disputes' tests passed against a build that refunds through an open dispute:\n%s", out)
	}
	if !strings.Contains(string(out), "want a *DisputeOpenError") {
		t.Fatalf("the mutant did not fail the way expected (does it build?):\n%s", out)
	}
}
