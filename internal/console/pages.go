package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/order"
)

// page is what every template reads; each page adds its own in Data.
type page struct {
	Title string
	CSRF  string
	Flash string
	Error string
	// Authed is false on the login and refusal pages: no nav.
	Authed bool
	Data   any
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"money": money, "when": when, "trim": trimEnum, "age": age,
		// words is an enum value as words (POSSIBLE_DOUBLE_CHARGE: possible
		// double charge); short is an id's first eight characters.
		"words": func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", " ")) },
		"short": func(s string) string { return s[:min(8, len(s))] },
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"login", "error", "review", "search", "order", "health"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes the page whole, or a bare 500 if it cannot be rendered.
func (c *Console) render(w http.ResponseWriter, code int, name string, p page) {
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, p); err != nil {
		c.log.Error("console page", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// show renders a logged-in page, with the session's flash.
func (c *Console) show(w http.ResponseWriter, s *session, name, title string, data any) {
	c.render(w, http.StatusOK, name, page{Title: title, CSRF: s.csrf, Flash: s.takeFlash(), Authed: true, Data: data})
}

// explain is an API error as an operator reads it: the API's own message
// (it never holds internal details), or a short word for what is not an
// API error.
func explain(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.Message != "" {
			return ae.Message
		}
		return strings.ReplaceAll(ae.Code, "_", " ")
	}
	return "the call failed; see the server's log"
}

// done redirects after an action, with its flash.
func (c *Console) done(w http.ResponseWriter, r *http.Request, s *session, to, flash string) {
	s.setFlash(flash)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// ---- login

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, "")
}

// showLogin renders the login form with a fresh CSRF token, which its
// cookie holds too (no session exists yet to hold it).
func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	tok := newToken()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: tok, Path: "/login", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	w.Header().Set("Cache-Control", "no-store")
	c.render(w, code, "login", page{Title: "Log in", CSRF: tok, Error: msg})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), ck.Value) {
		c.refuse(w, http.StatusForbidden, "This form's CSRF token is missing or stale: reload the login page and try again.")
		return
	}
	addr, now := clientAddr(r), time.Now()
	if !c.logins.allowed(addr, now) {
		c.log.Warn("console login limited", "client", addr)
		c.showLogin(w, r, http.StatusTooManyRequests, "Too many failed logins from this address: wait a minute.")
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	code, msg := http.StatusUnauthorized, "wrong key"
	if key != "" {
		// Stats is an ops call: a checkout key is refused it for its role.
		err := c.call(r.Context(), r.RemoteAddr, key, "Stats", &settlev1.StatsRequest{}, &settlev1.StatsResponse{})
		var ae *apiError
		switch {
		case err == nil:
			s := c.sessions.create(key, now)
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.id, Path: "/", HttpOnly: true, Secure: c.secure,
				SameSite: http.SameSiteStrictMode})
			http.SetCookie(w, &http.Cookie{Name: loginCookie, Path: "/login", MaxAge: -1, HttpOnly: true, Secure: c.secure,
				SameSite: http.SameSiteStrictMode})
			c.log.Info("console login", "client", addr)
			http.Redirect(w, r, "/review", http.StatusSeeOther)
			return
		case errors.As(err, &ae) && ae.Code == "permission_denied":
			code, msg = http.StatusForbidden, "not an ops key"
		case errors.As(err, &ae) && ae.Code == "unauthenticated":
		default:
			c.log.Error("console login", "client", addr, "err", err)
			c.showLogin(w, r, http.StatusServiceUnavailable, "Settle could not check the key: "+explain(err))
			return
		}
	}
	c.logins.failed(addr, now)
	c.log.Warn("console login refused", "client", addr, "reason", msg)
	c.showLogin(w, r, code, msg)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(s.id)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// ---- the review queue

type reviewRow struct {
	Item      *settlev1.ReviewItem
	Kind      string
	Decisions []string // ResolveReviewItem's decisions, or none
	Form      string   // "item", "order", "refund", "finding" or "" (no form here)
}

