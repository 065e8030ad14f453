package sim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/settlepay/settle/internal/gateway/refpsp"
)

// Listings
//
// GET /v1/charges and GET /v1/refunds without a reference list the charges
// and refunds created in [created_gte, created_lt), oldest first (by
// created, then id), a page of at most limit at a time (see package
// refpsp). A listing shows what a lookup would: a charge in flight (see
// Random faults) appears once its answer is due, at its creation time, and
// a hidden charge (Sim.Hide) never does.
//
// The simulator gives each charge and refund a creation time when it makes
// it, under its lock, later than any given before (a clock that steps
// back is nudged forward by a nanosecond), so a record made while a client
// pages always sorts after every record already listed: the cursor, the
// (created, id) of the last record of a page, makes no page skip or repeat
// a record, and a new record inside the window is listed once, on a later
// page. A charge in flight is the exception the protocol warns of: it
// appears, at its earlier creation time, once its answer is due, behind a
// cursor that may have passed it.

// position is where a record sorts in a listing.
type position struct {
	created time.Time
	id      string
}

// before reports whether p sorts before q.
func (p position) before(q position) bool {
	if c := p.created.Compare(q.created); c != 0 {
		return c < 0
	}
	return p.id < q.id
}

// cursor is the opaque starting_after that resumes a listing after p.
func (p position) cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte(p.created.UTC().Format(time.RFC3339Nano) + " " + p.id))
}

func parseCursor(c string) (position, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return position{}, false
	}
	ts, id, ok := strings.Cut(string(b), " ")
	if !ok || id == "" {
		return position{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return position{}, false
	}
	return position{created: t, id: id}, true
}

// listQuery is a listing's request.
type listQuery struct {
	from, to time.Time
	limit    int
	after    *position
}

// parseListQuery reads a listing's parameters, or says what is wrong with
// them.
func parseListQuery(q url.Values) (listQuery, string) {
	for name := range q {
		switch name {
		case "created_gte", "created_lt", "limit", "starting_after":
		default:
			return listQuery{}, fmt.Sprintf("unknown parameter %q (a listing takes created_gte, created_lt, limit and starting_after)", name)
		}
	}
	var lq listQuery
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"created_gte", &lq.from}, {"created_lt", &lq.to}} {
		v := q.Get(p.name)
		if v == "" {
			return listQuery{}, "created_gte and created_lt are required to list (or reference, to look one up)"
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return listQuery{}, p.name + " must be an RFC 3339 time, such as 2026-01-02T15:04:05.123456Z"
		}
		*p.t = t.UTC()
	}
	if lq.to.Before(lq.from) {
		return listQuery{}, "created_lt must not be before created_gte"
	}
	lq.limit = refpsp.MaxListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > refpsp.MaxListLimit {
			return listQuery{}, fmt.Sprintf("limit must be a whole number from 1 to %d", refpsp.MaxListLimit)
		}
		lq.limit = n
	}
	if v := q.Get("starting_after"); v != "" {
		p, ok := parseCursor(v)
		if !ok {
			return listQuery{}, "starting_after is not a cursor this gateway returned"
		}
		lq.after = &p
	}
	return lq, ""
}

// pageOf is the page lq asks for of n records, which at(i) gives in
// listing order: each one's position, the item it is listed as, and
// whether the listing shows it.
func pageOf[T any](lq listQuery, n int, at func(i int) (position, T, bool)) refpsp.Page[T] {
	pg := refpsp.Page[T]{Data: []T{}}
	var last position
	for i := range n {
		p, item, ok := at(i)
		if !ok || p.created.Before(lq.from) || lq.after != nil && !lq.after.before(p) {
			continue
		}
		if !p.created.Before(lq.to) {
			break // records are in listing order: none after this is in the window
		}
		if len(pg.Data) == lq.limit {
			pg.HasMore = true
			break
		}
		pg.Data, last = append(pg.Data, item), p
	}
	if len(pg.Data) > 0 {
		pg.NextCursor = last.cursor()
	}
	return pg
}

// stampLocked is the creation time of a charge or refund made now: later
// than every one given before, so that records sort in the order made.
func (s *Sim) stampLocked() time.Time {
	now := time.Now().UTC()
	if !now.After(s.created) {
		now = s.created.Add(time.Nanosecond)
	}
	s.created = now
	return now
}

func (s *Sim) handleChargeList(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	lq, msg := parseListQuery(r.URL.Query())
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	pg := pageOf(lq, len(s.records), func(i int) (position, refpsp.ListedCharge, bool) {
		rec := s.records[i]
		if rec.hidden || rec.visibleAt.After(now) {
			return position{}, refpsp.ListedCharge{}, false
		}
		s.lapseLocked(i, now)
		c := s.records[i].Charge
		return position{c.Created, c.ID}, s.listedLocked(c), true
	})
	writeJSON(w, http.StatusOK, pg)
}

// listedLocked is c as a listing shows it.
func (s *Sim) listedLocked(c Charge) refpsp.ListedCharge {
	var refunded int64
	for _, rf := range s.refunds {
		if rf.ChargeID == c.ID && rf.Status == refpsp.RefundSucceeded {
			refunded += rf.Amount
		}
	}
	return refpsp.ListedCharge{ChargeObject: wireCharge(c), Created: c.Created, AmountRefunded: refunded}
}

func (s *Sim) handleRefundList(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "missing or wrong API key")
		return
	}
	lq, msg := parseListQuery(r.URL.Query())
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	pg := pageOf(lq, len(s.refunds), func(i int) (position, refpsp.ListedRefund, bool) {
		rf := s.refunds[i]
		if rf.visibleAt.After(now) {
			return position{}, refpsp.ListedRefund{}, false
		}
		return position{rf.Created, rf.ID}, refpsp.ListedRefund{RefundObject: rf.wire(now), ChargeID: rf.ChargeID, Created: rf.Created}, true
	})
	writeJSON(w, http.StatusOK, pg)
}
