package postgres

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/batch"
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

// citusSettleSQL is settle.sql on Citus, for one merchant's settlements: a
// call that Citus runs whole on the merchant's worker.
//
//go:embed sql/citus_settle.sql
var citusSettleSQL string

// settledRow is what settle.sql returns: the i-th settlement's order (from
// 1), for each settlement whose guard held.
type settledRow struct {
	I int `db:"i"`
	orderRow
}

// SettleMany records the settlements sts in one statement and one commit
// (on Citus, one call and one commit per merchant), each guarded as
// Settle's is. It returns, for each settlement, the order as
// it left it and whether its guard held. No order may appear twice in sts:
// which of two settlements of one order a single UPDATE would apply is
// undefined, so SettleMany refuses the call.
func (s *Store) SettleMany(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	n := len(sts)
	seen := make(map[string]bool, n)
	for _, st := range sts {
		if seen[st.OrderID] {
			return nil, nil, fmt.Errorf("settle: order %s appears twice", st.OrderID)
		}
		seen[st.OrderID] = true
	}
	citus, err := s.onCitus(ctx)
	if err != nil {
		return nil, nil, err
	}
	if citus {
		return s.settleEachMerchant(ctx, sts)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	args, err := settleArgs(sts, all)
	if err != nil {
		return nil, nil, err
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
	err = retry(ctx, func() error {
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

// settleArgs returns settle.sql's arguments for the settlements sts[i] of
// idx, in that order: one array per column.
func settleArgs(sts []order.Settlement, idx []int) (pgx.StrictNamedArgs, error) {
	var (
		n        = len(idx)
		merchant = make([]string, n)
		orderIDs = make([]string, n)
		attIDs   = make([]string, n)
		to       = make([]string, n)
		from     = make([]string, n)
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
	for i, j := range idx {
		st := sts[j]
		from[i] = string(cmp.Or(st.From, order.StateCharging))
		to[i] = string(st.To)
		if st.Event == "" {
			to[i] = from[i]
		}
		merchant[i], orderIDs[i], attIDs[i], recheck[i], checked[i] = st.MerchantID, st.OrderID, st.AttemptID, st.RecheckIn, st.Checked
		lastErr[i], outcome[i] = truncate(st.LastError, 1000), string(st.Result.Outcome)
		decline[i], chargeID[i] = truncate(st.Result.DeclineCode, 255), truncate(st.Result.ChargeID, 255)
		event[i], actor[i], reason[i] = string(st.Event), string(st.Actor), truncate(st.Reason, 1000)
	}
	orderUUIDs, err := uuids(orderIDs)
	if err != nil {
		return nil, fmt.Errorf("settle: order %w", err)
	}
	attUUIDs, err := uuids(attIDs)
	if err != nil {
		return nil, fmt.Errorf("settle: attempt %w", err)
	}
	return pgx.StrictNamedArgs{
		"merchant_id": merchant, "order_id": orderUUIDs, "attempt_id": attUUIDs, "to_state": to, "recheck_in": recheck, "checked": checked,
		"last_error": lastErr, "outcome": outcome, "decline_code": decline, "charge_id": chargeID,
		"event": event, "actor": actor, "reason": reason, "from_state": from,
	}, nil
}

// maxSettleGroup bounds the settlements that share one statement.
const maxSettleGroup = 64

// settled is one settlement's result in a group: the order as the
// statement left it, and whether its guard held.
type settled struct {
	order   order.Order
	applied bool
}

// newSettles returns the batcher of s's Settle calls: concurrent settles
// share a statement and a commit, one settlement per order in each. A group
// whose statement fails is settled again one by one, so that a settlement
// fails only for its own sake, unless the database is unavailable, which
// would fail each alone too.
func newSettles(s *Store) *batch.Batcher[string, order.Settlement, settled] {
	return batch.New(batch.Config[string, order.Settlement, settled]{
		Run: func(ctx context.Context, sts []order.Settlement) ([]settled, error) {
			orders, applied, err := s.SettleMany(ctx, sts)
			if err != nil {
				return nil, err
			}
			out := make([]settled, len(sts))
			for i := range out {
				out[i] = settled{orders[i], applied[i]}
			}
			return out, nil
		},
		Key:     func(st order.Settlement) string { return st.OrderID },
		MaxSize: maxSettleGroup,
		Isolate: func(err error) bool { return !errors.Is(err, order.ErrUnavailable) },
	})
}

// Settle implements order.Store: the settlement shares a statement with
// whatever other settlements are waiting (see package batch).
func (s *Store) Settle(ctx context.Context, st order.Settlement) (order.Order, bool, error) {
	citus, err := s.onCitus(ctx)
	if err != nil {
		return order.Order{}, false, err
	}
	settles := s.settles
	if citus {
		settles = s.merchantSettles(st.MerchantID)
	}
	r, err := settles.Do(ctx, st)
	return r.order, r.applied, err
}

// merchantSettles returns the batcher of merchant's settles on Citus: a
// group holds one merchant's settlements only, so that its statement is one
// call on the merchant's worker and one local commit there (a group of
// several merchants would lock rows on several workers and commit in two
// phases). One batcher per merchant that has settled since the process
// started; merchants are API clients, few.
func (s *Store) merchantSettles(merchant string) *batch.Batcher[string, order.Settlement, settled] {
	if b, ok := s.citusSettles.Load(merchant); ok {
		return b.(*batch.Batcher[string, order.Settlement, settled])
	}
	b, _ := s.citusSettles.LoadOrStore(merchant, newSettles(s))
	return b.(*batch.Batcher[string, order.Settlement, settled])
}

// settleEachMerchant is SettleMany on Citus: one call per merchant, each
// run whole on the merchant's worker (citus_settle.sql). A merchant's
// settlements commit together; different merchants' do not.
func (s *Store) settleEachMerchant(ctx context.Context, sts []order.Settlement) ([]order.Order, []bool, error) {
	orders, applied := make([]order.Order, len(sts)), make([]bool, len(sts))
	byMerchant := map[string][]int{}
	var merchants []string
	for i, st := range sts {
		if _, ok := byMerchant[st.MerchantID]; !ok {
			merchants = append(merchants, st.MerchantID)
		}
		byMerchant[st.MerchantID] = append(byMerchant[st.MerchantID], i)
	}
	for _, m := range merchants {
		idx := byMerchant[m]
		// The function takes the merchant once, as the argument Citus
		// routes the call by.
		args, err := settleArgs(sts, idx)
		if err != nil {
			return nil, nil, err
		}
		args["merchant_id"] = m
		err = retry(ctx, func() error {
			for _, i := range idx {
				orders[i], applied[i] = order.Order{}, false
			}
			rows, err := queryAll[settledRow](ctx, s.pool, citusSettleSQL, args)
			if err != nil {
				return err
			}
			for _, r := range rows {
				i := idx[r.I-1]
				orders[i], applied[i] = r.order(), true
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return orders, applied, nil
}