func (c *Console) reviewPage(w http.ResponseWriter, r *http.Request, s *session) {
	var rows []reviewRow
	req := &settlev1.ListReviewItemsRequest{PageSize: 500}
	resp := &settlev1.ListReviewItemsResponse{}
	if err := c.call(r.Context(), r.RemoteAddr, s.key, "ListReviewItems", req, resp); err != nil {
		s.setFlash(explain(err))
	}
	for _, it := range resp.GetItems() {
		row := reviewRow{Item: it, Kind: trimEnum(it.GetKind().String())}
		switch it.GetKind() {
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_POSSIBLE_DOUBLE_CHARGE, settlev1.ReviewItemKind_REVIEW_ITEM_KIND_CAPTURE_FAILED,
			settlev1.ReviewItemKind_REVIEW_ITEM_KIND_REFUND_FAILED:
			row.Form, row.Decisions = "item", []string{"CHARGED", "NOT_CHARGED"}
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_ORDER:
			row.Form, row.Decisions = "order", []string{"PAID", "PENDING", "CANCELED"}
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_REFUND:
			row.Form, row.Decisions = "refund", []string{"SUCCEEDED", "FAILED"}
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_CAPTURE, settlev1.ReviewItemKind_REVIEW_ITEM_KIND_VOID,
			settlev1.ReviewItemKind_REVIEW_ITEM_KIND_UNSPECIFIED:
			// The API resolves a capture or a void by reconciling it: the
			// order's page has the action.
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_DISPUTE:
			// Answered at the gateway, with the merchant's evidence.
		case settlev1.ReviewItemKind_REVIEW_ITEM_KIND_AUDIT_FINDING:
			// Never fixed by Settle: a person deals with it and says how.
			row.Form, row.Decisions = "finding", []string{"DEALT_WITH"}
		}
		rows = append(rows, row)
	}
	c.show(w, s, "review", "Review queue", rows)
}

// resolveItem resolves a review item through the API call its kind
// takes: ResolveReviewItem (an audit finding with a note alone),
// ResolveOrder or ResolveRefund, each of which keeps the API's rules (a
// decision the gateway contradicts is refused).
func (c *Console) resolveItem(w http.ResponseWriter, r *http.Request, s *session) {
	id, orderID := r.PathValue("item"), r.PostFormValue("order_id")
	decision, note := r.PostFormValue("decision"), r.PostFormValue("note")
	var (
		err   error
		flash string
	)
	switch r.PostFormValue("kind") {
	case "order":
		resp := &settlev1.ResolveOrderResponse{}
		err = c.call(r.Context(), r.RemoteAddr, s.key, "ResolveOrder", &settlev1.ResolveOrderRequest{OrderId: orderID,
			Resolution: settlev1.Resolution(settlev1.Resolution_value["RESOLUTION_"+decision]), Reason: note,
			GatewayChargeId: r.PostFormValue("gateway_charge_id")}, resp)
		flash = "Order resolved: " + trimEnum(resp.GetOrder().GetState().String())
	case "refund":
		resp := &settlev1.ResolveRefundResponse{}
		err = c.call(r.Context(), r.RemoteAddr, s.key, "ResolveRefund", &settlev1.ResolveRefundRequest{OrderId: orderID, RefundId: id,
			Resolution: settlev1.RefundResolution(settlev1.RefundResolution_value["REFUND_RESOLUTION_"+decision]), Reason: note,
			GatewayRefundId: r.PostFormValue("gateway_refund_id")}, resp)
		flash = "Refund resolved: " + trimEnum(resp.GetRefund().GetState().String())
	case "finding":
		resp := &settlev1.ResolveReviewItemResponse{}
		err = c.call(r.Context(), r.RemoteAddr, s.key, "ResolveReviewItem", &settlev1.ResolveReviewItemRequest{OrderId: orderID,
			ReviewItemId: id, Note: note, MerchantId: r.PostFormValue("merchant_id")}, resp)
		flash = "Audit finding resolved by " + resp.GetItem().GetActor()
	default:
		resp := &settlev1.ResolveReviewItemResponse{}
		err = c.call(r.Context(), r.RemoteAddr, s.key, "ResolveReviewItem", &settlev1.ResolveReviewItemRequest{OrderId: orderID,
			ReviewItemId: id, Decision: settlev1.ReviewDecision(settlev1.ReviewDecision_value["REVIEW_DECISION_"+decision]), Note: note}, resp)
		flash = "Review item resolved: " + trimEnum(resp.GetItem().GetDecision().String()) + " by " + resp.GetItem().GetActor()
	}
	if err != nil {
		flash = explain(err)
	}
	c.done(w, r, s, "/review", flash)
}

