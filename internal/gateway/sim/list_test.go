package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
)

// get sends an authorized GET of path and query to the simulator and
// returns the status and body.
func (s *stack) get(t *testing.T, path string, q url.Values) (int, []byte) {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// window is the query of a listing of [from, to).
func window(from, to time.Time) url.Values {
	return url.Values{"created_gte": {from.Format(time.RFC3339Nano)}, "created_lt": {to.Format(time.RFC3339Nano)}}
}

// TestListParameters: a listing's parameters are checked, each wrong one
// answered 400 with what is wrong; a lookup by reference is unchanged.
func TestListParameters(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	now := time.Now().UTC()
	ok := window(now.Add(-time.Hour), now.Add(time.Hour))
	with := func(k, v string) url.Values {
		q := url.Values{}
		for k, v := range ok {
			q[k] = v
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q
	}
	tests := []struct {
		name string
		q    url.Values
		code int
		msg  string
	}{
		{"a window", ok, http.StatusOK, ""},
		{"a window without fractions or Z", window(now.Add(-time.Hour).Truncate(time.Second).In(time.FixedZone("", 3600)), now.Add(time.Hour)), http.StatusOK, ""},
		{"an empty window", window(now, now), http.StatusOK, ""},
		{"the limit at its bounds", with("limit", "100"), http.StatusOK, ""},
		{"no start", with("created_gte", ""), http.StatusBadRequest, "created_gte and created_lt are required"},
		{"no end", with("created_lt", ""), http.StatusBadRequest, "created_gte and created_lt are required"},
		{"no window at all", url.Values{}, http.StatusBadRequest, "created_gte and created_lt are required"},
		{"a start that is no time", with("created_gte", "yesterday"), http.StatusBadRequest, "created_gte must be an RFC 3339 time"},
		{"an end that is a date", with("created_lt", "2026-01-02"), http.StatusBadRequest, "created_lt must be an RFC 3339 time"},
		{"a window backwards", window(now, now.Add(-time.Second)), http.StatusBadRequest, "created_lt must not be before created_gte"},
		{"limit 0", with("limit", "0"), http.StatusBadRequest, "limit must be a whole number from 1 to 100"},
		{"limit 101", with("limit", "101"), http.StatusBadRequest, "limit must be a whole number from 1 to 100"},
		{"limit not a number", with("limit", "ten"), http.StatusBadRequest, "limit must be"},
		{"a cursor of nothing", with("starting_after", "bm90IGEgY3Vyc29y"), http.StatusBadRequest, "starting_after is not a cursor"},
		{"a cursor not base64", with("starting_after", "!!"), http.StatusBadRequest, "starting_after is not a cursor"},
		{"an unknown parameter", with("status", "succeeded"), http.StatusBadRequest, `unknown parameter "status"`},
		{"an empty reference", url.Values{"reference": {""}}, http.StatusBadRequest, "reference is required"},
		{"a reference with nothing charged", url.Values{"reference": {"att_none"}}, http.StatusNotFound, "with that reference"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/charges", "/v1/refunds"} {
			code, body := s.get(t, path, tt.q)
			var e struct{ Error string }
			if code != http.StatusOK {
				_ = json.Unmarshal(body, &e)
			}
			if code != tt.code || !strings.Contains(e.Error, tt.msg) {
				t.Errorf("%s: GET %s?%s = %d %s; want %d with %q", tt.name, path, tt.q.Encode(), code, body, tt.code, tt.msg)
			}
		}
	}
	// Without a key, a listing is refused like every other request.
	resp, err := http.Get(s.srv.URL + "/v1/charges?" + ok.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a listing without a key = %d, want 401", resp.StatusCode)
	}
}

// TestListPagesUnderInserts pages through the charges two at a time while
// charges are made between the pages: every charge of the window is
// listed once, in order, those made while paging included, and a page's
// fields are the charge's.
func TestListPagesUnderInserts(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	ctx := context.Background()
	from := time.Now().UTC()
	charge := func(i int, token string) {
		t.Helper()
		if _, err := s.gw.Charge(ctx, req(fmt.Sprintf("att_%02d", i), token)); err != nil && token != "tok_decline" {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		charge(i, []string{"tok_ok", "tok_decline"}[i%2])
	}
	to := time.Now().UTC().Add(time.Hour)
	q := window(from, to)
	q.Set("limit", "2")
	var listed []refpsp.ListedCharge
	made := 5
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("the listing does not end")
		}
		code, body := s.get(t, "/v1/charges", q)
		if code != http.StatusOK {
			t.Fatalf("page %d = %d %s", pages, code, body)
		}
		var pg refpsp.Page[refpsp.ListedCharge]
		if err := json.Unmarshal(body, &pg); err != nil {
			t.Fatal(err)
		}
		if len(pg.Data) > 2 {
			t.Fatalf("page %d holds %d charges, more than the limit", pages, len(pg.Data))
		}
		listed = append(listed, pg.Data...)
		if made < 8 {
			charge(made, "tok_ok") // made while paging, inside the window
			made++
		}
		if !pg.HasMore {
			break
		}
		q.Set("starting_after", pg.NextCursor)
	}
	ledger := s.sim.Ledger()
	if len(listed) != len(ledger) || len(ledger) != 8 {
		t.Fatalf("listed %d charges, the ledger holds %d; want 8 each", len(listed), len(ledger))
	}
	for i, c := range ledger {
		l := listed[i]
		if l.ID != c.ID || l.Reference != c.Reference || l.Status != c.Status || l.Amount != c.Amount ||
			l.Currency != c.Currency || l.DeclineCode != c.DeclineCode || !l.Created.Equal(c.Created) {
			t.Errorf("listed %d = %+v, want the ledger's %+v", i, l, c)
		}
		if i > 0 && !l.Created.After(listed[i-1].Created) {
			t.Errorf("listed %d created %s, not after the one before (%s)", i, l.Created, listed[i-1].Created)
		}
	}
	// A window excludes what was made outside it, and an empty one lists
	// nothing.
	mid := ledger[3].Created
	code, body := s.get(t, "/v1/charges", window(ledger[1].Created, mid))
	var pg refpsp.Page[refpsp.ListedCharge]
	if err := json.Unmarshal(body, &pg); code != http.StatusOK || err != nil {
		t.Fatalf("listing = %d %s", code, body)
	}
	if ids := chargeIDs(pg.Data); !slices.Equal(ids, []string{ledger[1].ID, ledger[2].ID}) || pg.HasMore {
		t.Errorf("listing of [charge 1, charge 3) = %v, has_more %v; want charges 1 and 2 alone", ids, pg.HasMore)
	}
	code, body = s.get(t, "/v1/charges", window(to, to.Add(time.Hour)))
	if code != http.StatusOK || strings.TrimSpace(string(body)) != `{"data":[],"has_more":false}` {
		t.Errorf("listing of an empty window = %d %s; want no data", code, body)
	}
}

func chargeIDs(cs []refpsp.ListedCharge) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// TestListInFlight: a charge in flight (lookups say 404) is listed once
// its answer is due, not before, as a lookup would find it.
func TestListInFlight(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, 5*time.Second)
	from := time.Now().UTC()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.gw.Charge(context.Background(), req("att_slow", "tok_slow_600"))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.sim.Ledger()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	if err := s.gw.ListCharges(t.Context(), from, from.Add(time.Hour), func(order.GatewayCharge) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("ListCharges while the charge is in flight = %d charges, %v; want none", n, err)
	}
	<-done
	if err := s.gw.ListCharges(t.Context(), from, from.Add(time.Hour), func(order.GatewayCharge) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("ListCharges once the charge landed = %d charges, %v; want 1", n, err)
	}
}

