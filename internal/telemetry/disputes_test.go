package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/telemetry"
)

// TestDisputeGauges: the disputes are exported by status, with those due
// soon with no response, read at each scrape; a failed read says so.
func TestDisputeGauges(t *testing.T) {
	m := telemetry.NewMetrics()
	fail := false
	m.WatchDisputes(func(context.Context) (order.DisputeCounts, error) {
		if fail {
			return order.DisputeCounts{}, errors.New("down")
		}
		return order.DisputeCounts{ByStatus: map[order.DisputeStatus]int64{order.DisputeNeedsResponse: 3, order.DisputeLost: 2},
			DueSoon: 1}, nil
	})
	scrape := func() string {
		hs := httptest.NewServer(m.Handler(func(context.Context) error { return nil }))
		defer hs.Close()
		resp, err := hs.Client().Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	body := scrape()
	for _, want := range []string{`settle_disputes{status="NEEDS_RESPONSE"} 3`, `settle_disputes{status="LOST"} 2`,
		`settle_disputes{status="WON"} 0`, `settle_disputes_due_soon{within="72h"} 1`, `settle_disputes_up 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	fail = true
	if body := scrape(); !strings.Contains(body, "settle_disputes_up 0") {
		t.Errorf("a failed read is not reported:\n%s", body)
	}
}