// ---- search

type searchData struct {
	Query   string
	Orders  []*settlev1.Order
	Done    bool
	Problem string
}

func (c *Console) searchPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{Query: q}
	if q != "" {
		resp := &settlev1.FindOrdersResponse{}
		if err := c.call(r.Context(), r.RemoteAddr, s.key, "FindOrders", &settlev1.FindOrdersRequest{Query: q}, resp); err != nil {
			d.Problem = explain(err)
		}
		d.Orders, d.Done = resp.GetOrders(), d.Problem == ""
		if len(d.Orders) == 1 {
			http.Redirect(w, r, "/orders/"+d.Orders[0].GetId(), http.StatusSeeOther)
			return
		}
	}
	c.show(w, s, "search", "Search", d)
}

// ---- an order

// entry is one line of an order's timeline.
type entry struct {
	Time    time.Time
	Kind    string // transition|attempt|refund|capture|void|dispute|event|delivery
	Title   string
	Detail  string
	Actor   string
	EventID string
}

type orderData struct {
	Order     *settlev1.Order
	Timeline  []entry
	RequestID string
	CanAuth   bool // AUTHORIZED: capture and void
	Review    bool // NEEDS_REVIEW: resolve
	Partial   string
}

func (c *Console) orderPage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	ctx := r.Context()
	h, err := c.history(ctx, r, s, id)
	if err != nil {
		var ae *apiError
		code := http.StatusBadGateway
		if errors.As(err, &ae) && (ae.Code == "not_found" || ae.Code == "invalid_argument") {
			code = http.StatusNotFound
		}
		c.render(w, code, "error", page{Title: "Order", CSRF: s.csrf, Authed: true, Error: explain(err)})
		return
	}
	o := h.GetOrder()
	d := orderData{Order: o, RequestID: order.NewID(),
		CanAuth: o.GetState() == settlev1.OrderState_ORDER_STATE_AUTHORIZED,
		Review:  o.GetState() == settlev1.OrderState_ORDER_STATE_NEEDS_REVIEW}
	d.Timeline = timeline(h)
	disputes, err := c.disputes(ctx, r, s, o)
	if err != nil {
		d.Partial = "Disputes could not be read: " + explain(err)
	}
	for _, dp := range disputes {
		d.Timeline = append(d.Timeline, entry{Time: ts(dp.GetCreateTime()), Kind: "dispute",
			Title:  fmt.Sprintf("Dispute %s: %s, %s", dp.GetId(), trimEnum(dp.GetStatus().String()), money(dp.GetAmount())),
			Detail: strings.TrimSpace(dp.GetReason() + " " + dp.GetNetworkReasonCode())})
	}
	events := &settlev1.ListOrderEventsResponse{}
	if err := c.call(ctx, r.RemoteAddr, s.key, "ListOrderEvents", &settlev1.ListOrderEventsRequest{OrderId: o.GetId()}, events); err != nil {
		d.Partial = strings.TrimSpace(d.Partial + " Events could not be read: " + explain(err))
	}
	d.Timeline = append(d.Timeline, eventEntries(events.GetEvents())...)
	sort.SliceStable(d.Timeline, func(i, j int) bool { return d.Timeline[i].Time.Before(d.Timeline[j].Time) })
	c.show(w, s, "order", "Order "+o.GetMerchantReference(), d)
}

