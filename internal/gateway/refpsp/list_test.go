package refpsp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/order"
)

// TestListRefusesBadPages: a listing the audit could not rely on (records
// outside the window, out of order or twice, more than the limit, a
// cursor that does not move on, an unknown status, an error answer) ends
// the listing with an error naming what is wrong.
func TestListRefusesBadPages(t *testing.T) {
	t.Parallel()
	const (
		c1 = `{"id":"ch_1","reference":"a","status":"succeeded","amount":100,"currency":"GBP","created":"2026-01-01T10:00:00.000000001Z"}`
		c2 = `{"id":"ch_2","reference":"b","status":"succeeded","amount":100,"currency":"GBP","created":"2026-01-01T10:00:00.000000002Z"}`
	)
	tests := []struct {
		name  string
		pages []string // answered in turn
		code  int
		want  string
	}{
		{"outside the window", []string{`{"data":[{"id":"ch_0","reference":"z","status":"succeeded","created":"2025-01-01T00:00:00Z"}]}`}, 200, "outside the window"},
		{"out of order", []string{`{"data":[` + c2 + `,` + c1 + `]}`}, 200, "out of order"},
		{"twice across pages", []string{`{"data":[` + c1 + `],"has_more":true,"next_cursor":"x"}`, `{"data":[` + c1 + `]}`}, 200, "out of order (or twice)"},
		{"more than the limit", []string{`{"data":[` + c1 + `,` + c2 + `,` + c2 + `]}`}, 200, "more than the limit"},
		{"no cursor", []string{`{"data":[` + c1 + `],"has_more":true}`}, 200, "gave no new cursor"},
		{"the same cursor", []string{`{"data":[` + c1 + `],"has_more":true,"next_cursor":"x"}`, `{"data":[` + c2 + `],"has_more":true,"next_cursor":"x"}`}, 200, "gave no new cursor"},
		{"an unknown status", []string{`{"data":[{"id":"ch_1","status":"weird","created":"2026-01-01T10:00:00Z"}]}`}, 200, `unknown status "weird"`},
		{"a bad parameter", []string{`{"error":"limit must be a whole number from 1 to 100"}`}, 400, "gateway answered 400: limit must be"},
		{"malformed", []string{`{"data":`}, 200, "malformed page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.code)
				w.Write([]byte(tt.pages[min(n, len(tt.pages)-1)]))
				n++
			}))
			t.Cleanup(srv.Close)
			c, err := refpsp.New(refpsp.Config{BaseURL: srv.URL, APIKey: apiKey, ListPageSize: 2})
			if err != nil {
				t.Fatal(err)
			}
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			err = c.ListCharges(t.Context(), from, from.Add(24*time.Hour), func(order.GatewayCharge) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "refpsp: list charges: ") {
				t.Errorf("ListCharges = %v; want an error about %q", err, tt.want)
			}
			checkSecrets(t, err)
		})
	}
}

// TestListPageSize: the page size is checked at start.
func TestListPageSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, refpsp.MaxListLimit + 1} {
		if _, err := refpsp.New(refpsp.Config{BaseURL: "http://psp.example", APIKey: apiKey, ListPageSize: n}); err == nil {
			t.Errorf("New with ListPageSize %d = nil error; want one", n)
		}
	}
}
