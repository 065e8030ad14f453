package adyenfake

import (
	"encoding/csv"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReports: the daily Payment accounting report lists the day's status
// changes of the fake's payments with Adyen's columns, to a report user
// (basic auth, or the API key) of the merchant account only; a day to
// come, or a day withheld, is 404.
func TestReports(t *testing.T) {
	t.Parallel()
	e := start(t, Config{ReportUser: "report@Company.Test", ReportPassword: "report-secret"})
	paid := e.pay("ref-paid", "tok_ok", 1250)
	psp := paid["pspReference"].(string)
	if r := e.post("/payments/"+psp+"/captures", "cap-1", `{"merchantAccount":"`+testMerchant+`","amount":{"currency":"EUR","value":1250},"reference":"cap-1"}`); r.code != http.StatusCreated {
		t.Fatalf("capture: %d %s", r.code, r.body)
	}
	if r := e.post("/payments/"+psp+"/refunds", "ref-1", `{"merchantAccount":"`+testMerchant+`","amount":{"currency":"EUR","value":300},"reference":"refund-1"}`); r.code != http.StatusCreated {
		t.Fatalf("refund: %d %s", r.code, r.body)
	}
	e.pay("ref-declined", "tok_decline", 500)
	foreign := e.fake.Foreign(990, "EUR")

	today := time.Now().UTC()
	get := func(account string, day time.Time, auth func(*http.Request)) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.url+"/reports/download/MerchantAccount/"+account+"/"+ReportName(day), nil)
		if err != nil {
			t.Fatal(err)
		}
		auth(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	basic := func(r *http.Request) { r.SetBasicAuth("report@Company.Test", "report-secret") }
	code, body := get(testMerchant, today, basic)
	if code != http.StatusOK {
		t.Fatalf("today's report: %d %s", code, body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(reportColumns, ",") {
		t.Fatalf("header %v, want %v", rows[0], reportColumns)
	}
	var got []string
	for _, r := range rows[1:] {
		if r[1] != testMerchant || r[6] != "UTC" {
			t.Errorf("row %v: want the merchant account, booked in UTC", r)
		}
		got = append(got, r[3]+" "+r[9]+" "+r[8]+" "+r[25])
	}
	want := []string{
		"ref-paid Received 12.50 ", "ref-paid Authorised 12.50 ", "ref-paid SentForSettle 12.50 cap-1",
		"ref-paid SentForRefund 3.00 refund-1", "ref-paid Refunded 3.00 refund-1",
		"ref-declined Received 5.00 ", "ref-declined Refused 5.00 ",
		foreign.Reference + " Received 9.90 ", foreign.Reference + " Authorised 9.90 ", foreign.Reference + " SentForSettle 9.90 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if code, _ := get(testMerchant, today, func(r *http.Request) { r.Header.Set("X-API-Key", testKey) }); code != http.StatusOK {
		t.Errorf("with the API key: %d, want 200", code)
	}
	for name, auth := range map[string]func(*http.Request){
		"no credentials":   func(*http.Request) {},
		"a wrong password": func(r *http.Request) { r.SetBasicAuth("report@Company.Test", "guess") },
		"a wrong key":      func(r *http.Request) { r.Header.Set("X-API-Key", "AQE-guess") },
	} {
		if code, _ := get(testMerchant, today, auth); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	if code, _ := get("SomeoneElse", today, basic); code != http.StatusForbidden {
		t.Errorf("another merchant account: %d, want 403", code)
	}
	if code, _ := get(testMerchant, today.AddDate(0, 0, 1), basic); code != http.StatusNotFound {
		t.Errorf("tomorrow's report: %d, want 404", code)
	}
	e.fake.WithholdReport(today)
	if code, _ := get(testMerchant, today, basic); code != http.StatusNotFound {
		t.Errorf("a withheld report: %d, want 404", code)
	}
}
