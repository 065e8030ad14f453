package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// settleSQL records gateways' answers for one or many orders in one
// statement, so one round trip and one commit however many it settles. Row
// i of st is the i-th settlement. Each row is guarded by its order still
// being CHARGING for its attempt: of a late server response and a
// reconciler, exactly one wins and writes one event.
//
// locked takes the orders' row locks in id order before anything is
// written, so that two statements settling overlapping sets of orders wait
// for each other instead of deadlocking. As in claimSQL, the guard is
// checked once, on the latest versions that locked holds, not on upd's
// scan, whose snapshot can predate a settle that locked waited for.
var settleSQL = `
WITH st AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::interval[], $5::bool[], $6::text[],
		$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[]) WITH ORDINALITY
		AS st(order_id, attempt_id, to_state, recheck_in, checked, last_error,
			outcome, decline_code, charge_id, event, actor, reason, i)
), locked AS MATERIALIZED (
	SELECT id, state, current_attempt FROM orders WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
), upd AS (
	UPDATE orders o SET
		state = st.to_state,
		reconcile_at = CASE WHEN st.to_state = 'CHARGING' THEN now() + st.recheck_in END,
		reconcile_count = o.reconcile_count + st.checked::int,
		last_error = st.last_error,
		updated_at = CASE WHEN st.to_state = 'CHARGING' THEN o.updated_at ELSE now() END
	FROM locked JOIN st ON st.order_id = locked.id
	WHERE o.id = locked.id AND locked.state = 'CHARGING' AND locked.current_attempt = st.attempt_id
	RETURNING o.*, st.i, st.outcome, st.decline_code, st.charge_id, st.event, st.actor, st.reason
), att AS (
	UPDATE charge_attempts a SET outcome = upd.outcome, decline_code = upd.decline_code,
		gateway_charge_id = upd.charge_id,
		settled_at = CASE WHEN upd.state = 'CHARGING' THEN NULL ELSE now() END
	FROM upd WHERE a.id = upd.current_attempt
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT id, 'CHARGING', state, event, actor, reason, current_attempt FROM upd WHERE event <> ''
)
SELECT upd.i, ` + orderCols("upd") + ` FROM upd`

// settleOneSQL is settleSQL for one settlement, which is every settle
// without load. At one client settleSQL cost 0.4 ms more per order (p50,
// settle bench): PostgreSQL plans it afresh at each run (knowing the
// arrays' lengths when it plans for their values, it finds a plan for
// unknown values always dearer), and it locks each row before updating it.
// This statement's generic plan is as good as any.
var settleOneSQL = `
WITH upd AS (
	UPDATE orders SET
		state = $3,
		reconcile_at = CASE WHEN $3 = 'CHARGING' THEN now() + $4::interval END,
		reconcile_count = reconcile_count + $5::bool::int,
		last_error = $6,
		updated_at = CASE WHEN $3 = 'CHARGING' THEN updated_at ELSE now() END
	WHERE id = $1 AND state = $13 AND current_attempt = $2
	RETURNING *
), att AS (
	UPDATE charge_attempts SET outcome = $7, decline_code = $8, gateway_charge_id = $9,
		settled_at = CASE WHEN $3 = 'CHARGING' THEN NULL ELSE now() END
	WHERE id = $2 AND EXISTS (SELECT 1 FROM upd)
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT id, $13, state, $10, $11, $12, $2 FROM upd WHERE $10 <> ''
)
SELECT 1, ` + orderCols("upd") + ` FROM upd`

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
	orders, applied := make([]order.Order, n), make([]bool, n)
	err := retry(ctx, func() error {
		clear(orders)
		clear(applied)
		var (
			rows pgx.Rows
			err  error
		)
		if n == 1 {
			// The guard's state is a parameter, not a literal: see bench/floor.sql.
			rows, err = s.pool.Query(ctx, settleOneSQL, orderIDs[0], attIDs[0], to[0], recheck[0], checked[0], lastErr[0],
				outcome[0], decline[0], chargeID[0], event[0], actor[0], reason[0], order.StateCharging)
		} else {
			rows, err = s.pool.Query(ctx, settleSQL, orderIDs, attIDs, to, recheck, checked, lastErr,
				outcome, decline, chargeID, event, actor, reason)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i int
				r orderRow
			)
			if err := rows.Scan(append([]any{&i}, r.dest()...)...); err != nil {
				return err
			}
			orders[i-1], applied[i-1] = r.order(), true
		}
		return rows.Err()
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
