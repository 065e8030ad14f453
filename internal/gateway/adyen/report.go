package adyen

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/gateway"
	"github.com/settlepay/settle/internal/order"
)

// Listings
//
// Adyen has no API that lists payments. What it offers for matching its
// records with a merchant's is its reports: CSV files generated per
// merchant account, announced by a REPORT_AVAILABLE notification (its
// pspReference the file's name, its reason the download URL), and served
// from the Customer Area to a GET authenticated as a report user, with
// basic authentication (report@Company.<company>) or the X-API-Key of an
// API credential that has the report download role:
//
//	GET https://ca-test.adyen.com/reports/download/MerchantAccount/<account>/payments_accounting_report_YYYY_MM_DD.csv
//
// The audit reads the daily Payment accounting report. Of Adyen's
// transaction reports it is the one that fits matching charges and
// refunds by our reference over a window of creation times: it has a row
// for every status change of every payment (Received, Authorised,
// Refused, Cancelled, Expired, SentForSettle, CaptureFailed,
// SentForRefund, Refunded, RefundFailed, Chargeback, …), each with the
// payment's Psp Reference and Merchant Reference (the attempt's id) and a
// Booking Date, so a payment's creation (its Received row), its
// authorisation, and every capture and refund are in it, declined and
// pending ones included. The Settlement details report has only what
// was settled or paid out (no refusals, no authorisations, no refund in
// flight), booked at the payable batch's time, days after the payment:
// it answers "was I paid", not "what did Settle's attempts come to". The
// Received payment details report has the payments but not their
// modifications.
//
// The adapter reads, by header name (Adyen adds columns, and an account
// chooses some): Merchant Account, Psp Reference, Merchant Reference,
// Booking Date and TimeZone, Main Currency and Main Amount (major units),
// Record Type, and, for a modification's row, Modification Reference
// (its pspReference) and Modification Merchant Reference (Settle's
// reference for it: the refund's, the capture's, the void's id, or
// "<attempt id>:cancel" for the technical cancel); the last two must be
// among the account's report columns. Rows of other merchant accounts (a
// company-level report) are skipped.
//
// # A window
//
// Booking dates are whole seconds in the account's time zone
// (Config.ReportTimeZone), so [from, to) is read as the seconds it holds,
// from and to rounded up, as Stripe's listing does. A day's report holds
// what was booked that day. The listing reads the reports of the days
// the window covers, each a stream (encoding/csv over the response body,
// never a whole file in memory); a report that is not available (404)
// for such a day is an error (ErrReportNotAvailable): the window cannot
// be answered yet, and is never reported clean. A payment belongs to the
// window when its Received row does (its creation); a refund when its
// SentForRefund row does. What became of them since (captures, refunds,
// cancels, failures) is in the reports of later days: the listing goes on
// reading the days after the window, up to today, and stops at the first
// report not available yet, or as soon as nothing it holds can change (a
// window with no payment needs no later day). A window audited n days
// after it ended costs n more downloads. What happened after the latest
// report Adyen generated is not seen: an audit of a window whose charges
// were refunded since may report a REFUND_MISMATCH that a later run
// would not.
//
// Each payment's rows are folded into one GatewayCharge: its Psp
// Reference as ID (the pspReference Charge reports), Merchant Reference
// as the reference, the Received and then Authorised row's amount;
// Authorised makes it succeeded, with a hold (open; captured once a
// capture is sent for settlement; voided by a cancel; expired); Refused
// and Error make it declined ("refused", "error"); a cancel by the
// technical cancel's or the release's reference before anything was
// captured makes it declined "cancelled" (nothing moved, and Settle
// holds the attempt as no charge); a payment the adapter captured as it
// was authorized (an automatic order: the capture's reference is
// "<attempt id>:capture") is a charge taken at once, with no hold.
// Captured is what captures sent for settlement took (less those that
// failed), refunded what refunds took (less those that failed). A payment with only a Received row is
// unknown: the shopper has not acted, or Adyen not decided. Each refund is
// one GatewayRefund: Modification Reference as ID, Modification Merchant
// Reference (Settle's refund id) as the reference, the payment's
// references as the charge's, succeeded once Refunded, declined
// "refund_failed" after RefundFailed, unknown before either.
//
// # Order
//
// A listing wants records by creation time, then id; a report's rows
// come by booking time at best, a payment's creation among its later
// changes, and Adyen does not promise an order. The window's records are
// held (one small
// record per payment or refund created in it, never a report's rows)
// until the reports after the window have been read, then sorted and
// called. Memory is the window's records: an audit window of an hour or
// a day of one merchant account's payments.

