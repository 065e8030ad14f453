package stripetest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Listings
//
// GET /v1/payment_intents and GET /v1/refunds list as Stripe lists:
// newest first (the later made first within a second), filtered by
// created[gte], created[gt], created[lte] and created[lt] (Unix seconds),
// limit records a page (1 to 100, default 10, and at most
// Options.PageSize), and paged with starting_after (towards older
// records) or ending_before (towards newer: the records just before the
// named one, still newest first), never both. expand[]=data.latest_charge
// expands a PaymentIntent's latest charge, with amount_refunded (what its
// succeeded refunds gave back); expand[]=data.payment_intent a Refund's
// PaymentIntent.

// listWindow is what a list request asks for.
type listWindow struct {
	gte, lt       int64 // created range, Unix seconds: [gte, lt)
	limit         int
	startingAfter string
	endingBefore  string
}

func (w listWindow) holds(t time.Time) bool {
	return t.Unix() >= w.gte && t.Unix() < w.lt
}

// parseList reads a list request's parameters, or says what is wrong.
func parseList(q url.Values) (listWindow, *apiError) {
	w := listWindow{gte: -1 << 62, lt: 1 << 62, limit: 10,
		startingAfter: q.Get("starting_after"), endingBefore: q.Get("ending_before")}
	bad := func(param string) (listWindow, *apiError) {
		return listWindow{}, &apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: param,
			Message: "Invalid integer: " + q.Get(param)}
	}
	for _, b := range []struct {
		param string
		set   func(int64)
	}{
		{"created[gte]", func(n int64) { w.gte = max(w.gte, n) }},
		{"created[gt]", func(n int64) { w.gte = max(w.gte, n+1) }},
		{"created[lt]", func(n int64) { w.lt = min(w.lt, n) }},
		{"created[lte]", func(n int64) { w.lt = min(w.lt, n+1) }},
	} {
		if v := q.Get(b.param); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return bad(b.param)
			}
			b.set(n)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return listWindow{}, &apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "limit",
				Message: "This value must be between 1 and 100."}
		}
		w.limit = n
	}
	if w.startingAfter != "" && w.endingBefore != "" {
		return listWindow{}, &apiError{Type: "invalid_request_error", Message: "You may only specify one of these parameters: ending_before, starting_after."}
	}
	return w, nil
}

// expands reports whether q asks to expand path.
func expands(q url.Values, path string) bool {
	for name, v := range q {
		if strings.HasPrefix(name, "expand[") && len(v) > 0 && v[0] == path {
			return true
		}
	}
	return false
}

// writeList answers a page of data (all the records that match, newest
// first; ids are theirs) as w asks.
func (s *Server) writeList(rw http.ResponseWriter, path string, w listWindow, data []map[string]any, ids []string) {
	index := func(id string) int {
		for i, x := range ids {
			if x == id {
				return i
			}
		}
		return -1
	}
	limit := min(w.limit, s.opts.PageSize)
	var lo, hi int
	switch {
	case w.startingAfter != "":
		i := index(w.startingAfter)
		if i < 0 {
			writeError(rw, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "resource_missing",
				Param: "starting_after", Message: "No such object: '" + w.startingAfter + "'"})
			return
		}
		lo, hi = i+1, min(i+1+limit, len(data))
	case w.endingBefore != "":
		i := index(w.endingBefore)
		if i < 0 {
			writeError(rw, http.StatusBadRequest, apiError{Type: "invalid_request_error", Code: "resource_missing",
				Param: "ending_before", Message: "No such object: '" + w.endingBefore + "'"})
			return
		}
		lo, hi = max(0, i-limit), i
	default:
		hi = min(limit, len(data))
	}
	more := hi < len(data)
	if w.endingBefore != "" {
		more = lo > 0
	}
	page := data[lo:hi]
	if page == nil {
		page = []map[string]any{}
	}
	body, _ := json.Marshal(map[string]any{"object": "list", "data": page, "has_more": more, "url": path})
	writeBody(rw, http.StatusOK, body)
}

func (s *Server) listIntents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	window, err := parseList(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, *err)
		return
	}
	expand := expands(q, "data.latest_charge")
	var (
		data []map[string]any
		ids  []string
	)
	s.mu.Lock()
	for i := len(s.ledger) - 1; i >= 0; i-- {
		pi := s.ledger[i]
		if !window.holds(pi.Created) {
			continue
		}
		s.lapseLocked(pi)
		m := intentMap(*pi, expand)
		if c, ok := m["latest_charge"].(map[string]any); ok {
			var refunded int64
			for _, rf := range s.refunds {
				if rf.PaymentIntent == pi.ID && refundJSON(rf, time.Now())["status"] == "succeeded" {
					refunded += rf.Amount
				}
			}
			c["amount_refunded"] = refunded
		}
		data, ids = append(data, m), append(ids, pi.ID)
	}
	s.mu.Unlock()
	s.writeList(w, "/v1/payment_intents", window, data, ids)
}
