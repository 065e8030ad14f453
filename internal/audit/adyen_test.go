package audit_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/audit"
	"github.com/settlepay/settle/internal/gateway/adyen"
	"github.com/settlepay/settle/internal/gateway/adyen/adyenfake"
	"github.com/settlepay/settle/internal/order"
)

// The Adyen adapter's listing trails the present by a day's report: the
// scheduler waits for it.
var _ audit.ReportLister = (*adyen.Gateway)(nil)

// adyenAccount is a Settle charging the fake Adyen through the Adyen
// adapter, on the fixture's database, whose audit reads the fake's daily
// Payment accounting reports as its report user.
type adyenAccount struct {
	*fixture
	fake *adyenfake.Server
	gw   *adyen.Gateway
	svc  *order.Service
}

func newAdyenAccount(t *testing.T) *adyenAccount {
	t.Helper()
	f := newFixture(t)
	fake, err := adyenfake.New(adyenfake.Config{APIKey: "AQE-audit", MerchantAccount: "SettleAuditECOM",
		ReportUser: "report@Company.SettleAudit", ReportPassword: "report-secret"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake)
	t.Cleanup(func() {
		hs.Close()
		fake.Close()
		if errs := fake.ContractErrors(); len(errs) > 0 {
			t.Errorf("the fake broke Adyen's definitions: %v", errs)
		}
	})
	gw, err := adyen.New(adyen.Config{BaseURL: hs.URL + "/v71", APIKey: "AQE-audit", MerchantAccount: "SettleAuditECOM",
		Timeout: 5 * time.Second, NoShowHorizon: 10 * time.Second, Events: f.store,
		ReportUser: "report@Company.SettleAudit", ReportPassword: "report-secret"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := order.NewService(f.store, map[string]order.Gateway{"adyen": gw}, order.Config{DefaultGateway: "adyen",
		GatewayTimeout: 5 * time.Second, FirstRecheck: time.Second}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return &adyenAccount{fixture: f, fake: fake, gw: gw, svc: svc}
}

// pay charges n orders of 12.50 GBP at the fake Adyen, one after another,
// and returns their attempts.
func (a *adyenAccount) pay(t *testing.T, n int) []*order.Attempt {
	t.Helper()
	var out []*order.Attempt
	for i := range n {
		o, at, err := a.svc.CreateAndCharge(context.Background(), order.DefaultMerchant, order.NewOrder{
			MerchantReference: fmt.Sprintf("adyen-audit-%d", i), Amount: order.Money{Currency: "GBP", AmountMinor: 1250},
			PaymentMethod: "tok_ok", Gateway: "adyen"}, order.ChargeInput{RequestID: fmt.Sprintf("adyen-%03d", i)})
		if err != nil || o.State != order.StatePaid || at == nil {
			t.Fatalf("order %d: %+v, %v", i, o, err)
		}
		out = append(out, at)
	}
	return out
}

// audit audits the account over the fixture's window.
func (a *adyenAccount) audit(t *testing.T) audit.Run {
	t.Helper()
	r, err := a.auditor(t, map[string]order.Gateway{"adyen": a.gw}).Audit(context.Background(), order.DefaultMerchant,
		"adyen", a.window(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAdyenAccount: orders Settle charged (or authorized) at the fake
// Adyen, audited from its reports, yield no finding; and each discrepancy the fake can be
// told to make yields exactly its finding.
func TestAdyenAccount(t *testing.T) {
	t.Parallel()
	t.Run("clean", func(t *testing.T) {
		t.Parallel()
		a := newAdyenAccount(t)
		const n = 12
		a.pay(t, n)
		// And an order with manual capture: authorized, its hold open.
		o, _, err := a.svc.CreateAndCharge(context.Background(), order.DefaultMerchant, order.NewOrder{
			MerchantReference: "adyen-audit-held", Amount: order.Money{Currency: "EUR", AmountMinor: 4000},
			PaymentMethod: "tok_ok", Gateway: "adyen", Capture: order.CaptureManual}, order.ChargeInput{RequestID: "adyen-held"})
		if err != nil || o.State != order.StateAuthorized {
			t.Fatalf("order with manual capture: %+v, %v", o, err)
		}
		if r := a.audit(t); !r.Covered || !r.Clean() || r.Seen != n+1 {
			t.Fatalf("run %+v: want covered, clean, %d charges seen", r, n+1)
		}
	})
	t.Run("a report not generated yet", func(t *testing.T) {
		t.Parallel()
		a := newAdyenAccount(t)
		a.pay(t, 2)
		w := a.window()
		a.fake.WithholdReport(w.To.UTC())
		au := a.auditor(t, map[string]order.Gateway{"adyen": a.gw})
		r, err := au.Audit(context.Background(), order.DefaultMerchant, "adyen", w, "test")
		if !errors.Is(err, adyen.ErrReportNotAvailable) || r.Phase == audit.PhaseDone || r.Clean() {
			t.Fatalf("run %+v, %v: want it stopped, not clean, for the report not available", r, err)
		}
		// Once Adyen has made it, the run resumes and finishes clean.
		a.fake.PublishReport(w.To.UTC())
		r2, err := au.Audit(context.Background(), order.DefaultMerchant, "adyen", w, "test")
		if err != nil || r2.ID != r.ID || !r2.Clean() || r2.Seen != 2 {
			t.Fatalf("resumed run %+v, %v: want run %s clean, 2 charges seen", r2, err, r.ID)
		}
	})
	tests := []struct {
		name   string
		inject func(t *testing.T, a *adyenAccount, paid []*order.Attempt)
		want   audit.Class
	}{
		{"a payment made elsewhere", func(t *testing.T, a *adyenAccount, _ []*order.Attempt) {
			a.fake.Foreign(990, "GBP")
		}, audit.Foreign},
		{"a payment of an attempt Settle never made", func(t *testing.T, a *adyenAccount, _ []*order.Attempt) {
			res, err := a.gw.Charge(context.Background(), order.ChargeRequest{AttemptID: order.NewID(), OrderID: order.NewID(),
				MerchantReference: "never", Amount: order.Money{Currency: "GBP", AmountMinor: 700}, PaymentMethod: "tok_ok"})
			if err != nil || res.Outcome != order.OutcomeSucceeded {
				t.Fatalf("charge: %v %+v", err, res)
			}
		}, audit.MissingInSettle},
		{"an altered amount", func(t *testing.T, a *adyenAccount, paid []*order.Attempt) {
			if _, err := a.fake.AlterAmount(paid[1].ID, 1300); err != nil {
				t.Fatal(err)
			}
		}, audit.AmountMismatch},
		{"a refund made outside Settle", func(t *testing.T, a *adyenAccount, paid []*order.Attempt) {
			if _, err := a.fake.ExtraRefund(paid[2].ID, 250); err != nil {
				t.Fatal(err)
			}
		}, audit.RefundMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := newAdyenAccount(t)
			paid := a.pay(t, 3)
			tt.inject(t, a, paid)
			r := a.audit(t)
			want := map[audit.Class]int{tt.want: 1}
			if got := nonzero(r.Counts); !maps.Equal(got, want) || r.Phase != audit.PhaseDone || !r.Covered {
				t.Fatalf("run %+v: counts %v, want %v", r, got, want)
			}
			if got := classes(t, a.store, r); !maps.Equal(got, want) {
				t.Fatalf("findings %v, want %v", got, want)
			}
		})
	}
}