// The report paths and names.
const (
	// reportPath is the Customer Area's report folder of a merchant
	// account.
	reportPath = "/reports/download/MerchantAccount/"
	// reportName is the daily Payment accounting report's name, a Go time
	// layout.
	reportName = "payments_accounting_report_2006_01_02.csv"
	// DefaultReportTimeout is Config.ReportTimeout when it is zero.
	DefaultReportTimeout = 5 * time.Minute
)

// ErrReportNotAvailable means that a report the listing needs is not
// available (yet): Adyen generates a day's report after the day ends.
var ErrReportNotAvailable = errors.New("adyen: report not available")

var _ order.ChargeLister = (*Gateway)(nil)

// ListedUntil is the end of what the reports can hold at now: the start
// of today in the account's time zone, since Adyen generates a day's
// report after the day ends. The audit's schedule waits for it
// (audit.ReportLister); a listing of a later window fails until then.
func (g *Gateway) ListedUntil(now time.Time) time.Time {
	return day(now, g.reportZone)
}

// reportFolder is the default Config.ReportURL of base's account: the
// Customer Area of the test or live environment, or the base URL's own
// host (a fake on a loopback address).
func reportFolder(base *url.URL, merchant string) string {
	switch host := base.Hostname(); {
	case host == "checkout-test.adyen.com":
		return "https://ca-test.adyen.com" + reportPath + url.PathEscape(merchant)
	case strings.HasSuffix(host, "-checkout-live.adyenpayments.com"):
		return "https://ca-live.adyen.com" + reportPath + url.PathEscape(merchant)
	}
	return base.Scheme + "://" + base.Host + reportPath + url.PathEscape(merchant)
}

