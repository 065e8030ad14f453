package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
)

// leaseSQL pushes reconcile_at of the chosen orders forward by the lease and
// returns them with their current attempts. Its caller's statement commits
// the lease; a reconciler that dies holding it lets it expire.
const leaseSQL = `
), upd AS (
	UPDATE orders o SET reconcile_at = now() + $2::interval FROM due WHERE o.id = due.id RETURNING o.*
)
SELECT extract(epoch FROM now() - a.created_at)::float8, {order}, {attempt}
FROM upd JOIN charge_attempts a ON a.id = upd.current_attempt`

var (
	claimDueSQL = `
WITH due AS (
	SELECT id FROM orders WHERE state = 'CHARGING' AND reconcile_at <= now()
	ORDER BY reconcile_at LIMIT $1 FOR UPDATE SKIP LOCKED` + leaseTail()
	claimOneSQL = `
WITH due AS (
	SELECT id FROM orders WHERE state = 'CHARGING' AND id = $1 FOR UPDATE` + leaseTail()
)

func leaseTail() string {
	return replaceAll(leaseSQL, "{order}", orderCols("upd"), "{attempt}", attemptCols("a"))
}

// ClaimDue leases up to limit CHARGING orders whose reconcile_at has come,
// oldest first, skipping those another reconciler holds.
func (s *Store) ClaimDue(ctx context.Context, limit int, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, claimDueSQL, limit, lease)
}

// ClaimOrder leases one CHARGING order now, due or not (an operator asked).
// It returns no Due when the order is not CHARGING.
func (s *Store) ClaimOrder(ctx context.Context, id string, lease time.Duration) ([]order.Due, error) {
	return s.lease(ctx, claimOneSQL, id, lease)
}

func (s *Store) lease(ctx context.Context, sql string, arg any, lease time.Duration) ([]order.Due, error) {
	var due []order.Due
	err := retry(ctx, func() error {
		due = due[:0]
		rows, err := s.pool.Query(ctx, sql, arg, lease)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d   order.Due
				r   orderRow
				age float64
			)
			if err := rows.Scan(append(append([]any{&age}, r.dest()...), attemptDest(&d.Attempt)...)...); err != nil {
				return err
			}
			d.Order, d.AttemptAge = r.order(), time.Duration(age*float64(time.Second))
			due = append(due, d)
		}
		return rows.Err()
	})
	return due, err
}

// settleManySQL is settleSQL for many settlements at once: one statement,
// so one round trip and one commit however many orders it settles. Row i
// of st is sts[i-1]. Each order's guard and writes are settleSQL's.
//
// locked takes the orders' row locks in id order before anything is
// written, so that two statements settling overlapping sets of orders (a
// reconciler that outlived its lease and the one that took the orders over)
// wait for each other instead of deadlocking. As in claimSQL, the guard is
// checked once, on the latest versions that locked holds, not on upd's scan,
// whose snapshot can predate a settle that locked waited for.
const settleManySQL = `
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
	RETURNING st.*
), att AS (
	UPDATE charge_attempts a SET outcome = upd.outcome, decline_code = upd.decline_code,
		gateway_charge_id = upd.charge_id,
		settled_at = CASE WHEN upd.to_state = 'CHARGING' THEN NULL ELSE now() END
	FROM upd WHERE a.id = upd.attempt_id
), ev AS (
	INSERT INTO order_events (order_id, from_state, to_state, event, actor, reason, attempt_id)
	SELECT order_id, 'CHARGING', to_state, event, actor, reason, attempt_id FROM upd WHERE event <> ''
)
SELECT i FROM upd`

// SettleMany is Settle for many orders in one statement and one commit. It
// reports, for each settlement, whether its guard held and it was applied.
// No order may appear twice in sts: which of two settlements of one order
// a single UPDATE would apply is undefined, so SettleMany refuses the call.
func (s *Store) SettleMany(ctx context.Context, sts []order.Settlement) ([]bool, error) {
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
			return nil, fmt.Errorf("settle many: order %s appears twice", st.OrderID)
		}
		seen[st.OrderID] = true
		to[i] = string(st.To)
		if st.Event == "" {
			to[i] = string(order.StateCharging)
		}
		orderIDs[i], attIDs[i], recheck[i], checked[i] = st.OrderID, st.AttemptID, st.RecheckIn, st.Checked
		lastErr[i], outcome[i] = truncate(st.LastError, 1000), string(st.Result.Outcome)
		decline[i], chargeID[i] = truncate(st.Result.DeclineCode, 255), truncate(st.Result.ChargeID, 255)
		event[i], actor[i], reason[i] = string(st.Event), st.Actor, truncate(st.Reason, 1000)
	}
	applied := make([]bool, n)
	err := retry(ctx, func() error {
		clear(applied)
		rows, err := s.pool.Query(ctx, settleManySQL, orderIDs, attIDs, to, recheck, checked, lastErr,
			outcome, decline, chargeID, event, actor, reason)
		if err != nil {
			return err
		}
		var i int
		_, err = pgx.ForEachRow(rows, []any{&i}, func() error {
			applied[i-1] = true
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}
