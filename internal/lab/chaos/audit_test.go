package chaos

import (
	"encoding/json"
	"testing"

	"github.com/settlepay/settle/internal/audit"
)

// TestFindingViolation: every class of finding but FOREIGN breaks
// InvAudit, naming the order when Settle has one.
func TestFindingViolation(t *testing.T) {
	for _, c := range audit.Classes {
		f := audit.Finding{Class: c, OrderID: "o1", AttemptID: "a1", GatewayRecordID: "ch_sim_000001",
			Settle: json.RawMessage(`{"state": "PAID"}`), GatewayRecord: json.RawMessage(`{"id": "ch_sim_000001"}`)}
		v, ok := findingViolation("refpsp", f)
		if want := c != audit.Foreign; ok != want {
			t.Errorf("%s: violation %t, want %t", c, ok, want)
			continue
		}
		if ok && (v.Invariant != InvAudit || v.Order != "o1") {
			t.Errorf("%s: %+v, want invariant %d for order o1", c, v, InvAudit)
		}
	}
}

// TestClassCounts: the summary's audit_classes lists the classes found,
// the critical first, and "-" when there are none.
func TestClassCounts(t *testing.T) {
	for _, tt := range []struct {
		counts map[audit.Class]int
		want   string
	}{
		{nil, "-"},
		{map[audit.Class]int{audit.Foreign: 0}, "-"},
		{map[audit.Class]int{audit.Foreign: 1, audit.Duplicate: 2, audit.MissingInSettle: 1},
			"DUPLICATE:2,MISSING_IN_SETTLE:1,FOREIGN:1"},
	} {
		if got := classCounts(tt.counts); got != tt.want {
			t.Errorf("classCounts(%v) = %q, want %q", tt.counts, got, tt.want)
		}
	}
}
