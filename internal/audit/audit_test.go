package audit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

func TestMain(m *testing.M) { postgrestest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// margin is the tests' audit margin: short, so that a window closes soon
// after its orders are paid.
const margin = 20 * time.Millisecond

// fixture is a Settle (service and store on a fresh database) charging a
// simulator over HTTP through the refpsp adapter, and an auditor of it.
type fixture struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	sim   *sim.Sim
	gw    *refpsp.Client
	svc   *order.Service
	from  time.Time
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	pool := postgrestest.Pool(t)
	f := &fixture{pool: pool, store: postgres.NewStore(pool), sim: sim.New(sim.Options{})}
	hs := httptest.NewServer(f.sim)
	t.Cleanup(hs.Close)
	var err error
	if f.gw, err = refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim", Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	f.svc, err = order.NewService(f.store, map[string]order.Gateway{"sim": f.gw}, order.Config{DefaultGateway: "sim",
		GatewayTimeout: 5 * time.Second, FirstRecheck: time.Second}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	f.from = time.Now().Add(-time.Second)
	return f
}

// pay creates and charges n orders of 1250 GBP (tok_ok) at once, 32 at a
// time, and returns their attempts' ids (the charges' references).
func (f *fixture) pay(t testing.TB, n int) []string {
	t.Helper()
	ctx := context.Background()
	refs := make([]string, n)
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		errMu sync.Mutex
		first error
	)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				o, a, err := f.svc.CreateAndCharge(ctx, order.DefaultMerchant, order.NewOrder{
					MerchantReference: fmt.Sprintf("audit-%d", i), Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
					PaymentMethod: "tok_ok", Gateway: "sim"}, order.ChargeInput{RequestID: fmt.Sprintf("request-%06d", i)})
				if err == nil && (o.State != order.StatePaid || a == nil) {
					err = fmt.Errorf("order %d is %s", i, o.State)
				}
				if err != nil {
					errMu.Lock()
					first = cmp(first, err)
					errMu.Unlock()
					continue
				}
				refs[i] = a.ID
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	return refs
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// auditor returns an auditor of the fixture's gateway, as name, with
// gateways instead when given.
func (f *fixture) auditor(t testing.TB, gws map[string]order.Gateway) *audit.Auditor {
	t.Helper()
	if gws == nil {
		gws = map[string]order.Gateway{"sim": f.gw}
	}
	a, err := audit.New(f.store, gws, audit.Config{Margin: margin, PageSize: 100}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// window is the fixture's window up to now, once closed.
func (f *fixture) window() audit.Window {
	to := time.Now()
	time.Sleep(2 * margin)
	return audit.Window{From: f.from, To: to}
}

// classes returns how many findings of each class run saw.
func classes(t testing.TB, s *postgres.Store, r audit.Run) map[audit.Class]int {
	t.Helper()
	fs, err := s.Findings(context.Background(), r.MerchantID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[audit.Class]int{}
	for _, f := range fs {
		out[f.Class]++
	}
	return out
}

// nonzero is counts without its zeros.
func nonzero(counts map[audit.Class]int64) map[audit.Class]int {
	out := map[audit.Class]int{}
	for k, v := range counts {
		if v != 0 {
			out[k] = int(v)
		}
	}
	return out
}

// TestEachDiscrepancyYieldsItsFinding: each discrepancy the simulator can
// be told to make yields exactly its finding, and nothing else.
func TestEachDiscrepancyYieldsItsFinding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		inject func(t *testing.T, f *fixture, refs []string)
		want   audit.Class
	}{
		{"a charge made elsewhere", func(t *testing.T, f *fixture, refs []string) {
			f.sim.Foreign(990, "GBP")
		}, audit.Foreign},
		{"a second charge with a used reference", func(t *testing.T, f *fixture, refs []string) {
			must(t)(f.sim.Duplicate(refs[1]))
		}, audit.Duplicate},
		{"an altered amount", func(t *testing.T, f *fixture, refs []string) {
			must(t)(f.sim.AlterAmount(refs[2], 1300))
		}, audit.AmountMismatch},
		{"a hidden charge", func(t *testing.T, f *fixture, refs []string) {
			if err := f.sim.Hide(refs[3]); err != nil {
				t.Fatal(err)
			}
		}, audit.MissingOnGateway},
		{"a refund beyond Settle's", func(t *testing.T, f *fixture, refs []string) {
			must(t)(f.sim.ExtraRefund(refs[4], 250))
		}, audit.RefundMismatch},
		{"a charge of an attempt Settle never made", func(t *testing.T, f *fixture, refs []string) {
			res, err := f.gw.Charge(context.Background(), order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(),
				MerchantReference: "never", Amount: order.Money{Currency: "GBP", AmountMinor: 700}, PaymentMethod: "tok_ok"})
			if err != nil || res.Outcome != order.OutcomeSucceeded {
				t.Fatalf("charge: %v %+v", err, res)
			}
		}, audit.MissingInSettle},
		{"a second charge of an attempt whose charge Settle did not record", func(t *testing.T, f *fixture, refs []string) {
			f.exec(t, `UPDATE charge_attempts SET gateway_charge_id = '' WHERE id = $1`, refs[1])
			must(t)(f.sim.Duplicate(refs[1]))
		}, audit.Duplicate},
		{"an attempt in another currency in Settle", func(t *testing.T, f *fixture, refs []string) {
			f.exec(t, `UPDATE charge_attempts SET currency = 'EUR' WHERE id = $1`, refs[5])
		}, audit.CurrencyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			refs := f.pay(t, 6)
			tt.inject(t, f, refs)
			r, err := f.auditor(t, nil).Audit(context.Background(), order.DefaultMerchant, "sim", f.window(), "test")
			if err != nil {
				t.Fatal(err)
			}
			want := map[audit.Class]int{tt.want: 1}
			if got := nonzero(r.Counts); !maps.Equal(got, want) || r.Phase != audit.PhaseDone || !r.Covered {
				t.Fatalf("run %+v: counts %v, want %v", r, got, want)
			}
			if got := classes(t, f.store, r); !maps.Equal(got, want) {
				t.Fatalf("findings %v, want %v", got, want)
			}
		})
	}
}