// history reads an order's whole history, page by page.
func (c *Console) history(ctx context.Context, r *http.Request, s *session, id string) (*settlev1.GetOrderHistoryResponse, error) {
	var all *settlev1.GetOrderHistoryResponse
	req := &settlev1.GetOrderHistoryRequest{OrderId: id, PageSize: 1000}
	for range 20 {
		resp := &settlev1.GetOrderHistoryResponse{}
		if err := c.call(ctx, r.RemoteAddr, s.key, "GetOrderHistory", req, resp); err != nil {
			return nil, err
		}
		if all == nil {
			all = resp
		} else {
			all.Events = append(all.Events, resp.GetEvents()...)
			all.Attempts = append(all.Attempts, resp.GetAttempts()...)
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	return all, nil
}

// disputes are the order's disputes: the API lists a merchant's, which
// are filtered here.
func (c *Console) disputes(ctx context.Context, r *http.Request, s *session, o *settlev1.Order) ([]*settlev1.Dispute, error) {
	var out []*settlev1.Dispute
	req := &settlev1.ListDisputesRequest{MerchantId: o.GetMerchantId(), PageSize: 500}
	for range 10 {
		resp := &settlev1.ListDisputesResponse{}
		if err := c.call(ctx, r.RemoteAddr, s.key, "ListDisputes", req, resp); err != nil {
			return out, err
		}
		for _, d := range resp.GetDisputes() {
			if d.GetOrderId() == o.GetId() {
				out = append(out, d)
			}
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	return out, nil
}

// eventEntries are an order's events out, each with its resend form,
// every failed try of its delivery, and where its delivery stands (its
// tries so far, their last answer).
func eventEntries(events []*settlev1.OrderEventDelivery) []entry {
	var t []entry
	for _, e := range events {
		t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "event", Title: e.GetType() + " " + e.GetEventId(), EventID: e.GetEventId()})
		for _, f := range e.GetFailedTries() {
			answer := fmt.Sprintf("HTTP %d", f.GetStatus())
			if f.GetStatus() == 0 {
				answer = "no answer"
			}
			t = append(t, entry{Time: ts(f.GetTryTime()), Kind: "delivery",
				Title: fmt.Sprintf("Try %d of %s failed: %s", f.GetAttempt(), e.GetEventId(), answer), Detail: f.GetError()})
		}
		if e.GetAttempts() == 0 {
			continue
		}
		tries := fmt.Sprintf("%d %s, last answer HTTP %d", e.GetAttempts(), plural(int(e.GetAttempts()), "try", "tries"), e.GetLastStatus())
		if e.GetLastStatus() == 0 {
			tries = fmt.Sprintf("%d %s, last without an answer", e.GetAttempts(), plural(int(e.GetAttempts()), "try", "tries"))
		}
		switch {
		case e.GetDeliveredTime() != nil:
			t = append(t, entry{Time: ts(e.GetDeliveredTime()), Kind: "delivery", Title: "Delivered " + e.GetEventId(), Detail: tries})
		case e.GetFailedTime() != nil:
			t = append(t, entry{Time: ts(e.GetFailedTime()), Kind: "delivery", Title: "Failed " + e.GetEventId() + ": retries ran out", Detail: tries})
		default:
			t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "delivery", Title: "Delivering " + e.GetEventId(),
				Detail: tries + "; next try " + when(ts(e.GetNextTryTime()))})
		}
	}
	return t
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// timeline turns an order's history into entries.
func timeline(h *settlev1.GetOrderHistoryResponse) []entry {
	var t []entry
	for _, e := range h.GetEvents() {
		t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "transition", Actor: e.GetActor(), Detail: e.GetReason(),
			Title: fmt.Sprintf("%s → %s (%s)", fromState(e.GetFromState().String()), trimEnum(e.GetToState().String()), e.GetEvent())})
	}
	for _, a := range h.GetAttempts() {
		title := fmt.Sprintf("Attempt %s at %s: %s", a.GetId(), a.GetGateway(), trimEnum(a.GetOutcome().String()))
		var detail []string
		if a.GetDeclineCode() != "" {
			detail = append(detail, "decline code "+a.GetDeclineCode())
		}
		if a.GetGatewayChargeId() != "" {
			detail = append(detail, "gateway reference "+a.GetGatewayChargeId())
		}
		if a.GetRequestId() != "" {
			detail = append(detail, "request "+a.GetRequestId())
		}
		if a.GetCascadeAfter() != "" {
			detail = append(detail, "cascaded after "+a.GetCascadeAfter())
		}
		t = append(t, entry{Time: ts(a.GetCreateTime()), Kind: "attempt", Title: title, Detail: strings.Join(detail, "; ")})
	}
	for _, rf := range h.GetRefunds() {
		t = append(t, entry{Time: ts(rf.GetCreateTime()), Kind: "refund", Actor: rf.GetActor(), Detail: rf.GetReason(),
			Title: fmt.Sprintf("Refund %s of %s: %s %s", rf.GetId(), money(rf.GetAmount()), trimEnum(rf.GetState().String()), rf.GetFailureCode())})
	}
	for _, e := range h.GetRefundEvents() {
		t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "refund", Actor: e.GetActor(), Detail: e.GetReason(),
			Title: fmt.Sprintf("Refund %s: %s → %s (%s)", e.GetRefundId(), fromState(e.GetFromState().String()), trimEnum(e.GetToState().String()), e.GetEvent())})
	}
	for _, cp := range h.GetCaptures() {
		t = append(t, entry{Time: ts(cp.GetCreateTime()), Kind: "capture", Actor: cp.GetActor(),
			Title: fmt.Sprintf("Capture %s of %s: %s %s", cp.GetId(), money(cp.GetAmount()), trimEnum(cp.GetState().String()), cp.GetFailureCode())})
	}
	for _, e := range h.GetCaptureEvents() {
		t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "capture", Actor: e.GetActor(), Detail: e.GetReason(),
			Title: fmt.Sprintf("Capture %s: %s → %s (%s)", e.GetCaptureId(), fromState(e.GetFromState().String()), trimEnum(e.GetToState().String()), e.GetEvent())})
	}
	for _, v := range h.GetVoids() {
		t = append(t, entry{Time: ts(v.GetCreateTime()), Kind: "void", Actor: v.GetActor(), Detail: v.GetReason(),
			Title: fmt.Sprintf("Void %s: %s %s", v.GetId(), trimEnum(v.GetState().String()), v.GetFailureCode())})
	}
	for _, e := range h.GetVoidEvents() {
		t = append(t, entry{Time: ts(e.GetCreateTime()), Kind: "void", Actor: e.GetActor(), Detail: e.GetReason(),
			Title: fmt.Sprintf("Void %s: %s → %s (%s)", e.GetVoidId(), fromState(e.GetFromState().String()), trimEnum(e.GetToState().String()), e.GetEvent())})
	}
	return t
}