// listing is everything the simulator lists, through the adapter.
type listing struct {
	charges []order.GatewayCharge
	refunds []order.GatewayRefund
}

func (s *stack) listAll(t *testing.T) listing {
	t.Helper()
	from, to := time.Unix(0, 0), time.Now().Add(time.Hour)
	var l listing
	if err := s.gw.ListCharges(t.Context(), from, to, func(c order.GatewayCharge) error {
		l.charges = append(l.charges, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.gw.ListRefunds(t.Context(), from, to, func(r order.GatewayRefund) error {
		l.refunds = append(l.refunds, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDiscrepancies: each injector changes the listings by exactly its
// discrepancy, and nothing else.
func TestDiscrepancies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// do injects into s, whose charges att_a and att_b succeeded and
		// att_a was refunded 200; want is what the listing becomes of
		// before.
		do   func(t *testing.T, s *stack) error
		want func(before listing) listing
	}{
		{"Foreign", func(t *testing.T, s *stack) error {
			c := s.sim.Foreign(4200, "EUR")
			if c.ID != "ch_sim_000003" || c.Reference != "" {
				t.Errorf("Foreign = %+v; want ch_sim_000003 with no reference", c)
			}
			return nil
		}, func(b listing) listing {
			b.charges = append(b.charges, order.GatewayCharge{ID: "ch_sim_000003", Amount: order.Money{Currency: "EUR", AmountMinor: 4200},
				Outcome: order.OutcomeSucceeded, Captured: 4200})
			return b
		}},
		{"Duplicate", func(t *testing.T, s *stack) error {
			_, err := s.sim.Duplicate("att_a")
			if res, lerr := s.gw.Lookup(t.Context(), req("att_a", "tok_ok")); lerr != nil || res.ChargeID != "ch_sim_000003" {
				t.Errorf("Lookup of the duplicated reference = %+v, %v; want the duplicate", res, lerr)
			}
			return err
		}, func(b listing) listing {
			d := b.charges[0]
			d.ID, d.Refunded = "ch_sim_000003", 0
			b.charges = append(b.charges, d)
			return b
		}},
		{"AlterAmount", func(t *testing.T, s *stack) error {
			_, err := s.sim.AlterAmount("att_b", 999)
			return err
		}, func(b listing) listing {
			b.charges = slices.Clone(b.charges)
			b.charges[1].Amount.AmountMinor, b.charges[1].Captured = 999, 999
			return b
		}},
		{"Hide", func(t *testing.T, s *stack) error {
			err := s.sim.Hide("att_b")
			if res, lerr := s.gw.Lookup(t.Context(), req("att_b", "tok_ok")); lerr != nil || res.Outcome != order.OutcomeNotFound {
				t.Errorf("Lookup of the hidden charge = %+v, %v; want not found", res, lerr)
			}
			return err
		}, func(b listing) listing {
			b.charges = b.charges[:1]
			return b
		}},
		{"ExtraRefund", func(t *testing.T, s *stack) error {
			_, err := s.sim.ExtraRefund("att_b", 300)
			return err
		}, func(b listing) listing {
			b.charges = slices.Clone(b.charges)
			b.charges[1].Refunded = 300
			b.refunds = append(b.refunds, order.GatewayRefund{ID: "re_sim_000002", ChargeID: "ch_sim_000002", ChargeReference: "att_b",
				Amount: order.Money{Currency: "GBP", AmountMinor: 300}, Outcome: order.OutcomeSucceeded})
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, sim.Options{}, time.Second)
			for _, a := range []string{"att_a", "att_b"} {
				if _, err := s.gw.Charge(t.Context(), req(a, "tok_ok")); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.gw.Refund(t.Context(), order.RefundRequest{RefundID: "ref_a", ChargeAttemptID: "att_a",
				Amount: order.Money{Currency: "GBP", AmountMinor: 200}}); err != nil {
				t.Fatal(err)
			}
			before := s.listAll(t)
			if err := tt.do(t, s); err != nil {
				t.Fatal(err)
			}
			got, want := s.listAll(t), tt.want(before)
			// The times are the simulator's; a new record's is checked
			// to come after every other, then left out of the comparison.
			checkCreated(t, got)
			for _, l := range []*listing{&got, &want} {
				for i := range l.charges {
					l.charges[i].Created = time.Time{}
				}
				for i := range l.refunds {
					l.refunds[i].Created = time.Time{}
				}
			}
			if !slices.Equal(got.charges, want.charges) {
				t.Errorf("charges listed:\n%+v\nwant\n%+v", got.charges, want.charges)
			}
			if !slices.Equal(got.refunds, want.refunds) {
				t.Errorf("refunds listed:\n%+v\nwant\n%+v", got.refunds, want.refunds)
			}
		})
	}
}

// checkCreated checks that l's records have creation times, in order.
func checkCreated(t *testing.T, l listing) {
	t.Helper()
	for i, c := range l.charges {
		if c.Created.IsZero() || i > 0 && !c.Created.After(l.charges[i-1].Created) {
			t.Errorf("charge %s created %s, not after the one before", c.ID, c.Created)
		}
	}
	for i, r := range l.refunds {
		if r.Created.IsZero() || i > 0 && !r.Created.After(l.refunds[i-1].Created) {
			t.Errorf("refund %s created %s, not after the one before", r.ID, r.Created)
		}
	}
}

// TestDiscrepancyOfNoCharge: an injector given a reference no charge has
// changes nothing.
func TestDiscrepancyOfNoCharge(t *testing.T) {
	t.Parallel()
	s := newStack(t, sim.Options{}, time.Second)
	_, e1 := s.sim.Duplicate("att_none")
	_, e2 := s.sim.AlterAmount("att_none", 1)
	e3 := s.sim.Hide("att_none")
	_, e4 := s.sim.ExtraRefund("att_none", 1)
	for i, err := range []error{e1, e2, e3, e4} {
		if !errors.Is(err, sim.ErrNoReference) {
			t.Errorf("injector %d = %v; want ErrNoReference", i, err)
		}
	}
	if n, r := len(s.sim.Ledger()), len(s.sim.Refunds()); n != 0 || r != 0 {
		t.Errorf("the ledgers hold %d charges and %d refunds; want none", n, r)
	}
}