// must fails t on the error of a call whose result is not needed.
func must(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusMismatch: an attempt the gateway declined that Settle holds
// as paying its order is a STATUS_MISMATCH, and the order, paid in Settle
// with no succeeded charge, is MISSING_ON_GATEWAY too.
func TestStatusMismatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.pay(t, 2)
	o, a, err := f.svc.CreateAndCharge(context.Background(), order.DefaultMerchant, order.NewOrder{MerchantReference: "declined",
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_decline", Gateway: "sim"},
		order.ChargeInput{RequestID: "request-declined"})
	if err != nil || a == nil || o.State != order.StatePending {
		t.Fatalf("declined charge: %v %+v", err, o)
	}
	f.exec(t, `UPDATE charge_attempts SET outcome = 'succeeded' WHERE id = $1`, a.ID)
	f.exec(t, `UPDATE orders SET state = 'PAID', current_attempt = $2 WHERE id = $1`, o.ID, a.ID)
	r, err := f.auditor(t, nil).Audit(context.Background(), order.DefaultMerchant, "sim", f.window(), "test")
	if err != nil {
		t.Fatal(err)
	}
	want := map[audit.Class]int{audit.StatusMismatch: 1, audit.MissingOnGateway: 1}
	if got := nonzero(r.Counts); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// exec runs a statement on the fixture's database: Settle's side made to
// disagree with the gateway's.
func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// TestCleanRun: a window of paid orders that the gateway holds as Settle
// does yields no finding (20,000 orders; 2,000 with -short).
func TestCleanRun(t *testing.T) {
	t.Parallel()
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	f := newFixture(t)
	f.pay(t, n)
	r, err := f.auditor(t, nil).Audit(context.Background(), order.DefaultMerchant, "sim", f.window(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Clean() || r.Seen != int64(n) {
		t.Fatalf("run %+v: want clean, %d charges seen", r, n)
	}
}

// crashing is the refpsp adapter whose charge listing fails after a
// number of charges, as a process killed mid-run stops reading.
type crashing struct {
	*refpsp.Client
	after int
	read  int
}

var errCrash = errors.New("crash")

func (c *crashing) ListCharges(ctx context.Context, from, to time.Time, fn func(order.GatewayCharge) error) error {
	return c.Client.ListCharges(ctx, from, to, func(gc order.GatewayCharge) error {
		if c.read == c.after {
			return errCrash
		}
		c.read++
		return fn(gc)
	})
}

// TestCrashResumesFromCheckpoint: a run that stops mid-listing resumes
// from its checkpoint: every charge is matched once (none skipped, none
// counted twice), and the discrepancies on both sides of the stop are
// found.
func TestCrashResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.sim.Foreign(990, "GBP") // listed first
	refs := f.pay(t, 450)
	must(t)(f.sim.Duplicate(refs[10])) // listed last
	w := f.window()
	ctx := context.Background()

	crash := &crashing{Client: f.gw, after: 250}
	r, err := f.auditor(t, map[string]order.Gateway{"sim": crash}).Audit(ctx, order.DefaultMerchant, "sim", w, "test")
	if !errors.Is(err, errCrash) {
		t.Fatalf("crashing run: %v", err)
	}
	if r.Phase != audit.PhaseCharges || r.Seen != 200 || r.Cursor.ID == "" {
		t.Fatalf("checkpoint after the crash: %+v, want 200 charges seen (two pages of 100)", r)
	}

	resumed := &crashing{Client: f.gw, after: -1}
	r2, err := f.auditor(t, map[string]order.Gateway{"sim": resumed}).Audit(ctx, order.DefaultMerchant, "sim", w, "test")
	if err != nil {
		t.Fatal(err)
	}
	if r2.ID != r.ID {
		t.Fatalf("a new run %s, want run %s resumed", r2.ID, r.ID)
	}
	want := map[audit.Class]int{audit.Foreign: 1, audit.Duplicate: 1}
	if r2.Seen != 452 || !maps.Equal(nonzero(r2.Counts), want) {
		t.Fatalf("resumed run %+v: want 452 charges seen, counts %v", r2, want)
	}
	if resumed.read >= 452 {
		t.Fatalf("the resumed run read %d charges: it started over", resumed.read)
	}
}

// TestOverlappingWindowsDeduplicate: a discrepancy seen by two overlapping
// windows is one finding, which the second run counts as seen again.
func TestOverlappingWindowsDeduplicate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	refs := f.pay(t, 3)
	must(t)(f.sim.AlterAmount(refs[0], 1))
	w := f.window()
	a := f.auditor(t, nil)
	ctx := context.Background()
	first, err := a.Audit(ctx, order.DefaultMerchant, "sim", w, "test")
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.Audit(ctx, order.DefaultMerchant, "sim", audit.Window{From: w.From.Add(-time.Hour), To: w.To}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if first.Counts[audit.AmountMismatch] != 1 || second.Counts[audit.AmountMismatch] != 1 {
		t.Fatalf("counts %v and %v, want one mismatch each", first.Counts, second.Counts)
	}
	fs, err := f.store.Findings(ctx, order.DefaultMerchant, second.ID)
	if err != nil || len(fs) != 1 || fs[0].RunID != first.ID {
		t.Fatalf("findings %+v (%v), want the first run's one", fs, err)
	}
}

// TestNotCovered: a gateway that offers no listing makes a run that is
// not covered, never a clean one.
func TestNotCovered(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gws := map[string]order.Gateway{"sim": struct{ order.Gateway }{f.gw}}
	r, err := f.auditor(t, gws).Audit(context.Background(), order.DefaultMerchant, "sim", f.window(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if r.Covered || r.Clean() || r.NotCovered == "" || r.Phase != audit.PhaseDone {
		t.Fatalf("run %+v, want not covered, with the reason", r)
	}
}

// TestOpenWindowRefused: a window that ends within the no-show horizon
// and the margin is not audited.
func TestOpenWindowRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, err := audit.New(f.store, map[string]order.Gateway{"sim": f.gw}, audit.Config{NoShowHorizon: time.Hour}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Audit(context.Background(), order.DefaultMerchant, "sim", audit.Window{From: time.Now().Add(-2 * time.Hour), To: time.Now().Add(-time.Minute)}, "test")
	if !errors.Is(err, audit.ErrWindowOpen) {
		t.Fatalf("got %v, want ErrWindowOpen", err)
	}
}

// TestSchedule: the scheduler audits each gateway account over the latest
// closed window first, then over each window closed since, following the
// last with no gap; an account with no listing is recorded not covered.
func TestSchedule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.pay(t, 3)
	now := time.Now()
	clock := func() time.Time { return now }
	a, err := audit.New(f.store, map[string]order.Gateway{"sim": f.gw, "nolist": struct{ order.Gateway }{f.gw}},
		audit.Config{Margin: margin, Now: clock}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s, err := audit.NewScheduler(a, audit.Schedule{Merchants: []string{order.DefaultMerchant}, Window: time.Hour, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs, err := s.RunOnce(ctx)
	if err != nil || len(runs) != 2 || runs[0].Gateway != "nolist" || runs[0].Covered || !runs[1].Clean() {
		t.Fatalf("first round: %v %+v", err, runs)
	}
	first := runs[1].Window
	if again, err := s.RunOnce(ctx); err != nil || len(again) != 0 {
		t.Fatalf("a round with no window closed since: %v %+v", err, again)
	}
	now = now.Add(time.Hour)
	runs, err = s.RunOnce(ctx)
	if err != nil || len(runs) != 2 || !runs[1].Window.From.Equal(first.To) || !runs[1].Window.To.Equal(first.To.Add(time.Hour)) {
		t.Fatalf("next round: %v %+v, want the hour after %v", err, runs, first)
	}
}

// reported is the refpsp adapter as a gateway whose reports hold what
// happened until until.
type reported struct {
	*refpsp.Client
	until time.Time
}

func (r reported) ListedUntil(time.Time) time.Time { return r.until }

// TestScheduleWaitsForReports: the scheduler audits a ReportLister's
// windows only once its reports reach their listing's end; a window it
// has reported since is audited at the next round.
func TestScheduleWaitsForReports(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now()
	gw := &reported{Client: f.gw, until: now.Add(-5 * time.Hour)}
	a, err := audit.New(f.store, map[string]order.Gateway{"sim": gw}, audit.Config{Margin: margin, Now: func() time.Time { return now }}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s, err := audit.NewScheduler(a, audit.Schedule{Merchants: []string{order.DefaultMerchant}, Window: time.Hour, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.RunOnce(context.Background())
	if err != nil || len(runs) != 1 || runs[0].Listed().To.After(gw.until) {
		t.Fatalf("first round: %v %+v, want one window whose listing ends by %s", err, runs, gw.until)
	}
	first := runs[0].Window
	gw.until = gw.until.Add(2 * time.Hour)
	runs, err = s.RunOnce(context.Background())
	if err != nil || len(runs) != 2 || !runs[0].Window.From.Equal(first.To) || runs[1].Listed().To.After(gw.until) {
		t.Fatalf("round after two more hours reported: %v %+v, want the two hours after %v", err, runs, first)
	}
}

// TestFindingsInTheReviewQueue: a finding waits in the review queue with
// both sides until an operator resolves it with a note, which is kept with
// the operator's name; a finding with no order is resolved by its
// merchant.
func TestFindingsInTheReviewQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	refs := f.pay(t, 2)
	must(t)(f.sim.Duplicate(refs[0]))
	f.sim.Foreign(990, "GBP")
	ctx := context.Background()
	if _, err := f.auditor(t, nil).Audit(ctx, order.DefaultMerchant, "sim", f.window(), "test"); err != nil {
		t.Fatal(err)
	}
	queue := func() []order.ReviewItem {
		t.Helper()
		items, err := f.store.ReviewItems(ctx, order.ReviewFilter{Scope: order.AnyMerchant, Kind: order.ReviewAuditFinding, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	items := queue()
	if len(items) != 2 {
		t.Fatalf("queue %+v, want the two findings", items)
	}
	for _, it := range items {
		if it.GatewayRecordID == "" || it.GatewaySide == "null" || (it.AuditClass == string(audit.Duplicate)) != (it.OrderID != "") ||
			(it.OrderID != "") != (it.SettleSide != "null") {
			t.Errorf("item %+v: want the gateway's record, and Settle's side where Settle has the order", it)
		}
		orderID, merchant := it.OrderID, ""
		if orderID == "" {
			merchant = order.DefaultMerchant
		}
		got, err := f.svc.ResolveAuditFinding(ctx, order.AnyMerchant, merchant, orderID, it.ID, "refunded at the gateway", "ops:alice")
		if err != nil || got.ResolvedAt.IsZero() || got.Actor != "ops:alice" || got.Note != "refunded at the gateway" {
			t.Errorf("resolve %s: %+v, %v", it.AuditClass, got, err)
		}
	}
	if left := queue(); len(left) != 0 {
		t.Fatalf("resolved findings still queued: %+v", left)
	}
}
