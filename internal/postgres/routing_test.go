package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// TestCheckoutIsSingleShardOnCitus: on Citus, every statement of the
// checkout path (charges, refunds, captures and voids), and each lease of
// one due capture, void or hold of the reconciler's, runs as one task on
// the worker that holds its merchant's shard: a router-planned statement, or a call that Citus delegates to
// that worker whole. A statement that Citus plans in several steps through
// the coordinator (a CTE that inserts, a condition that prunes no shard)
// shows a distributed subplan or more than one task in its plan, and costs
// tens of milliseconds there instead of one round trip.
func TestCheckoutIsSingleShardOnCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.CitusPool(t)
	m := order.DefaultMerchant
	id, att, ref := uuid.NewString(), uuid.NewString(), uuid.NewString()
	capture, void := uuid.NewString(), uuid.NewString()
	before := time.Now().Add(time.Hour)
	one := func(v any) any { return v }
	args := map[string]pgx.StrictNamedArgs{
		"create_order": {"id": id, "merchant_id": m, "merchant_reference": "r", "amount_minor": 1250, "currency": "GBP",
			"payment_method": "tok_ok", "gateway": "sim", "state": order.StatePending, "event": order.EventCreate,
			"capture_mode": order.CaptureManual, "routes": ""},
		"claim": {"order_id": id, "merchant_id": m, "request_id": "q", "attempt_id": att, "payment_method": "",
			"customer": "", "from_state": order.StatePending, "to_state": order.StateCharging, "lease": time.Minute,
			"event": order.EventCharge, "actor": order.ActorAPI,
			"gateway": "", "cascade_after": "", "skipped": "", "reason": "",
			"check_follows": false, "follows": ""},
		"create_claimed": {"id": id, "merchant_id": m, "merchant_reference": "r", "amount_minor": 1250, "currency": "GBP",
			"payment_method": "tok_ok", "gateway": "sim", "to_state": order.StateCharging, "attempt_id": att,
			"lease": time.Minute, "request_id": "q", "from_state": order.StatePending, "create_event": order.EventCreate,
			"claim_event": order.EventCharge, "actor": order.ActorAPI, "customer": "", "capture_mode": order.CaptureManual,
			"routes": "", "skipped": ""},
		"settle": {"merchant_id": m, "order_id": []uuid.UUID{uuid.MustParse(id)}, "attempt_id": []uuid.UUID{uuid.MustParse(att)},
			"to_state": []string{"PAID"}, "recheck_in": []time.Duration{time.Minute}, "checked": []bool{false},
			"last_error": []string{""}, "outcome": []string{"succeeded"}, "decline_code": []string{""},
			"charge_id": []string{"ch"}, "event": []string{"succeed"}, "actor": []string{"api"}, "reason": []string{""},
			"from_state": []string{"CHARGING"}, "authorized_minor": []int64{1250},
			"capture_before": []*time.Time{&before}, "lease": []*time.Time{nil}},
		"transition": {"merchant_id": m, "id": id, "from_state": "PENDING", "to_state": "CANCELED", "outcome": "",
			"decline_code": "", "charge_id": "", "event": "cancel", "actor": "api", "reason": ""},
		"refund_claim": {"order_id": id, "merchant_id": m, "request_id": "q", "refund_id": ref, "amount_minor": 0,
			"reason": "", "actor": "api", "lease": time.Minute, "refundable": []string{"PAID"}, "from_state": "PENDING",
			"to_state": "REFUNDING", "event": "refund", "create_event": "create"},
		"refund_settle": {"merchant_id": m, "refund_id": ref, "from_state": "REFUNDING", "to_state": "SUCCEEDED",
			"outcome": one("succeeded"), "decline_code": "", "gateway_refund_id": "re", "recheck_in": time.Minute,
			"checked": false, "last_error": "", "event": "succeed", "actor": "api", "reason": "",
			"partial_event": "refund_partially", "partial_to": "PARTIALLY_REFUNDED", "full_event": "refund_fully",
			"full_to": "REFUNDED", "lease": (*time.Time)(nil)},
		"record_gateway_event": {"merchant_id": m, "matched_id": att, "about": "", "reference": att, "gateway": "sim",
			"event_id": "ev", "event_type": "charge.succeeded", "object_id": "ch", "charge_id": "ch", "succeeded": true,
			"outcome": "succeeded", "decline_code": "", "amount_minor": int64(1250), "currency": "GBP",
			"occurred_at": time.Now(), "failed_later": false},
		"capture_claim": {"order_id": id, "merchant_id": m, "request_id": "q", "capture_id": capture, "amount_minor": 0,
			"final": true, "reason": "", "actor": "api", "lease": time.Minute, "capturable": []string{"AUTHORIZED"},
			"from_state": "PENDING", "to_state": "CAPTURING", "event": "start", "create_event": "create"},
		"capture_settle": {"merchant_id": m, "capture_id": capture, "from_state": "CAPTURING", "to_state": "SUCCEEDED",
			"outcome": one("succeeded"), "decline_code": "", "gateway_capture_id": "cp", "recheck_in": time.Minute,
			"checked": false, "last_error": "", "event": "succeed", "actor": "api", "reason": "",
			"capture_event": "capture", "paid_state": "PAID", "captured_event": "captured",
			"failed_event": "capture_failed", "lease": (*time.Time)(nil)},
		"void_claim": {"order_id": id, "merchant_id": m, "request_id": "q", "void_id": void, "reason": "",
			"actor": "api", "lease": time.Minute, "authorized": "AUTHORIZED", "from_state": "PENDING",
			"to_state": "VOIDING", "event": "start", "create_event": "create"},
		"void_settle": {"merchant_id": m, "void_id": void, "from_state": "VOIDING", "to_state": "SUCCEEDED",
			"outcome": one("succeeded"), "decline_code": "", "recheck_in": time.Minute, "checked": false,
			"last_error": "", "event": "succeed", "actor": "api", "reason": "", "void_event": "void",
			"voided_state": "VOIDED"},
		"expire_hold": {"merchant_id": m, "order_id": id, "attempt_id": att, "to_state": "EXPIRED", "event": "expire",
			"actor": "reconciler", "reason": ""},
		"recheck_hold":       {"merchant_id": m, "order_id": id, "recheck_in": time.Minute, "last_error": ""},
		"order_capture":      {"merchant_id": m, "capture_id": capture},
		"order_void":         {"merchant_id": m, "void_id": void},
		"lease_capture":      {"merchant_id": m, "id": capture, "lease": time.Minute},
		"lease_void":         {"merchant_id": m, "id": void, "lease": time.Minute},
		"lease_hold":         {"merchant_id": m, "id": id, "lease": time.Minute},
		"order_by_id":        {"id": id, "merchant_id": m},
		"order_by_reference": {"merchant_id": m, "merchant_reference": "r"},
		"find_orders":        {"merchant_id": m, "query": "r", "uuid": id},
		"attempt_by_id":      {"merchant_id": m, "id": att},
		"order_attempt":      {"merchant_id": m, "order_id": id, "attempt_id": att},
		"order_routing":      {"merchant_id": m, "order_id": id},
		"order_refund":       {"merchant_id": m, "refund_id": ref},
		"lock_order":         {"merchant_id": m, "id": id},
		"refund_by_id":       {"merchant_id": m, "id": ref},
		"order_refunds":      {"merchant_id": m, "order_id": id},
		"list_events":        {"merchant_id": m, "after_txid": "0", "after_id": 0, "limit": 10},
	}
	for name, sql := range postgres.CheckoutStatementsOnCitus {
		a, ok := args[name]
		if !ok {
			t.Errorf("%s: no arguments in this test", name)
			continue
		}
		// EXPLAIN plans the statement without running it; Citus plans a
		// statement with arguments for their values, as it does when the
		// store runs it.
		rows, _ := pool.Query(ctx, "EXPLAIN "+sql, a)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		plan := strings.Join(lines, "\n")
		if !strings.HasPrefix(plan, "Custom Scan (Citus Adaptive)") || !strings.Contains(plan, "Task Count: 1\n") ||
			strings.Contains(plan, "Subplan") {
			t.Errorf("%s is not one task on one worker on Citus:\n%s", name, plan)
		}
	}
}

