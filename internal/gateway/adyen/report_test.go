package adyen

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
)

// reportHeader is a Payment accounting report's header line as Adyen
// documents its standard columns, in their order, with the two
// modification columns an account adds, and one more column Settle does
// not read.
const reportHeader = "\ufeffCompany Account,Merchant Account,Psp Reference,Merchant Reference,Payment Method,Booking Date," +
	"TimeZone,Main Currency,Main Amount,Record Type,Payment Currency,Received (PC),Authorised (PC),Captured (PC)," +
	"Settlement Currency,Payable (SC),Commission (SC),Markup (SC),Scheme Fees (SC),Interchange (SC)," +
	"Processing Fee Currency,Processing Fee (FC),User Name,Payment Method Variant,Modification Reference," +
	"Modification Merchant Reference,Reserved1\n"

// row is one report line of the merchant account SettleGB, in UTC.
func row(psp, ref, booked, cur, amount, typ, modPSP, modRef string) string {
	return strings.Join([]string{"SettleCo", testMerchant, psp, ref, "visa", booked, "UTC", cur, amount, typ, cur,
		"", "", "", "", "", "", "", "", "", "", "", "ws@Company.SettleCo", "visa", modPSP, modRef, ""}, ",") + "\n"
}

// TestParseReport reads a report with Adyen's documented columns: the
// merchant account's rows, each with its references, booking time (in
// the account's time zone) and amount in ISO minor units, skipping other
// accounts' rows; and refuses a report that lacks a column it needs or
// books in another time zone.
func TestParseReport(t *testing.T) {
	t.Parallel()
	body := reportHeader +
		row("8815000000000001", "attempt-1", "2026-03-04 10:00:01", "GBP", "12.50", "Received", "", "") +
		row("8815000000000001", "attempt-1", "2026-03-04 10:00:01", "GBP", "12.50", "Authorised", "", "") +
		strings.Replace(row("8815000000000002", "other", "2026-03-04 10:00:02", "GBP", "1.00", "Received", "", ""), testMerchant, "OtherECOM", 1) +
		row("8815000000000001", "attempt-1", "2026-03-04 10:00:02", "GBP", "12.50", "SentForSettle", "8815000000000003", "attempt-1:capture") +
		row("8815000000000001", "attempt-1", "2026-03-04 11:30:00", "GBP", "-2.00", "Refunded", "8815000000000004", "refund-1") +
		row("8815000000000005", "attempt-2", "2026-03-04 12:00:00", "JPY", "1500", "Received", "", "") +
		row("8815000000000006", "attempt-3", "2026-03-04 12:00:00", "CLP", "900.00", "Received", "", "")
	var got []reportRow
	err := parseReport(strings.NewReader(body), testMerchant, time.UTC, func(r reportRow) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.DateTime, s); return t }
	gbp := order.Money{Currency: "GBP", AmountMinor: 1250}
	want := []reportRow{
		{psp: "8815000000000001", ref: "attempt-1", recordType: "Received", booked: at("2026-03-04 10:00:01"), amount: gbp},
		{psp: "8815000000000001", ref: "attempt-1", recordType: "Authorised", booked: at("2026-03-04 10:00:01"), amount: gbp},
		{psp: "8815000000000001", ref: "attempt-1", recordType: "SentForSettle", booked: at("2026-03-04 10:00:02"), amount: gbp,
			modPSP: "8815000000000003", modRef: "attempt-1:capture"},
		{psp: "8815000000000001", ref: "attempt-1", recordType: "Refunded", booked: at("2026-03-04 11:30:00"),
			amount: order.Money{Currency: "GBP", AmountMinor: 200}, modPSP: "8815000000000004", modRef: "refund-1"},
		{psp: "8815000000000005", ref: "attempt-2", recordType: "Received", booked: at("2026-03-04 12:00:00"),
			amount: order.Money{Currency: "JPY", AmountMinor: 1500}},
		// Adyen counts CLP in hundredths; ISO 4217 has no decimals.
		{psp: "8815000000000006", ref: "attempt-3", recordType: "Received", booked: at("2026-03-04 12:00:00"),
			amount: order.Money{Currency: "CLP", AmountMinor: 900}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", got, want)
	}

	// In Amsterdam's time zone, as the account's setting may be.
	ams, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cet := strings.Replace(row("8815000000000001", "a", "2026-03-04 10:00:01", "EUR", "1.00", "Received", "", ""), ",UTC,", ",CET,", 1)
	got = nil
	if err := parseReport(strings.NewReader(reportHeader+cet), testMerchant, ams, func(r reportRow) error {
		got = append(got, r)
		return nil
	}); err != nil || len(got) != 1 || !got[0].booked.Equal(at("2026-03-04 09:00:01")) {
		t.Fatalf("a CET row read as %+v, %v; want booked at 09:00:01 UTC", got, err)
	}
	if err := parseReport(strings.NewReader(reportHeader+cet), testMerchant, time.UTC, func(reportRow) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "TimeZone") {
		t.Errorf("a CET row read in UTC: %v, want the time zone refused", err)
	}

	noMods := strings.Replace(reportHeader, ",Modification Reference,Modification Merchant Reference", "", 1)
	if err := parseReport(strings.NewReader(noMods), testMerchant, time.UTC, func(reportRow) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "Modification Merchant Reference") {
		t.Errorf("a report without the modification columns: %v, want them named", err)
	}
	for _, bad := range []string{"12.505", "12,50", "", "abc"} {
		r := reportHeader + row("8815000000000001", "a", "2026-03-04 10:00:01", "GBP", bad, "Received", "", "")
		if err := parseReport(strings.NewReader(r), testMerchant, time.UTC, func(reportRow) error { return nil }); err == nil {
			t.Errorf("amount %q accepted", bad)
		}
	}
}