// checkReportURL parses the report folder's URL: https (http only on a
// loopback address), no credentials.
func checkReportURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "", errors.New("adyen: report URL must be an absolute https URL such as https://ca-live.adyen.com" + reportPath + "<account>")
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "", fmt.Errorf("adyen: report URL %q must be https (plain http only on a loopback address)", u.Redacted())
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("adyen: report URL %q must carry no credentials, query or fragment", u.Redacted())
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// ListCharges calls fn with each payment Adyen created in [from, to), by
// creation time and then pspReference, read from the daily Payment
// accounting reports (see Listings above). It stops at fn's first error,
// or when ctx ends, and returns that error.
func (g *Gateway) ListCharges(ctx context.Context, from, to time.Time, fn func(order.GatewayCharge) error) error {
	charges := map[string]*folded{}
	err := g.readWindow(ctx, gateway.OpListCharges, from, to, func(r reportRow, in bool) error {
		c := charges[r.psp]
		if c == nil {
			if !in || r.recordType != "Received" {
				return nil // a payment created before the window, or after
			}
			c = &folded{charge: order.GatewayCharge{ID: r.psp, Reference: r.ref, Amount: r.amount,
				Outcome: order.OutcomeUnknown, Created: r.booked}}
			charges[r.psp] = c
		}
		c.fold(r)
		return nil
	}, func() bool { return len(charges) == 0 })
	if err != nil {
		return err
	}
	out := make([]order.GatewayCharge, 0, len(charges))
	for _, c := range charges {
		out = append(out, c.result())
	}
	slices.SortFunc(out, func(a, b order.GatewayCharge) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	for _, c := range out {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// ListRefunds calls fn with each refund Adyen received in [from, to) (its
// SentForRefund row), as ListCharges does with payments.
func (g *Gateway) ListRefunds(ctx context.Context, from, to time.Time, fn func(order.GatewayRefund) error) error {
	refunds := map[string]*order.GatewayRefund{}
	err := g.readWindow(ctx, gateway.OpListRefunds, from, to, func(r reportRow, in bool) error {
		if r.modPSP == "" {
			return nil
		}
		rf := refunds[r.modPSP]
		switch {
		case rf == nil && in && r.recordType == "SentForRefund":
			refunds[r.modPSP] = &order.GatewayRefund{ID: r.modPSP, Reference: r.modRef, ChargeID: r.psp,
				ChargeReference: r.ref, Amount: r.amount, Outcome: order.OutcomeUnknown, Created: r.booked}
		case rf == nil:
		case r.recordType == "Refunded" && rf.Outcome != order.OutcomeDeclined:
			rf.Outcome = order.OutcomeSucceeded
		case r.recordType == "RefundFailed":
			rf.Outcome, rf.FailureCode = order.OutcomeDeclined, "refund_failed"
		}
		return nil
	}, func() bool {
		// A refund that failed stays failed; one that succeeded may fail
		// yet (RefundFailed after Refunded).
		for _, rf := range refunds {
			if rf.Outcome != order.OutcomeDeclined {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	out := make([]order.GatewayRefund, 0, len(refunds))
	for _, rf := range refunds {
		out = append(out, *rf)
	}
	slices.SortFunc(out, func(a, b order.GatewayRefund) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	for _, rf := range out {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(rf); err != nil {
			return err
		}
	}
	return nil
}

// folded is one payment's rows, folded.
type folded struct {
	charge     order.GatewayCharge
	authorised bool
	// captures and refunds are the modifications' amounts by their
	// pspReference, negative once they failed.
	captures, refunds map[string]int64
	voided, expired   bool
	cancelled         bool // by the technical cancel or a release, before anything was captured
	atOnce            bool // captured by the adapter as it was authorized: a charge taken at once
	refused           string
}

// fold adds one of the payment's rows.
func (c *folded) fold(r reportRow) {
	switch r.recordType {
	case "Received":
		if !c.authorised {
			c.charge.Amount = r.amount
		}
	case "Authorised":
		c.authorised, c.charge.Amount = true, r.amount
	case "Refused":
		c.refused = "refused"
	case "Error":
		c.refused = "error"
	case "Cancelled":
		if ref := r.modRef; strings.HasSuffix(ref, cancelSuffix) || strings.HasSuffix(ref, releaseSuffix) {
			c.cancelled = true
		} else {
			c.voided = true
		}
	case "Expired":
		c.expired = true
	case "SentForSettle":
		// The adapter's own capture of an automatic order, at once.
		c.atOnce = c.atOnce || r.modRef == c.charge.Reference+captureSuffix
		c.captures = modified(c.captures, r.modPSP, r.amount.AmountMinor, false)
	case "CaptureFailed":
		c.captures = modified(c.captures, r.modPSP, r.amount.AmountMinor, true)
	case "Refunded":
		c.refunds = modified(c.refunds, r.modPSP, r.amount.AmountMinor, false)
	case "RefundFailed":
		c.refunds = modified(c.refunds, r.modPSP, r.amount.AmountMinor, true)
	}
}

// modified records a modification's amount in mods, or its failure, which
// stays whatever row comes after it.
func modified(mods map[string]int64, psp string, amount int64, failed bool) map[string]int64 {
	if mods == nil {
		mods = map[string]int64{}
	}
	switch {
	case failed:
		mods[psp] = -1
	case mods[psp] >= 0:
		mods[psp] = amount
	}
	return mods
}

// total is what the modifications that did not fail took.
func total(mods map[string]int64) int64 {
	var n int64
	for _, v := range mods {
		n += max(v, 0)
	}
	return n
}

// result is the payment as a GatewayCharge.
func (c *folded) result() order.GatewayCharge {
	gc := c.charge
	gc.Captured, gc.Refunded = total(c.captures), total(c.refunds)
	switch {
	case c.authorised && c.cancelled && gc.Captured == 0:
		gc.Outcome, gc.DeclineCode = order.OutcomeDeclined, "cancelled"
	case c.authorised:
		gc.Outcome, gc.Hold = order.OutcomeSucceeded, order.HoldOpen
		switch {
		case c.atOnce:
			gc.Hold = "" // no hold: a charge taken at once
		case gc.Captured > 0:
			gc.Hold = order.HoldCaptured
		case c.voided:
			gc.Hold = order.HoldVoided
		case c.expired:
			gc.Hold = order.HoldExpired
		}
	case c.refused != "":
		gc.Outcome, gc.DeclineCode = order.OutcomeDeclined, c.refused
	case c.cancelled || c.voided:
		gc.Outcome, gc.DeclineCode = order.OutcomeDeclined, "cancelled"
	}
	return gc
}

// reportRow is one row of a Payment accounting report, read.
type reportRow struct {
	psp, ref       string
	recordType     string
	booked         time.Time
	amount         order.Money
	modPSP, modRef string
}

// readWindow reads the reports of [from, to) and of the days after it, up
// to today, calling row with each of the merchant account's rows and
// whether it was booked in the window (see Listings above).
func (g *Gateway) readWindow(ctx context.Context, op string, from, to time.Time, row func(r reportRow, in bool) error,
	settled func() bool) error {
	if to.Before(from) {
		return fmt.Errorf("adyen: window ends (%s) before it starts (%s)", to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	gte, lt := ceilSecond(from), ceilSecond(to)
	if !gte.Before(lt) {
		return nil // no whole second starts in the window
	}
	first, last := day(gte, g.reportZone), day(lt.Add(-time.Second), g.reportZone)
	today := day(g.now(), g.reportZone)
	for d := first; ; d = d.AddDate(0, 0, 1) {
		after := d.After(last)
		switch {
		case !after && d.After(today):
			return fmt.Errorf("%w: %s is a day to come", ErrReportNotAvailable, d.Format(reportName))
		case after && (d.After(today) || settled()):
			return nil // up to today, or nothing of the window can change any more
		}
		err := g.readReport(ctx, op, d, func(r reportRow) error {
			return row(r, !r.booked.Before(gte) && r.booked.Before(lt))
		})
		switch {
		case errors.Is(err, ErrReportNotAvailable) && after:
			// The days after the window: what Adyen has reported so far.
			return nil
		case err != nil:
			return err
		}
	}
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

// day is the start of t's day in loc.
func day(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
}

// reportColumns are the columns the adapter reads.
var reportColumns = []string{"Merchant Account", "Psp Reference", "Merchant Reference", "Booking Date", "TimeZone",
	"Main Currency", "Main Amount", "Record Type", "Modification Reference", "Modification Merchant Reference"}

// readReport downloads the Payment accounting report of day d and calls
// row with each of the merchant account's rows, in the report's order,
// reading the body as a stream. The download is one observed call.
func (g *Gateway) readReport(ctx context.Context, op string, d time.Time, row func(reportRow) error) (err error) {
	name := d.Format(reportName)
	ctx, done := g.obs.Start(ctx, gateway.Call{Op: op})
	var fnErr error // the caller's, returned as it is
	defer func() {
		res := order.Result{Outcome: order.OutcomeSucceeded}
		if err != nil && fnErr == nil {
			res.Outcome = order.OutcomeUnknown
		}
		done(res, err)
	}()
	ctx, cancel := context.WithTimeout(ctx, g.reportTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, g.reportURL+"/"+name, nil)
	if err != nil {
		return fmt.Errorf("adyen: report %s: build request: %w", name, err)
	}
	hreq.Header.Set("Accept", "text/csv")
	if g.reportUser != "" {
		hreq.SetBasicAuth(g.reportUser, g.reportPassword)
	} else {
		hreq.Header.Set("X-API-Key", g.reportKey)
	}
	resp, err := g.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("adyen: report %s: %w", name, ctx.Err())
		}
		return fmt.Errorf("adyen: report %s: no answer from Adyen: %w", name, stripURL(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s (Adyen generates a day's report after the day ends)", ErrReportNotAvailable, name)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("adyen: report %s: Adyen answered %d: the report user's credentials, or its access to the merchant account, were refused",
			name, resp.StatusCode)
	default:
		return fmt.Errorf("adyen: report %s: Adyen answered %d", name, resp.StatusCode)
	}
	err = parseReport(resp.Body, g.merchant, g.reportZone, func(r reportRow) error {
		if fnErr = row(r); fnErr != nil {
			return fnErr
		}
		return ctx.Err()
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("adyen: report %s: %w", name, ctx.Err())
	case err != nil:
		return fmt.Errorf("adyen: report %s: %w", name, err)
	}
	return nil
}

// stripURL is err without the URL a *url.Error quotes.
func stripURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// parseReport reads a Payment accounting report from r, a row at a time,
// and calls fn with each row of the merchant account, read with its
// Booking Date in loc. It returns fn's first error as it is.
func parseReport(r io.Reader, merchant string, loc *time.Location, fn func(reportRow) error) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return errors.New("the report is empty: no header line")
	}
	if err != nil {
		return fmt.Errorf("header line: %w", err)
	}
	col := make(map[string]int, len(header))
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		col[strings.TrimSpace(h)] = i
	}
	var missing []string
	idx := make([]int, len(reportColumns))
	for i, name := range reportColumns {
		j, ok := col[name]
		if !ok {
			missing = append(missing, name)
		}
		idx[i] = j
	}
	if len(missing) > 0 {
		return fmt.Errorf("the report lacks the columns %s (add them to the report's columns in the Customer Area)",
			strings.Join(missing, ", "))
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		field := func(i int) string { return strings.TrimSpace(rec[idx[i]]) }
		if field(0) != merchant {
			continue
		}
		line, _ := cr.FieldPos(idx[0])
		row, err := readRow(field, loc)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(row); err != nil {
			return err
		}
	}
}

// readRow reads one row's fields (by reportColumns' index).
func readRow(field func(int) string, loc *time.Location) (reportRow, error) {
	r := reportRow{psp: field(1), ref: field(2), recordType: field(7), modPSP: field(8), modRef: field(9)}
	if r.psp == "" || r.recordType == "" {
		return r, errors.New("no Psp Reference or Record Type")
	}
	booked, err := time.ParseInLocation(time.DateTime, field(3), loc)
	if err != nil {
		return r, fmt.Errorf("column Booking Date: %q is not YYYY-MM-DD HH:MM:SS", clip(field(3)))
	}
	if zone, _ := booked.Zone(); field(4) != "" && field(4) != zone && (zone != "UTC" || field(4) != "GMT") {
		return r, fmt.Errorf("column TimeZone: %q is not the account's time zone setting (%s, %s at that date)", clip(field(4)), loc, zone)
	}
	r.booked = booked.UTC()
	cur := field(5)
	value, err := parseAmount(cur, field(6))
	if err != nil {
		return r, err
	}
	r.amount = order.Money{Currency: cur, AmountMinor: minorAmount(cur, value)}
	return r, nil
}

// parseAmount reads a report's amount, in major units with the currency's
// decimals at Adyen (an optional sign; amounts of debits may be negative),
// into Adyen's minor units, as a positive value.
func parseAmount(currency, s string) (int64, error) {
	exp, ok := adyenExponent(currency)
	if !ok {
		return 0, fmt.Errorf("column Main Currency: %q is no currency Adyen charges in", clip(currency))
	}
	bad := fmt.Errorf("column Main Amount: %q is not an amount in %s", clip(s), clip(currency))
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > exp || strings.ContainsAny(whole+frac, "+-") {
		return 0, bad
	}
	frac += strings.Repeat("0", exp-len(frac))
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || v < 0 {
		return 0, bad
	}
	return v, nil
}

// adyenExponent is how many decimals Adyen counts currency in: ISO
// 4217's, but two for CLP and ISK and none for CVE and IDR (see Amounts
// in the package documentation).
func adyenExponent(currency string) (int, bool) {
	switch currency {
	case "CLP", "ISK":
		return 2, true
	case "CVE", "IDR":
		return 0, true
	}
	exp, ok := order.CurrencyExponent(currency)
	if !ok || exp == order.NoMinorUnit || exp > 3 {
		return 0, false
	}
	return exp, true
}
