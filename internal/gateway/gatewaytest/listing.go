package gatewaytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// What the suite holds every gateway whose records can be listed (an
// order.ChargeLister, the audit's reading of the gateway) to, through
// Harness.Lister, which reads small pages so that a listing takes several:
//
//   - every charge made in a window is listed once, in the gateway's
//     order (created), with the amount and outcome it was charged with
//     and what was captured and refunded of it; refunds likewise, each
//     with its charge;
//   - a window holds what was created in it and nothing else, and an
//     empty window lists nothing;
//   - a listing stops at the first error of the caller's function, and
//     at the end of its context, and returns it.

// listingTests are the listing tests of Run.
var listingTests = []struct {
	name string
	run  func(t *testing.T, h Harness, l order.ChargeLister)
}{
	{"listing charges", testListCharges},
	{"listing refunds", testListRefunds},
	{"listing an empty window", testListEmpty},
	{"a listing's window", testListWindow},
	{"a listing stops at an error", testListStops},
}

// margin widens a window made of this machine's clock readings, so that a
// gateway's clock a little off still puts its records inside.
const margin = time.Second

// listCharges lists the charges of [from, to) through l, checking that
// they come in order.
func listCharges(t *testing.T, l order.ChargeLister, from, to time.Time) []order.GatewayCharge {
	t.Helper()
	var out []order.GatewayCharge
	err := l.ListCharges(t.Context(), from, to, func(c order.GatewayCharge) error {
		if n := len(out); n > 0 && c.Created.Before(out[n-1].Created) {
			t.Errorf("charge %s (created %s) listed after %s (created %s)", c.ID, c.Created, out[n-1].ID, out[n-1].Created)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatalf("ListCharges: %v", err)
	}
	return out
}

// listRefunds is listCharges for refunds.
func listRefunds(t *testing.T, l order.ChargeLister, from, to time.Time) []order.GatewayRefund {
	t.Helper()
	var out []order.GatewayRefund
	err := l.ListRefunds(t.Context(), from, to, func(r order.GatewayRefund) error {
		if n := len(out); n > 0 && r.Created.Before(out[n-1].Created) {
			t.Errorf("refund %s (created %s) listed after %s (created %s)", r.ID, r.Created, out[n-1].ID, out[n-1].Created)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ListRefunds: %v", err)
	}
	return out
}

// charged is one charge the suite made, and what it came to.
type charged struct {
	req order.ChargeRequest
	res order.Result
}

// chargeSome makes n charges, every third one declined, and returns them
// in the order made.
func chargeSome(t *testing.T, h Harness, n int) []charged {
	t.Helper()
	var out []charged
	for i := range n {
		token := h.OK
		if i%3 == 2 {
			token = h.Decline
		}
		req := request(token)
		req.Amount.AmountMinor += int64(i) // tells the charges apart by amount too
		res, err := charge(t, h, req)
		if err != nil && res.Outcome != order.OutcomeDeclined || res.Outcome != order.OutcomeSucceeded && res.Outcome != order.OutcomeDeclined {
			t.Fatalf("Charge %d = %+v, %v; want succeeded or declined", i, res, err)
		}
		out = append(out, charged{req, res})
	}
	return out
}

// byReference indexes cs by reference, failing on a reference listed
// twice.
func byReference(t *testing.T, cs []order.GatewayCharge) map[string]order.GatewayCharge {
	t.Helper()
	m := make(map[string]order.GatewayCharge, len(cs))
	for _, c := range cs {
		if c.Reference == "" {
			continue
		}
		if _, dup := m[c.Reference]; dup {
			t.Errorf("reference %s listed twice", c.Reference)
		}
		m[c.Reference] = c
	}
	return m
}

func testListCharges(t *testing.T, h Harness, l order.ChargeLister) {
	start := time.Now()
	made := chargeSome(t, h, 7)
	listed := listCharges(t, l, start.Add(-margin), time.Now().Add(margin))
	got := byReference(t, listed)
	var last time.Time
	for i, m := range made {
		c, ok := got[m.req.AttemptID]
		if !ok {
			t.Errorf("charge %d (%s) is not listed", i, m.req.AttemptID)
			continue
		}
		want := order.GatewayCharge{ID: m.res.ChargeID, Reference: m.req.AttemptID, Amount: m.req.Amount,
			Outcome: m.res.Outcome, DeclineCode: m.res.DeclineCode, Created: c.Created}
		if m.res.Outcome == order.OutcomeSucceeded {
			want.Captured = m.req.Amount.AmountMinor
		}
		if c != want {
			t.Errorf("charge %d listed as %+v, want %+v", i, c, want)
		}
		if c.Created.Before(last) {
			t.Errorf("charge %d listed before the charge made ahead of it", i)
		}
		last = c.Created
	}
}

func testListRefunds(t *testing.T, h Harness, l order.ChargeLister) {
	r, ok := h.Gateway.(order.Refunder)
	if !ok {
		t.Skip("the gateway does not refund")
	}
	start := time.Now()
	var reqs []order.RefundRequest
	for i, amount := range []int64{300, 500, 1250} {
		req := refundable(t, h, h.OK, amount)
		res, err := refund(t, h, r, req)
		if err != nil || res.Outcome != order.OutcomeSucceeded {
			t.Fatalf("Refund %d = %+v, %v; want succeeded", i, res, err)
		}
		reqs = append(reqs, req)
	}
	// The first charge is refunded twice.
	again := reqs[0]
	again.RefundID, again.Amount.AmountMinor = order.NewID(), 200
	if res, err := refund(t, h, r, again); err != nil || res.Outcome != order.OutcomeSucceeded {
		t.Fatalf("second Refund = %+v, %v; want succeeded", res, err)
	}
	reqs = append(reqs, again)
	end := time.Now().Add(margin)

	listed := listRefunds(t, l, start.Add(-margin), end)
	got := make(map[string]order.GatewayRefund)
	for _, rf := range listed {
		if _, dup := got[rf.Reference]; dup && rf.Reference != "" {
			t.Errorf("refund %s listed twice", rf.Reference)
		}
		got[rf.Reference] = rf
	}
	charges := byReference(t, listCharges(t, l, start.Add(-margin), end))
	refunded := make(map[string]int64)
	for i, req := range reqs {
		refunded[req.ChargeAttemptID] += req.Amount.AmountMinor
		rf, ok := got[req.RefundID]
		if !ok {
			t.Errorf("refund %d (%s) is not listed", i, req.RefundID)
			continue
		}
		if rf.ID == "" || rf.ChargeID != req.ChargeID || rf.ChargeReference != req.ChargeAttemptID ||
			rf.Amount != req.Amount || rf.Outcome != order.OutcomeSucceeded || rf.Created.IsZero() {
			t.Errorf("refund %d listed as %+v, want a succeeded refund of %+v", i, rf, req)
		}
	}
	for ref, sum := range refunded {
		if c := charges[ref]; c.Refunded != sum {
			t.Errorf("charge %s listed with %d refunded, want %d", ref, c.Refunded, sum)
		}
	}
}

func testListEmpty(t *testing.T, h Harness, l order.ChargeLister) {
	chargeSome(t, h, 2)
	now := time.Now()
	for _, w := range []struct{ from, to time.Time }{
		{time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC)},
		{now, now},
	} {
		if cs := listCharges(t, l, w.from, w.to); len(cs) != 0 {
			t.Errorf("ListCharges of [%s, %s) = %+v; want nothing", w.from, w.to, cs)
		}
		if rs := listRefunds(t, l, w.from, w.to); len(rs) != 0 {
			t.Errorf("ListRefunds of [%s, %s) = %+v; want nothing", w.from, w.to, rs)
		}
	}
}

// testListWindow: the window's bounds are the gateway's creation times,
// its start inside, its end outside.
func testListWindow(t *testing.T, h Harness, l order.ChargeLister) {
	start := time.Now()
	made := chargeSome(t, h, 4)
	end := time.Now().Add(margin)
	all := listCharges(t, l, start.Add(-margin), end)
	got := byReference(t, all)
	first, last := got[made[1].req.AttemptID], got[made[3].req.AttemptID]
	if first.ID == "" || last.ID == "" {
		t.Fatalf("the charges are not listed: %+v", all)
	}
	// [charge 1, charge 3): charges 1 and 2.
	in := byReference(t, listCharges(t, l, first.Created, last.Created))
	for i, m := range made {
		_, listed := in[m.req.AttemptID]
		if want := i == 1 || i == 2; listed != want {
			t.Errorf("charge %d listed in [charge 1, charge 3): %v, want %v", i, listed, want)
		}
	}
}

// testListStops: a listing ends at the caller's error, which it returns,
// after calling the function no more; and at the end of its context.
func testListStops(t *testing.T, h Harness, l order.ChargeLister) {
	start := time.Now()
	chargeSome(t, h, 5)
	end := time.Now().Add(margin)
	stop := errors.New("enough")
	calls := 0
	err := l.ListCharges(t.Context(), start.Add(-margin), end, func(order.GatewayCharge) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Errorf("ListCharges = %v after %d calls; want the caller's error after 3", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	err = l.ListCharges(ctx, start.Add(-margin), end, func(order.GatewayCharge) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ListCharges with its context canceled = %v after %d calls; want context.Canceled", err, calls)
	}
}