// reports is a Customer Area's report folder: a real HTTP server that
// serves the files it holds to the report user, and 404 for others.
type reports struct {
	mu    sync.Mutex
	files map[string]string
	asked []string
	srv   *httptest.Server
}

func newReports(t *testing.T, files map[string]string) *reports {
	r := &reports{files: files}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != "report@Company.SettleCo" || pass != "report-secret" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		name, ok := strings.CutPrefix(req.URL.Path, reportPath+testMerchant+"/")
		r.mu.Lock()
		body, found := r.files[name]
		r.asked = append(r.asked, name)
		r.mu.Unlock()
		if !ok || !found {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// lister is a Gateway that reads r's reports as the report user, on the
// clock now.
func (r *reports) lister(t *testing.T, now time.Time) *Gateway {
	return newGateway(t, r.srv.URL, &MemoryLog{}, func() time.Time { return now }, func(c *Config) {
		c.ReportURL = r.srv.URL + reportPath + testMerchant
		c.ReportUser, c.ReportPassword = "report@Company.SettleCo", "report-secret"
	})
}

// TestListFromReports: a window's payments and refunds are folded from
// the rows of the reports of its days and the days after, and called by
// creation time, then pspReference; a report missing for a day of the
// window is an error, and one missing after it ends the listing.
func TestListFromReports(t *testing.T) {
	t.Parallel()
	r := newReports(t, map[string]string{
		"payments_accounting_report_2026_03_04.csv": reportHeader +
			// Created the day before the window, captured in it: not the
			// window's.
			row("8815000000000009", "old", "2026-03-04 23:59:59", "GBP", "5.00", "Received", "", "") +
			row("8815000000000009", "old", "2026-03-04 23:59:59", "GBP", "5.00", "Authorised", "", ""),
		"payments_accounting_report_2026_03_05.csv": reportHeader +
			row("8815000000000009", "old", "2026-03-05 00:00:10", "GBP", "5.00", "SentForSettle", "8815000000000010", "old:capture") +
			// Two created in the same second, listed by pspReference.
			row("8815000000000002", "declined", "2026-03-05 09:00:00", "GBP", "3.00", "Received", "", "") +
			row("8815000000000001", "auto", "2026-03-05 09:00:00", "GBP", "12.50", "Received", "", "") +
			row("8815000000000002", "declined", "2026-03-05 09:00:00", "GBP", "3.00", "Refused", "", "") +
			row("8815000000000001", "auto", "2026-03-05 09:00:01", "GBP", "12.50", "Authorised", "", "") +
			row("8815000000000001", "auto", "2026-03-05 09:00:01", "GBP", "12.50", "SentForSettle", "8815000000000011", "auto:capture") +
			row("8815000000000003", "held", "2026-03-05 10:00:00", "EUR", "40.00", "Received", "", "") +
			row("8815000000000003", "held", "2026-03-05 10:00:00", "EUR", "40.00", "Authorised", "", "") +
			row("8815000000000004", "unknown", "2026-03-05 11:00:00", "EUR", "7.00", "Received", "", "") +
			row("8815000000000004", "unknown", "2026-03-05 11:00:00", "EUR", "7.00", "Authorised", "", "") +
			row("8815000000000004", "unknown", "2026-03-05 11:30:00", "EUR", "7.00", "Cancelled", "8815000000000012", "unknown:cancel") +
			row("8815000000000001", "auto", "2026-03-05 12:00:00", "GBP", "5.00", "SentForRefund", "8815000000000013", "refund-1") +
			row("8815000000000001", "auto", "2026-03-05 12:00:00", "GBP", "5.00", "Refunded", "8815000000000013", "refund-1") +
			// After the window.
			row("8815000000000005", "later", "2026-03-05 23:00:00", "GBP", "1.00", "Received", "", ""),
		"payments_accounting_report_2026_03_06.csv": reportHeader +
			row("8815000000000003", "held", "2026-03-06 08:00:00", "EUR", "40.00", "SentForSettle", "8815000000000014", "capture-1") +
			row("8815000000000001", "auto", "2026-03-06 09:00:00", "GBP", "2.00", "SentForRefund", "8815000000000015", "refund-2") +
			row("8815000000000001", "auto", "2026-03-06 09:00:00", "GBP", "2.00", "RefundFailed", "8815000000000015", "refund-2"),
		// 2026-03-07 is not generated yet.
	})
	from, to := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 5, 22, 0, 0, 0, time.UTC)
	gw := r.lister(t, time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC))
	var charges []order.GatewayCharge
	if err := gw.ListCharges(t.Context(), from, to, func(c order.GatewayCharge) error {
		charges = append(charges, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.DateTime, s); return t }
	gbp := func(v int64) order.Money { return order.Money{Currency: "GBP", AmountMinor: v} }
	eur := func(v int64) order.Money { return order.Money{Currency: "EUR", AmountMinor: v} }
	want := []order.GatewayCharge{
		{ID: "8815000000000001", Reference: "auto", Amount: gbp(1250), Outcome: order.OutcomeSucceeded, Captured: 1250,
			Refunded: 500, Created: at("2026-03-05 09:00:00")},
		{ID: "8815000000000002", Reference: "declined", Amount: gbp(300), Outcome: order.OutcomeDeclined, DeclineCode: "refused",
			Created: at("2026-03-05 09:00:00")},
		{ID: "8815000000000003", Reference: "held", Amount: eur(4000), Outcome: order.OutcomeSucceeded, Hold: order.HoldCaptured,
			Captured: 4000, Created: at("2026-03-05 10:00:00")},
		{ID: "8815000000000004", Reference: "unknown", Amount: eur(700), Outcome: order.OutcomeDeclined, DeclineCode: "cancelled",
			Created: at("2026-03-05 11:00:00")},
	}
	if !slices.Equal(charges, want) {
		t.Fatalf("charges\n%+v\nwant\n%+v", charges, want)
	}
	var refunds []order.GatewayRefund
	if err := gw.ListRefunds(t.Context(), from, at("2026-03-07 01:00:00"), func(rf order.GatewayRefund) error {
		refunds = append(refunds, rf)
		return nil
	}); err == nil {
		t.Fatalf("a window over a day with no report listed %+v, want an error", refunds)
	} else if !errors.Is(err, ErrReportNotAvailable) {
		t.Fatalf("a window over a day with no report: %v, want ErrReportNotAvailable", err)
	}
	refunds = nil
	if err := gw.ListRefunds(t.Context(), from, at("2026-03-06 10:00:00"), func(rf order.GatewayRefund) error {
		refunds = append(refunds, rf)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantRefunds := []order.GatewayRefund{
		{ID: "8815000000000013", Reference: "refund-1", ChargeID: "8815000000000001", ChargeReference: "auto", Amount: gbp(500),
			Outcome: order.OutcomeSucceeded, Created: at("2026-03-05 12:00:00")},
		{ID: "8815000000000015", Reference: "refund-2", ChargeID: "8815000000000001", ChargeReference: "auto", Amount: gbp(200),
			Outcome: order.OutcomeDeclined, FailureCode: "refund_failed", Created: at("2026-03-06 09:00:00")},
	}
	if !slices.Equal(refunds, wantRefunds) {
		t.Fatalf("refunds\n%+v\nwant\n%+v", refunds, wantRefunds)
	}

	// A window of a day to come has no report yet.
	err := gw.ListCharges(t.Context(), at("2026-03-10 00:00:00"), at("2026-03-10 01:00:00"), func(order.GatewayCharge) error { return nil })
	if !errors.Is(err, ErrReportNotAvailable) {
		t.Fatalf("a window of a day to come: %v, want ErrReportNotAvailable", err)
	}

	// [09:00:00.5, 10:00:00]: the seconds it holds start at 09:00:01.
	charges = nil
	if err := gw.ListCharges(t.Context(), at("2026-03-05 09:00:00").Add(time.Second/2), at("2026-03-05 10:00:00"),
		func(c order.GatewayCharge) error {
			charges = append(charges, c)
			return nil
		}); err != nil || len(charges) != 0 {
		t.Fatalf("a window of whole seconds with no payment listed %+v, %v", charges, err)
	}

	// Credentials that the Customer Area refuses are an error.
	bad := newGateway(t, r.srv.URL, &MemoryLog{}, nil, func(c *Config) { c.ReportURL = r.srv.URL + reportPath + testMerchant })
	err = bad.ListCharges(t.Context(), from, to, func(order.GatewayCharge) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), testAPIKey) {
		t.Fatalf("listing with a refused key: %v, want the refusal, without the key", err)
	}
}

// TestReportFolder: without Config.ReportURL, reports come from the
// Customer Area of the Checkout API's environment, or from a fake's own
// host.
func TestReportFolder(t *testing.T) {
	t.Parallel()
	for base, want := range map[string]string{
		TestBaseURL:                     "https://ca-test.adyen.com/reports/download/MerchantAccount/" + testMerchant,
		LiveBaseURL("1797a841fbb37ca7"): "https://ca-live.adyen.com/reports/download/MerchantAccount/" + testMerchant,
		"http://127.0.0.1:8080/v71":     "http://127.0.0.1:8080/reports/download/MerchantAccount/" + testMerchant,
	} {
		g := newGateway(t, strings.TrimSuffix(base, "/v71"), &MemoryLog{}, nil)
		if g.reportURL != want {
			t.Errorf("base %s: reports from %s, want %s", base, g.reportURL, want)
		}
	}
}