// TestCallsRunOnTheWorkerOnCitus: a connection on which Citus has stopped
// delegating function calls (here made so by a statement that Citus fails
// to plan with its CTEs inlined, as record_deliveries.sql once was) does
// not run the checkout path's calls on the coordinator: the store retries
// them on another connection, and every event is drawn on the merchant's
// worker, whose identity values start at its group id shifted left 48
// bits (the coordinator's, group 0, start at 1).
func TestCallsRunOnTheWorkerOnCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := postgres.Open(ctx, postgrestest.CitusURL(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := postgres.NewStore(pool)
	// record_deliveries.sql as it was: its CTEs inlined, Citus fails to
	// plan it, and falls back to planning them apart.
	if _, err := pool.Exec(ctx, `WITH r AS (
		SELECT * FROM unnest('{a,b}'::text[], '{1,2}'::bigint[], '{delivered,retry}'::text[], '{200,500}'::int[],
			'{1 min,1 min}'::interval[]) AS r(merchant_id, id, outcome, status, backoff)
	), t AS (
		SELECT r.*, now() AS now, now() + r.backoff AS retry_at, now() + r.backoff - '1 day'::interval AS cutoff FROM r
	), upd AS (
		UPDATE order_events e SET
			deliver_at = CASE WHEN t.outcome IN ('retry', 'untried') AND e.created_at > t.cutoff THEN t.retry_at END,
			delivered_at = CASE WHEN t.outcome = 'delivered' THEN t.now ELSE e.delivered_at END,
			last_status = t.status
		FROM t WHERE e.merchant_id = t.merchant_id AND e.id = t.id AND e.deliver_at IS NOT NULL
		RETURNING e.id
	)
	SELECT id FROM upd`); err != nil {
		t.Fatal(err)
	}
	o, _ := chargingOrder(t, s, "ref-on-worker")
	var onCoordinator int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM order_events WHERE merchant_id = $1 AND order_id = $2 AND id < 1::bigint << 48`,
		o.MerchantID, o.ID).Scan(&onCoordinator); err != nil {
		t.Fatal(err)
	}
	if onCoordinator != 0 {
		t.Fatalf("%d of the order's events were written on the coordinator, want none", onCoordinator)
	}
}