// orderAction runs one of an order's actions, each through its API call.
func (c *Console) orderAction(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := "/orders/" + id
	ctx, rid, reason := r.Context(), r.PostFormValue("request_id"), r.PostFormValue("reason")
	amount, amountErr := parseAmount(r.PostFormValue("amount_minor"))
	var (
		err   error
		flash string
	)
	switch action := r.PathValue("action"); action {
	case "reconcile":
		resp := &settlev1.ReconcileOrderResponse{}
		err = c.call(ctx, r.RemoteAddr, s.key, "ReconcileOrder", &settlev1.ReconcileOrderRequest{OrderId: id}, resp)
		flash = "Reconciled: " + trimEnum(resp.GetOrder().GetState().String())
	case "refund":
		if amountErr != nil {
			c.done(w, r, s, back, amountErr.Error())
			return
		}
		resp := &settlev1.OpsServiceRefundOrderResponse{}
		err = c.call(ctx, r.RemoteAddr, s.key, "RefundOrder", &settlev1.OpsServiceRefundOrderRequest{OrderId: id, RequestId: rid,
			AmountMinor: amount, Reason: reason}, resp)
		flash = "Refund " + trimEnum(resp.GetRefund().GetState().String())
	case "capture":
		if amountErr != nil {
			c.done(w, r, s, back, amountErr.Error())
			return
		}
		resp := &settlev1.OpsServiceCaptureOrderResponse{}
		err = c.call(ctx, r.RemoteAddr, s.key, "CaptureOrder", &settlev1.OpsServiceCaptureOrderRequest{OrderId: id, RequestId: rid,
			AmountMinor: amount, Reason: reason}, resp)
		flash = "Capture " + trimEnum(resp.GetCapture().GetState().String())
	case "void":
		resp := &settlev1.OpsServiceVoidOrderResponse{}
		err = c.call(ctx, r.RemoteAddr, s.key, "VoidOrder", &settlev1.OpsServiceVoidOrderRequest{OrderId: id, RequestId: rid, Reason: reason}, resp)
		flash = "Void " + trimEnum(resp.GetVoid().GetState().String())
	case "resolve":
		resp := &settlev1.ResolveOrderResponse{}
		err = c.call(ctx, r.RemoteAddr, s.key, "ResolveOrder", &settlev1.ResolveOrderRequest{OrderId: id,
			Resolution:      settlev1.Resolution(settlev1.Resolution_value["RESOLUTION_"+r.PostFormValue("resolution")]),
			GatewayChargeId: r.PostFormValue("gateway_charge_id"), Reason: reason}, resp)
		flash = "Resolved: " + trimEnum(resp.GetOrder().GetState().String())
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		flash = explain(err)
	}
	c.done(w, r, s, back, flash)
}

