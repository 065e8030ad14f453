package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// settleSQL records gateways' answers for one or many orders in one
// statement, guarded, in one round trip and one commit; settleOneSQL is the
// same statement for one settlement, generated from it.
//
//go:generate go run gen_onerow.go sql/settle.sql sql/settle_one.sql
//go:embed sql/settle.sql
var settleSQL string

//go:embed sql/settle_one.sql
var settleOneSQL string

// settledRow is what settle.sql returns: the i-th settlement's order (from
// 1), for each settlement whose guard held.
type settledRow struct {
	I int `db:"i"`
	orderRow
}

// settle runs settleSQL. It returns, for each settlement, the order as it
// left it and whether its guard held. No order may appear twice in sts:
// which of two settlements of one order a single UPDATE would apply is
// undefined, so settle refuses the call.
func (s *Store) settle(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	var (
		n        = len(sts)
		seen     = make(map[string]bool, n)
		orderIDs = make([]string, n)
		attIDs   = make([]string, n)
		to       = make([]string, n)
		recheck  = make([]time.Duration, n)
		checked  = make([]bool, n)
		lastErr  = make([]string, n)
		outcome  = make([]string, n)
		decline  = make([]string, n)
		chargeID = make([]string, n)
		event    = make([]string, n)
		actor    = make([]string, n)
		reason   = make([]string, n)
	)
	for i, st := range sts {
		if seen[st.OrderID] {
			return nil, nil, fmt.Errorf("settle: order %s appears twice", st.OrderID)
		}
		seen[st.OrderID] = true
		to[i] = string(st.To)
		if st.Event == "" {
			to[i] = string(order.StateCharging)
		}
		orderIDs[i], attIDs[i], recheck[i], checked[i] = st.OrderID, st.AttemptID, st.RecheckIn, st.Checked
		lastErr[i], outcome[i] = truncate(st.LastError, 1000), string(st.Result.Outcome)
		decline[i], chargeID[i] = truncate(st.Result.DeclineCode, 255), truncate(st.Result.ChargeID, 255)
		event[i], actor[i], reason[i] = string(st.Event), string(st.Actor), truncate(st.Reason, 1000)
	}
	args := pgx.StrictNamedArgs{
		"order_id": orderIDs, "attempt_id": attIDs, "to_state": to, "recheck_in": recheck, "checked": checked,
		"last_error": lastErr, "outcome": outcome, "decline_code": decline, "charge_id": chargeID,
		"event": event, "actor": actor, "reason": reason,
	}
	sql := settleSQL
	if n == 1 {
		// The one-row form takes each array's only element.
		sql = settleOneSQL
		for k, v := range args {
			args[k] = reflect.ValueOf(v).Index(0).Interface()
		}
	}
	orders, applied := make([]order.Order, n), make([]bool, n)
	err := retry(ctx, func() error {
		clear(orders)
		clear(applied)
		rows, err := queryAll[settledRow](ctx, s.pool, sql, args)
		if err != nil {
			return err
		}
		for _, r := range rows {
			orders[r.I-1], applied[r.I-1] = r.order(), true
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return orders, applied, nil
}

// maxSettleGroup bounds the settlements that share one statement.
const maxSettleGroup = 64

// settleGroup lets concurrent Settle calls share statements, as
// PostgreSQL's group commit lets transactions share a WAL flush: one
// statement is in flight at a time, and the calls that arrive meanwhile
// wait and go together in the next one, which the first of them leads. A
// call alone runs at once, so nothing waits when there is no load; under
// load an order's settle waits at most for the statement in progress, and
// many orders share a round trip and a commit.
type settleGroup struct {
	mu      sync.Mutex
	running bool          // a leader is running a statement; queue waits for it
	queue   []*settleCall // invariant: empty whenever running is false
}

// settleCall is one Settle waiting in a group.
type settleCall struct {
	st  order.Settlement
	o   order.Order
	ok  bool
	err error
	// done says that o, ok and err are set; wake without done means "lead
	// the next statement". Each call is woken once.
	done bool
	wake chan struct{}
}

// Settle implements order.Store: the settlement shares a statement with
// whatever other settlements are waiting (see settleGroup).
func (s *Store) Settle(ctx context.Context, st order.Settlement) (order.Order, bool, error) {
	c := &settleCall{st: st, wake: make(chan struct{}, 1)}
	g := &s.settles
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if !lead {
		<-c.wake
		if c.done {
			return c.o, c.ok, c.err
		}
	}
	// Lead: c is first in the queue. Take it and those behind it, one
	// settlement per order; the rest wait for the next statement.
	g.mu.Lock()
	var (
		group []*settleCall
		rest  []*settleCall
		seen  = map[string]bool{}
	)
	for _, q := range g.queue {
		if len(group) < maxSettleGroup && !seen[q.st.OrderID] {
			seen[q.st.OrderID] = true
			group = append(group, q)
		} else {
			rest = append(rest, q)
		}
	}
	g.queue = rest
	g.mu.Unlock()

	// The group's statement must not fail because the leader's caller went
	// away: the others are waiting for it.
	s.settleGroupNow(context.WithoutCancel(ctx), group)
	for _, q := range group {
		if q != c {
			q.wake <- struct{}{}
		}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.mu.Unlock()
		next.wake <- struct{}{}
	} else {
		g.running = false
		g.mu.Unlock()
	}
	return c.o, c.ok, c.err
}

// settleGroupNow settles a group in one statement. If the statement fails
// and the group has several settlements, each is tried alone, so that no
// settlement fails for another's sake.
func (s *Store) settleGroupNow(ctx context.Context, group []*settleCall) {
	sts := make([]order.Settlement, len(group))
	for i, q := range group {
		sts[i] = q.st
	}
	orders, applied, err := s.settle(ctx, sts)
	if err != nil && len(group) > 1 && !errors.Is(err, order.ErrUnavailable) {
		for _, q := range group {
			s.settleGroupNow(ctx, []*settleCall{q})
		}
		return
	}
	for i, q := range group {
		q.done = true
		if q.err = err; err == nil {
			q.o, q.ok = orders[i], applied[i]
		}
	}
}
