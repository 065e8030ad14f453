package order

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// maxRecentLookups bounds the answers lookupGroup keeps for reuse; past
// it, the expired ones are dropped, and if that is not enough, all.
const maxRecentLookups = 10000

// lookupGroup coalesces the Service's gateway lookups of attempts that
// wait for the customer (REQUIRES_ACTION), within one process: one lookup
// of an attempt is in flight at a time, and the callers that come meanwhile
// share its answer; an answer that settles nothing (the customer still has
// to act, or the gateway could not say) is reused for Config.LookupReuse.
// The key holds the order's reconcile_at as read from the database, which a
// gateway's event and every reconciler check move: an answer is reused
// only while the order's row is as it was when the answer was got. Across
// processes nothing is shared; the request budget bounds what they send.
type lookupGroup struct {
	reuse  time.Duration
	flight singleflight.Group

	mu     sync.Mutex
	recent map[string]recentLookup // guarded by mu
}

type recentLookup struct {
	res Result
	err error
	at  time.Time
}

// lookupKey names one attempt of an order as it stands in the database.
func lookupKey(o Order, a Attempt) string {
	return o.AttemptGateway(a) + "/" + a.ID + "/" + strconv.FormatInt(o.ReconcileAt.UnixNano(), 10)
}

// do returns a recent answer for key, or the answer of the lookup in
// flight for it, or makes the lookup with call.
func (g *lookupGroup) do(key string, call func() (Result, error)) (Result, error) {
	if r, ok := g.recentAnswer(key); ok {
		return r.res, r.err
	}
	v, err, _ := g.flight.Do(key, func() (any, error) {
		res, err := call()
		// An answer that settles the order is not kept: the settle
		// changes the order, and the next caller reads that instead. A
		// lookup the budget refused learned nothing worth keeping.
		if g.reuse > 0 && !settles(res, err) && !errors.Is(err, ErrBudgetExhausted) {
			g.remember(key, recentLookup{res: res, err: err, at: time.Now()})
		}
		return res, err
	})
	res, _ := v.(Result)
	return res, err
}

// settles reports whether a lookup's answer settles its attempt.
func settles(res Result, err error) bool {
	return err == nil && (res.Outcome == OutcomeSucceeded || res.Outcome == OutcomeDeclined)
}

func (g *lookupGroup) recentAnswer(key string) (recentLookup, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.recent[key]
	if !ok || time.Since(r.at) >= g.reuse {
		return recentLookup{}, false
	}
	return r, true
}

func (g *lookupGroup) remember(key string, r recentLookup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recent) >= maxRecentLookups {
		for k, old := range g.recent {
			if time.Since(old.at) >= g.reuse {
				delete(g.recent, k)
			}
		}
		if len(g.recent) >= maxRecentLookups {
			clear(g.recent)
		}
	}
	g.recent[key] = r
}

// lookupWaiting asks o's gateway about attempt a, which waits for the
// customer, through the lookup group and within the gateway's request
// budget.
func (s *Service) lookupWaiting(ctx context.Context, gw Gateway, o Order, a Attempt) (Result, error) {
	return s.lookups.do(lookupKey(o, a), func() (Result, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.GatewayTimeout)
		defer cancel()
		if err := s.cfg.Budgets[o.AttemptGateway(a)].WaitLookup(ctx); err != nil {
			// No call was made, so no gateway call's line: a storm of
			// polls past the budget must not flood the logs either.
			return Result{}, err
		}
		start := time.Now()
		res, err := gw.Lookup(ctx, LookupRequest(o, a))
		GatewayCall{Op: "lookup", Gateway: o.AttemptGateway(a), OrderID: o.ID, AttemptID: a.ID, Outcome: res.Outcome,
			Latency: time.Since(start), Err: err}.Log(ctx, s.log)
		return res, err
	})
}
