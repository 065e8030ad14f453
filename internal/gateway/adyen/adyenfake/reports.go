package adyenfake

import (
	"cmp"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Reports
//
// Adyen offers no API that lists payments; what it offers for matching
// them is its reports, CSV files it generates per merchant account, says
// are ready by a REPORT_AVAILABLE notification (pspReference the file's
// name, reason its download URL), and serves from the Customer Area to a
// GET authenticated as a report user: basic authentication
// (report@Company.<company>) or the X-API-Key of an API credential with
// the report download role. The fake serves the daily Payment accounting
// report, the one that has every status change of every payment (see the
// adapter's package documentation for why this one):
//
//	GET /reports/download/MerchantAccount/{account}/payments_accounting_report_YYYY_MM_DD.csv
//	    basic auth Config.ReportUser and Config.ReportPassword (when set),
//	    or X-API-Key Config.APIKey; none or a wrong one is 401, another
//	    merchant account 403, an unknown file 404.
//
// A day's report holds, one row each, the status changes booked that day
// (in Config.ReportTimeZone, UTC by default) for the fake's merchant
// account, in booking order, under the header line of reportColumns.
// Booking Date is "YYYY-MM-DD HH:MM:SS" in that zone, TimeZone its
// abbreviation; amounts are in major units with the currency's decimals
// ("12.50"). Psp Reference and Merchant Reference are the payment's; a
// modification's row also names the modification: Modification Reference
// (its pspReference) and Modification Merchant Reference (the reference
// the merchant gave it). The record types:
//
//	Received        the payment was received (every payment; its creation)
//	Authorised      authorised (or, from 3-D Secure, once authenticated)
//	Refused, Error  refused, or ended in error
//	Cancelled       released by a cancel or a technical cancel
//	Expired         the hold lapsed
//	SentForSettle   a capture was accepted (the amount captured)
//	CaptureFailed   an accepted capture failed (tok_capture_fail)
//	SentForRefund   a refund was accepted (the amount refunded)
//	Refunded        and done
//	RefundFailed    an accepted refund failed (tok_refund_fail)
//
// A modification Adyen refused when it was received (beyond the balance,
// after a cancel) moved nothing and has no row. Adyen books a capture
// "Settled" days later, with the payout; the fake has no payouts and
// books none.
//
// One deviation: Adyen generates a day's report once the day is over; the
// fake serves a day's report from the day's start, holding what was booked
// so far, so that a test can audit what it has just done. A day yet to
// come is 404, as a report not generated yet is.

// reportColumns are the columns of the fake's Payment accounting report:
// Adyen's standard columns, in their order, and the modification's
// references, which an account adds to its report.
var reportColumns = []string{
	"Company Account", "Merchant Account", "Psp Reference", "Merchant Reference", "Payment Method",
	"Booking Date", "TimeZone", "Main Currency", "Main Amount", "Record Type", "Payment Currency",
	"Received (PC)", "Authorised (PC)", "Captured (PC)", "Settlement Currency", "Payable (SC)",
	"Commission (SC)", "Markup (SC)", "Scheme Fees (SC)", "Interchange (SC)", "Processing Fee Currency",
	"Processing Fee (FC)", "User Name", "Payment Method Variant", "Modification Reference",
	"Modification Merchant Reference",
}

// ReportName is the file name of the daily Payment accounting report of
// the day day (its date; the time is ignored).
func ReportName(day time.Time) string {
	return day.Format("payments_accounting_report_2006_01_02.csv")
}

// reportRow is one status change as a report lists it.
type reportRow struct {
	at                time.Time
	seq               int // the payment's place in the ledger, then the change's within it
	psp, ref, method  string
	recordType        string
	currency          string
	amount            int64
	modPSP, modRef    string
	companyAndAccount [2]string
}

// rowsLocked lists the status changes of p as a report has them.
func (s *Server) rowsLocked(p *payment, seq int) []reportRow {
	base := reportRow{psp: p.PSPReference, ref: p.Reference, method: "visa", currency: p.Currency,
		companyAndAccount: [2]string{s.company(), p.MerchantAccount}}
	var out []reportRow
	add := func(at time.Time, typ string, amount int64, mod *Modification) {
		r := base
		r.at, r.seq, r.recordType, r.amount = at, seq*1000+len(out), typ, amount
		if mod != nil {
			r.modPSP, r.modRef, r.currency = mod.PSPReference, mod.Reference, mod.Currency
		}
		out = append(out, r)
	}
	add(p.Created, "Received", p.Amount, nil)
	switch {
	case !p.AuthorisedAt.IsZero():
		add(p.AuthorisedAt, "Authorised", p.Amount, nil)
	case p.Status == StatusRefused:
		add(p.Created, "Refused", p.Amount, nil)
	case p.Status == StatusError:
		add(p.Created, "Error", p.Amount, nil)
	}
	for i := range p.Captures {
		m := &p.Captures[i]
		switch {
		case m.Status == ModSucceeded:
			add(m.Created, "SentForSettle", m.Amount, m)
		case m.Reason == ReasonCaptureFailed:
			add(m.Created, "SentForSettle", m.Amount, m)
			add(m.Created.Add(failedLaterDelay), "CaptureFailed", m.Amount, m)
		}
	}
	for _, mods := range [][]Modification{p.Cancels, p.TechnicalCancels} {
		for i := range mods {
			if m := &mods[i]; m.Status == ModSucceeded {
				add(m.Created, "Cancelled", p.Amount, m)
			}
		}
	}
	if p.Status == StatusExpired {
		add(p.CaptureBefore, "Expired", p.AmountAuthorised-p.AmountCaptured, nil)
	}
	for i := range p.Refunds {
		m := &p.Refunds[i]
		switch {
		case m.Status == ModSucceeded:
			add(m.Created, "SentForRefund", m.Amount, m)
			add(m.Created, "Refunded", m.Amount, m)
		case m.Reason == ReasonRefundFailed:
			add(m.Created, "SentForRefund", m.Amount, m)
			add(m.Created.Add(failedLaterDelay), "RefundFailed", m.Amount, m)
		}
	}
	return out
}

// company is the fake's company account, as its reports name it.
func (s *Server) company() string { return s.cfg.MerchantAccount + "Company" }

// handleReport serves a report file.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	if !s.reportAuth(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Adyen Customer Area"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.PathValue("account") != s.cfg.MerchantAccount {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	loc := s.reportZone()
	day, err := time.ParseInLocation("payments_accounting_report_2006_01_02.csv", r.PathValue("file"), loc)
	now := time.Now().In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	if err != nil || day.After(today) || s.withheld(day) {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	rows := s.reportRows(day, day.AddDate(0, 0, 1))
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+ReportName(day)+`"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(reportColumns)
	for _, row := range rows {
		at := row.at.In(loc)
		zone, _ := at.Zone()
		amount := formatAmount(row.currency, row.amount)
		rec := make([]string, len(reportColumns))
		rec[0], rec[1], rec[2], rec[3], rec[4] = row.companyAndAccount[0], row.companyAndAccount[1], row.psp, row.ref, row.method
		rec[5], rec[6], rec[7], rec[8], rec[9], rec[10] = at.Format(time.DateTime), zone, row.currency, amount, row.recordType, row.currency
		switch row.recordType {
		case "Received":
			rec[11] = amount
		case "Authorised":
			rec[12] = amount
		case "SentForSettle":
			rec[13] = amount
		}
		rec[23] = "visa"
		rec[24], rec[25] = row.modPSP, row.modRef
		_ = cw.Write(rec)
	}
	cw.Flush()
}

// reportRows lists the status changes booked in [from, to), in booking
// order.
func (s *Server) reportRows(from, to time.Time) []reportRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var rows []reportRow
	for i, p := range s.payments {
		s.lapseLocked(p, now)
		for _, r := range s.rowsLocked(p, i) {
			// Adyen books by the second.
			if at := r.at.Truncate(time.Second); !at.Before(from) && at.Before(to) {
				rows = append(rows, r)
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b reportRow) int {
		if c := a.at.Truncate(time.Second).Compare(b.at.Truncate(time.Second)); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return rows
}

// reportAuth reports whether r is authenticated as a report user.
func (s *Server) reportAuth(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok {
		return s.cfg.ReportUser != "" &&
			subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.ReportUser)) == 1 &&
			subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.ReportPassword)) == 1
	}
	key := r.Header.Get("X-API-Key")
	return key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// reportZone is the time zone of the reports.
func (s *Server) reportZone() *time.Location {
	if s.cfg.ReportTimeZone != nil {
		return s.cfg.ReportTimeZone
	}
	return time.UTC
}

// WithholdReport makes the report of day (its date in the reports' time
// zone) not available (404), as a report Adyen has not generated yet is,
// until PublishReport.
func (s *Server) WithholdReport(day time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.withheldDays[ReportName(day)] = true
}

// PublishReport makes the report of day available again.
func (s *Server) PublishReport(day time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.withheldDays, ReportName(day))
}

func (s *Server) withheld(day time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.withheldDays[ReportName(day)]
}

// formatAmount writes an amount in minor units as the reports do: in
// major units with the currency's decimals.
func formatAmount(currency string, minor int64) string {
	exp := exponent(currency)
	if exp == 0 {
		return strconv.FormatInt(minor, 10)
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	div := int64(1)
	for range exp {
		div *= 10
	}
	return fmt.Sprintf("%s%d.%0*d", sign, minor/div, exp, minor%div)
}

// exponent is how many decimals Adyen gives currency.
func exponent(currency string) int {
	switch currency {
	case "JPY", "KRW", "VND", "CVE", "IDR", "XOF", "XAF", "UGX", "PYG", "RWF", "KMF", "GNF", "DJF", "VUV", "XPF":
		return 0
	case "BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND":
		return 3
	}
	return 2
}

// ErrNoReference means that the fake has no payment with the reference.
var ErrNoReference = errors.New("adyenfake: no payment with that reference")

// The injectors below make a discrepancy between the fake's records and
// Settle's, as the audit must find it. They send no notification: what
// they make happened out of Settle's sight (at a till, in the Customer
// Area), and only the reports tell of it.

// Foreign makes a payment on the merchant account that Settle never asked
// for, authorised and captured in full, whose merchant reference is no
// Settle reference.
func (s *Server) Foreign(amount int64, currency string) Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	p := &payment{Payment: Payment{
		MerchantAccount: s.cfg.MerchantAccount, Token: "pos", Amount: amount, Currency: currency,
		Status: StatusCaptured, Created: now, AuthorisedAt: now, AmountAuthorised: amount, AmountCaptured: amount,
		CaptureBefore: now.Add(s.cfg.AuthorizationLifetime),
	}}
	p.PSPReference = s.pspLocked()
	p.Reference = "till-" + p.PSPReference
	p.Captures = []Modification{{Kind: KindCapture, PSPReference: s.pspLocked(), PaymentPSPReference: p.PSPReference,
		PaymentReference: p.Reference, Amount: amount, Currency: currency, Status: ModSucceeded, Created: now}}
	s.payments = append(s.payments, p)
	s.byPSP[p.PSPReference] = p
	return p.Payment
}

// latestLocked is the latest payment with the merchant reference.
func (s *Server) latestLocked(reference string) (*payment, error) {
	for _, p := range slices.Backward(s.payments) {
		if p.Reference == reference {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrNoReference, strings.ToValidUTF8(reference, "?"))
}

// AlterAmount makes the latest payment with the reference one of amount
// in the fake's records (ledger and reports), as if Adyen had authorised
// another amount than Settle asked for.
func (s *Server) AlterAmount(reference string, amount int64) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.latestLocked(reference)
	if err != nil {
		return Payment{}, err
	}
	p.Amount = amount
	return p.Payment, nil
}

// ExtraRefund refunds amount of the latest payment with the reference
// outside Settle (in the Customer Area, say): a succeeded refund with no
// merchant reference of its own.
func (s *Server) ExtraRefund(reference string, amount int64) (Modification, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.latestLocked(reference)
	if err != nil {
		return Modification{}, err
	}
	mod := Modification{Kind: KindRefund, PSPReference: s.pspLocked(), PaymentPSPReference: p.PSPReference,
		PaymentReference: p.Reference, Amount: amount, Currency: p.Currency, Status: ModSucceeded, Created: time.Now().UTC()}
	p.AmountRefunded += amount
	p.Refunds = append(p.Refunds, mod)
	return mod, nil
}
