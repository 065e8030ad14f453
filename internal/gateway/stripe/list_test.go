package stripe_test

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/gateway/stripe"
	"github.com/settlepay/settle/internal/gateway/stripe/stripetest"
	"github.com/settlepay/settle/internal/order"
)

// TestListings lists what the adapter charged and refunded at the fake,
// whose clock stamps two or three records a second and whose pages hold
// three records: Stripe's newest-first pages must come out oldest first,
// by id within a second, each record once, read as Lookup reads it.
func TestListings(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var (
		mu   sync.Mutex
		tick int
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick++
		return base.Add(time.Duration(tick) * 400 * time.Millisecond)
	}
	fake, url := newFake(t, stripetest.Options{Clock: clock, PageSize: 3})
	g := newGateway(t, stripe.Config{BaseURL: url, Timeout: 5 * time.Second})
	ctx := t.Context()

	// What each attempt should list as, by its id; and the refunds made.
	want := map[string]order.GatewayCharge{}
	var refunds []order.RefundRequest
	for i := range 14 {
		var req order.ChargeRequest
		switch i % 4 {
		case 0:
			req = chargeReq(stripetest.TokenDeclined)
		case 1:
			req = chargeReq(stripetest.TokenVisa)
			req.Capture = order.CaptureManual
		default:
			req = chargeReq(stripetest.TokenVisa)
		}
		res, err := g.Charge(ctx, req)
		if err != nil && res.Outcome != order.OutcomeDeclined {
			t.Fatalf("Charge %d = %+v, %v", i, res, err)
		}
		w := order.GatewayCharge{ID: res.ChargeID, Reference: req.AttemptID, Amount: req.Amount, Outcome: res.Outcome}
		switch i % 4 {
		case 0:
			w.DeclineCode = "generic_decline"
		case 1:
			w.Hold = order.HoldOpen
		default:
			w.Captured = req.Amount.AmountMinor
		}
		if i%4 == 2 {
			rf := order.RefundRequest{RefundID: order.NewID(), OrderID: req.OrderID, ChargeAttemptID: req.AttemptID,
				ChargeID: res.ChargeID, Amount: order.Money{Currency: req.Amount.Currency, AmountMinor: 250}}
			if res, err := g.Refund(ctx, rf); err != nil || res.Outcome != order.OutcomeSucceeded {
				t.Fatalf("Refund = %+v, %v", res, err)
			}
			w.Refunded = 250
			refunds = append(refunds, rf)
		}
		want[req.AttemptID] = w
	}

	listAll := func(t *testing.T, from, to time.Time) []order.GatewayCharge {
		t.Helper()
		var got []order.GatewayCharge
		if err := g.ListCharges(ctx, from, to, func(c order.GatewayCharge) error {
			got = append(got, c)
			return nil
		}); err != nil {
			t.Fatalf("ListCharges: %v", err)
		}
		return got
	}
	all := listAll(t, base, base.Add(time.Hour))

	t.Run("every charge once, oldest first, by id within a second", func(t *testing.T) {
		if len(all) != len(want) || len(fake.Ledger()) != len(want) {
			t.Fatalf("listed %d charges; want the %d made", len(all), len(want))
		}
		seconds := map[time.Time]int{}
		for i, c := range all {
			seconds[c.Created]++
			if i > 0 {
				prev := all[i-1]
				if k := cmp.Or(c.Created.Compare(prev.Created), cmp.Compare(c.ID, prev.ID)); k <= 0 {
					t.Errorf("charge %d (%s, %s) listed after (%s, %s)", i, c.Created, c.ID, prev.Created, prev.ID)
				}
			}
		}
		if len(seconds) == len(all) {
			t.Errorf("no two charges share a second: the test does not check the order within one")
		}
	})

	t.Run("each charge read as charged", func(t *testing.T) {
		for _, c := range all {
			w, ok := want[c.Reference]
			if !ok {
				t.Errorf("charge %s has reference %q, no attempt's", c.ID, c.Reference)
				continue
			}
			w.Created = c.Created
			if c != w {
				t.Errorf("charge listed as %+v; want %+v", c, w)
			}
			if c.Created.Before(base) || c.Created.After(base.Add(time.Minute)) {
				t.Errorf("charge %s created %s; want the fake's clock's time", c.ID, c.Created)
			}
		}
	})

	t.Run("a window holds the seconds it starts, and not the one it ends at", func(t *testing.T) {
		from, to := all[3].Created, all[len(all)-3].Created
		var wantIDs []string
		for _, c := range all {
			if !c.Created.Before(from) && c.Created.Before(to) {
				wantIDs = append(wantIDs, c.ID)
			}
		}
		var got []string
		for _, c := range listAll(t, from, to) {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, wantIDs) || len(got) == 0 {
			t.Errorf("[%s, %s) listed %q; want %q", from, to, got, wantIDs)
		}
		// A start within a second leaves that second out: Stripe stamps
		// whole seconds, and a record of it may have been made before.
		for _, c := range listAll(t, from.Add(time.Millisecond), to) {
			if c.Created.Equal(from) {
				t.Errorf("charge %s of %s listed in a window starting after it", c.ID, from)
			}
		}
	})

	t.Run("a window of one page is read once, oldest first", func(t *testing.T) {
		// One second holds two or three records: the fake's one page.
		from := all[0].Created
		before := fake.Count("GET", "/v1/payment_intents")
		got := listAll(t, from, from.Add(time.Second))
		if n := fake.Count("GET", "/v1/payment_intents") - before; n != 1 {
			t.Errorf("the listing read %d pages; want 1", n)
		}
		var wantIDs, gotIDs []string
		for _, c := range all {
			if c.Created.Equal(from) {
				wantIDs = append(wantIDs, c.ID)
			}
		}
		for _, c := range got {
			gotIDs = append(gotIDs, c.ID)
		}
		if len(wantIDs) < 2 || !slices.Equal(gotIDs, wantIDs) {
			t.Errorf("[%s, +1s) listed %q; want %q (at least two)", from, gotIDs, wantIDs)
		}
	})

	t.Run("refunds, with their charges", func(t *testing.T) {
		var got []order.GatewayRefund
		err := g.ListRefunds(ctx, base, base.Add(time.Hour), func(r order.GatewayRefund) error {
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Fatalf("ListRefunds: %v", err)
		}
		if len(got) != len(refunds) {
			t.Fatalf("listed %d refunds; want %d", len(got), len(refunds))
		}
		for i, r := range got {
			w := refunds[i]
			if r.Reference != w.RefundID || r.ChargeID != w.ChargeID || r.ChargeReference != w.ChargeAttemptID ||
				r.Amount != w.Amount || r.Outcome != order.OutcomeSucceeded || r.FailureCode != "" {
				t.Errorf("refund %d listed as %+v; want %+v, succeeded", i, r, w)
			}
		}
	})

	t.Run("a listing stops at the caller's error", func(t *testing.T) {
		stop := errors.New("enough")
		calls := 0
		err := g.ListCharges(ctx, base, base.Add(time.Hour), func(order.GatewayCharge) error {
			calls++
			if calls == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 3 {
			t.Errorf("ListCharges = %v after %d calls; want the caller's error, as it is, after 3", err, calls)
		}
	})

	t.Run("a window that ends before it starts is refused", func(t *testing.T) {
		err := g.ListCharges(ctx, base.Add(time.Hour), base, func(order.GatewayCharge) error { return nil })
		if err == nil {
			t.Error("ListCharges of a reversed window = nil; want an error")
		}
	})
}