// resendEvent sends an order's event to its merchant again.
func (c *Console) resendEvent(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	h := &settlev1.GetOrderHistoryResponse{}
	err := c.call(r.Context(), r.RemoteAddr, s.key, "GetOrderHistory", &settlev1.GetOrderHistoryRequest{OrderId: id, PageSize: 1}, h)
	if err == nil {
		err = c.call(r.Context(), r.RemoteAddr, s.key, "ResendEvent", &settlev1.ResendEventRequest{
			MerchantId: h.GetOrder().GetMerchantId(), EventId: r.PathValue("event")}, &settlev1.ResendEventResponse{})
	}
	flash := "Event queued for delivery again"
	if err != nil {
		flash = explain(err)
	}
	c.done(w, r, s, "/orders/"+id, flash)
}

// parseAmount reads a form's amount in minor units; empty is zero (the
// API's "the rest").
func parseAmount(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("the amount must be a whole number of minor units (1250 for 12.50)")
	}
	return n, nil
}

// ---- helpers for the templates

// trimEnum shows an enum value without its type's prefix:
// REFUND_STATE_SUCCEEDED is SUCCEEDED.
func trimEnum(v string) string {
	for _, p := range []string{"ORDER_STATE_", "REFUND_STATE_", "CAPTURE_STATE_", "VOID_STATE_", "ATTEMPT_OUTCOME_",
		"REVIEW_ITEM_KIND_", "REVIEW_DECISION_", "DISPUTE_STATUS_"} {
		if strings.HasPrefix(v, p) {
			return strings.TrimPrefix(v, p)
		}
	}
	return v
}

// zeroDecimal are the currencies without minor units among those Settle
// is likely to see.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true, "VND": true, "CLP": true, "ISK": true, "UGX": true}

// money shows an amount as "12.50 GBP".
func money(m *settlev1.Money) string {
	if m == nil {
		return "0"
	}
	n, cur := m.GetAmountMinor(), m.GetCurrency()
	if zeroDecimal[cur] {
		return fmt.Sprintf("%d %s", n, cur)
	}
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	return fmt.Sprintf("%s%d.%02d %s", sign, n/100, n%100, cur)
}

func ts(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// when shows a time in UTC, to the second.
func when(t any) string {
	var tt time.Time
	switch v := t.(type) {
	case time.Time:
		tt = v
	case *timestamppb.Timestamp:
		tt = ts(v)
	}
	if tt.IsZero() {
		return ""
	}
	return tt.UTC().Format("2006-01-02 15:04:05Z")
}

// age shows how long ago t was, roughly.
func age(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	d := time.Since(t.AsTime()).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// fromState is a transition's first state as words: "new" for a creation.
func fromState(s string) string {
	if t := trimEnum(s); t != "UNSPECIFIED" {
		return t
	}
	return "new"
}
