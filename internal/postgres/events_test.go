package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// testEventsAreTheHistory: each transition a merchant cares about is an
// event of the right type, written by the transition's own statement, with
// the order as it stood and its place in the order's history; creations and
// claims are not events.
func testEventsAreTheHistory(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)

	paid, paidAtt := chargingOrder(t, s, "ref-paid")
	failed, failedAtt := chargingOrder(t, s, "ref-failed")
	review, reviewAtt := chargingOrder(t, s, "ref-review")
	canceled, err := s.CreateOrder(ctx, newOrder("ref-canceled"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.SettleMany(ctx, []order.Settlement{
		{MerchantID: order.DefaultMerchant, OrderID: paid.ID, AttemptID: paidAtt, Event: order.EventSucceed, To: order.StatePaid,
			Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, Actor: "test"},
		{MerchantID: order.DefaultMerchant, OrderID: failed.ID, AttemptID: failedAtt, Event: order.EventFail, To: order.StatePending,
			Result: order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "card_declined"}, Actor: "test"},
		{MerchantID: order.DefaultMerchant, OrderID: review.ID, AttemptID: reviewAtt, Event: order.EventEscalate, To: order.StateNeedsReview,
			Result: order.Result{Outcome: order.OutcomeUnknown}, Actor: "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, order.ForMerchant(order.DefaultMerchant), canceled.ID, func(o order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}

	evs := listEvents(t, s, order.EventCursor{}, 100, 4)
	want := map[string]struct {
		typ string
		seq int64
	}{
		paid.ID: {"order.paid", 3}, failed.ID: {"order.payment_failed", 3},
		review.ID: {"order.needs_review", 3}, canceled.ID: {"order.canceled", 2},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for _, e := range evs {
		w := want[e.Order.ID]
		if e.Type != w.typ || e.Sequence != w.seq {
			t.Errorf("order %s: event %s seq %d, want %s seq %d", e.Order.ID, e.Type, e.Sequence, w.typ, w.seq)
		}
		var body struct {
			ID    string `json:"id"`
			Type  string `json:"type"`
			Order struct {
				State           string `json:"state"`
				GatewayChargeID string `json:"gateway_charge_id"`
				DeclineCode     string `json:"decline_code"`
			} `json:"order"`
		}
		if err := json.Unmarshal(e.Payload(), &body); err != nil {
			t.Fatal(err)
		}
		if body.ID != e.ID() || body.Type != e.Type {
			t.Errorf("payload %s does not name its event %s", e.Payload(), e.ID())
		}
		switch e.Order.ID {
		case paid.ID:
			if body.Order.State != "PAID" || body.Order.GatewayChargeID != "ch_1" {
				t.Errorf("paid payload: %s", e.Payload())
			}
		case failed.ID:
			if body.Order.State != "PENDING" || body.Order.DeclineCode != "card_declined" {
				t.Errorf("failed payload: %s", e.Payload())
			}
		}
	}

	// Paging: a cursor returns what comes after it, and nothing twice.
	first := listEvents(t, s, order.EventCursor{}, 2, 2)
	rest := listEvents(t, s, first[1].Cursor, 100, 2)
	if len(first) != 2 || len(rest) != 2 || rest[0].Num == first[1].Num {
		t.Fatalf("pages %v then %v", first, rest)
	}
	// Another merchant sees none of them.
	if other, err := s.ListEvents(ctx, "other", order.EventCursor{}, 100); err != nil || len(other) != 0 {
		t.Fatalf("other merchant: %v %v", other, err)
	}
}

// testListEventsWaitsForOlderTransactions: an event written by a
// transaction still open, with a smaller id than an event already
// committed, is not passed by the cursor: the later event is not listed
// until the older transaction has ended.
func testListEventsWaitsForOlderTransactions(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	a, err := s.CreateOrder(ctx, newOrder("ref-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateOrder(ctx, newOrder("ref-b"))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if db.citus {
		// As Settle writes history there: on the merchant's worker, in its
		// transaction ids (a row inserted through the coordinator would
		// take the coordinator's). Citus delegates this call inside the
		// transaction, which stays open on the worker.
		if _, err := tx.Exec(ctx, `SELECT * FROM settle_transition($1, $2, 'PENDING', 'CANCELED', '', '', '', 'cancel', 'test', '')`,
			order.DefaultMerchant, a.ID); err != nil {
			t.Fatal(err)
		}
	} else {
		if _, err := tx.Exec(ctx, `UPDATE orders SET state = 'CANCELED' WHERE id = $1`, a.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO order_events (merchant_id, order_id, from_state, to_state, event, actor)
			VALUES ($1, $2, 'PENDING', 'CANCELED', 'cancel', 'test')`, order.DefaultMerchant, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Transition(ctx, order.ForMerchant(order.DefaultMerchant), b.ID, func(o order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.ListEvents(ctx, order.DefaultMerchant, order.EventCursor{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("listed %v while an older transaction is open", evs)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Transaction ids are the cluster's: another test's transaction, open
	// in another database, holds the feed back as well, for a moment.
	evs = listEvents(t, s, order.EventCursor{}, 100, 2)
	if len(evs) != 2 || evs[0].Order.ID != a.ID || evs[1].Order.ID != b.ID {
		t.Fatalf("after the commit: %+v", evs)
	}
}

// testDeliveryLeaseAndRecord: a leased event is not leased again until its
// lease ends; delivered, it is leased no more; retried, it comes back after
// its backoff; past its retry window it fails, and a resend brings it back.
func testDeliveryLeaseAndRecord(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("ref-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, order.ForMerchant(order.DefaultMerchant), o.ID, func(o order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	merchants := []string{order.DefaultMerchant, "other"}
	lease := func() []order.Notification {
		t.Helper()
		evs, err := s.LeaseDeliveries(ctx, merchants, 10, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	evs := lease()
	if len(evs) != 1 || evs[0].Type != "order.canceled" || evs[0].Attempts != 1 {
		t.Fatalf("leased %+v", evs)
	}
	if again := lease(); len(again) != 0 {
		t.Fatalf("leased twice: %+v", again)
	}
	bl, err := s.DeliveryBacklog(ctx, merchants)
	if err != nil || len(bl) != 2 || bl[0].Pending != 1 || bl[1].Pending != 0 {
		t.Fatalf("backlog %+v %v", bl, err)
	}
	// A retry due at once is leased again.
	recs, err := s.RecordDeliveries(ctx, []order.Delivery{{MerchantID: order.DefaultMerchant, Num: evs[0].Num,
		Outcome: order.DeliveryRetry, Status: 500, Backoff: 0}}, time.Hour)
	if err != nil || len(recs) != 1 || recs[0].Failed {
		t.Fatalf("record retry: %+v %v", recs, err)
	}
	if evs = lease(); len(evs) != 1 || evs[0].Attempts != 2 {
		t.Fatalf("after retry leased %+v", evs)
	}
	// A retry past the window fails the event.
	recs, err = s.RecordDeliveries(ctx, []order.Delivery{{MerchantID: order.DefaultMerchant, Num: evs[0].Num,
		Outcome: order.DeliveryRetry, Status: 500, Backoff: 2 * time.Hour}}, time.Hour)
	if err != nil || len(recs) != 1 || !recs[0].Failed {
		t.Fatalf("record past the window: %+v %v", recs, err)
	}
	if again := lease(); len(again) != 0 {
		t.Fatalf("a failed event was leased: %+v", again)
	}
	if err := s.ResendEvent(ctx, "other", evs[0].Num); !errors.Is(err, order.ErrEventNotFound) {
		t.Fatalf("resend of another merchant's event: %v", err)
	}
	if err := s.ResendEvent(ctx, order.DefaultMerchant, evs[0].Num); err != nil {
		t.Fatal(err)
	}
	if evs = lease(); len(evs) != 1 || evs[0].Attempts != 1 {
		t.Fatalf("after resend leased %+v", evs)
	}
	recs, err = s.RecordDeliveries(ctx, []order.Delivery{{MerchantID: order.DefaultMerchant, Num: evs[0].Num,
		Outcome: order.DeliveryDelivered, Status: 200}}, time.Hour)
	if err != nil || len(recs) != 1 || recs[0].Failed || recs[0].Latency <= 0 {
		t.Fatalf("record delivered: %+v %v", recs, err)
	}
	if again := lease(); len(again) != 0 {
		t.Fatalf("a delivered event was leased: %+v", again)
	}
}

// listEvents lists the default merchant's events after cursor until want
// of them are listed, or 30 s have passed. Transaction ids are the
// cluster's: a transaction open in another test's database holds the feed
// back as well, for a moment.
func listEvents(t *testing.T, s *postgres.Store, after order.EventCursor, limit, want int) []order.Notification {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		evs, err := s.ListEvents(context.Background(), order.DefaultMerchant, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= want || time.Now().After(deadline) {
			return evs
		}
	}
}

// testRefundEvents: a refund that succeeds, one that fails and one sent to
// review are events (refund.succeeded, refund.failed, refund.needs_review),
// written by the refund's own statements, with the refund as it stood and
// its order's id; the claims are not events. They share the order events'
// numbering and per-order sequence, and are leased, recorded, resent and
// counted in the backlog as order events are.
func testRefundEvents(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	paid, att := chargingOrder(t, s, "ref-refunds")
	if _, _, err := s.SettleMany(ctx, []order.Settlement{{MerchantID: order.DefaultMerchant, OrderID: paid.ID,
		AttemptID: att, Event: order.EventSucceed, To: order.StatePaid,
		Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch_1"}, Actor: "test"}}); err != nil {
		t.Fatal(err)
	}
	claim := func(req string, amount int64) order.Refund {
		t.Helper()
		c := refundClaimOf(paid, req, amount)
		c.Reason = "requested_by_customer"
		r, err := s.ClaimRefund(ctx, c)
		if err != nil || !r.Claimed {
			t.Fatalf("claim %s: %+v %v", req, r, err)
		}
		return *r.Refund
	}
	settle := func(rf order.Refund, st order.RefundSettlement) {
		t.Helper()
		st.Actor = "test"
		if _, _, ok, err := s.SettleRefund(ctx, st); err != nil || !ok {
			t.Fatalf("settle refund %s: %v %v", rf.ID, ok, err)
		}
	}
	ok, declined, review := claim("refund-ok", 300), claim("refund-declined", 200), claim("refund-review", 100)
	settle(ok, order.RefundSettlementFor(order.DefaultMerchant, ok.OrderID, ok.ID, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re_1"}, time.Minute))
	settle(declined, order.RefundSettlementFor(order.DefaultMerchant, declined.OrderID, declined.ID, order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "expired_card"}, time.Minute))
	// A recheck (unknown outcome) moves nothing and is no event.
	settle(review, order.RefundSettlementFor(order.DefaultMerchant, review.OrderID, review.ID, order.Result{Outcome: order.OutcomeUnknown}, time.Minute))
	settle(review, order.RefundSettlement{MerchantID: order.DefaultMerchant, OrderID: review.OrderID, RefundID: review.ID, Event: order.EventEscalate,
		To: order.RefundNeedsReview, Result: order.Result{Outcome: order.OutcomeUnknown},
		OrderPartial: order.EventRefundPartial, OrderFull: order.EventRefundFull})

	// The order's history before: created 1, claimed 2, paid 3; then three
	// claims of two rows each (4-9), then the settles. The refund's success
	// and the order's move are written by one statement, in either order.
	want := []struct {
		typ    string
		refund string
		state  string
		seq    int64
	}{
		{"order.paid", "", "PAID", 3},
		{"refund.succeeded", ok.ID, "SUCCEEDED", 10},
		{"order.partially_refunded", "", "PARTIALLY_REFUNDED", 11},
		{"refund.failed", declined.ID, "FAILED", 12},
		{"refund.needs_review", review.ID, "NEEDS_REVIEW", 13},
	}
	evs := listEvents(t, s, order.EventCursor{}, 100, len(want))
	if len(evs) != len(want) {
		t.Fatalf("listed %d events, want %d: %+v", len(evs), len(want), evs)
	}
	if evs[1].Type == "order.partially_refunded" {
		want[1], want[2] = want[2], want[1]
		want[1].seq, want[2].seq = 10, 11
	}
	seen := map[string]bool{}
	for i, e := range evs {
		w := want[i]
		if e.Type != w.typ || e.Sequence != w.seq || e.Order.ID != paid.ID || seen[e.ID()] {
			t.Errorf("event %d: %s %s seq %d order %s, want %s seq %d of order %s, ids unique", i, e.ID(), e.Type,
				e.Sequence, e.Order.ID, w.typ, w.seq, paid.ID)
		}
		seen[e.ID()] = true
		if w.refund == "" {
			if e.Refund != nil {
				t.Errorf("%s: an order's event with a refund %+v", e.Type, e.Refund)
			}
			continue
		}
		var body struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			Refund struct {
				ID          string `json:"id"`
				OrderID     string `json:"order_id"`
				RequestID   string `json:"request_id"`
				State       string `json:"state"`
				Reason      string `json:"reason"`
				DeclineCode string `json:"decline_code"`
				GatewayID   string `json:"gateway_refund_id"`
				Amount      struct {
					Currency    string `json:"currency"`
					AmountMinor int64  `json:"amount_minor"`
				} `json:"amount"`
			} `json:"refund"`
		}
		if err := json.Unmarshal(e.Payload(), &body); err != nil {
			t.Fatal(err)
		}
		rf := body.Refund
		if body.ID != e.ID() || body.Type != w.typ || rf.ID != w.refund || rf.OrderID != paid.ID || rf.State != w.state ||
			rf.Amount.Currency != "GBP" || rf.Reason != "requested_by_customer" || rf.RequestID == "" {
			t.Errorf("payload of %s: %s", w.typ, e.Payload())
		}
		if (w.typ == "refund.succeeded" && (rf.GatewayID != "re_1" || rf.Amount.AmountMinor != 300)) ||
			(w.typ == "refund.failed" && rf.DeclineCode != "expired_card") {
			t.Errorf("payload of %s: %s", w.typ, e.Payload())
		}
	}
	// A cursor between the kinds returns the rest, nothing twice.
	rest := listEvents(t, s, evs[1].Cursor, 100, 3)
	if len(rest) != 3 || rest[0].Num != evs[2].Num {
		t.Fatalf("after %s: %+v", evs[1].ID(), rest)
	}

	// Delivery: every event of both kinds is leased once, in one lane.
	merchants := []string{order.DefaultMerchant}
	leased, err := s.LeaseDeliveries(ctx, merchants, 10, time.Hour)
	if err != nil || len(leased) != len(want) {
		t.Fatalf("leased %+v, %v; want %d events", leased, err, len(want))
	}
	var refundEv order.Notification
	for _, e := range leased {
		if e.Type == "refund.succeeded" {
			refundEv = e
		}
	}
	if refundEv.Refund == nil || refundEv.Refund.ID != ok.ID || refundEv.Sequence < 10 || refundEv.Sequence > 11 {
		t.Fatalf("leased refund event %+v", refundEv)
	}
	bl, err := s.DeliveryBacklog(ctx, merchants)
	if err != nil || len(bl) != 1 || bl[0].Pending != int64(len(want)) {
		t.Fatalf("backlog %+v %v", bl, err)
	}
	ds := make([]order.Delivery, len(leased))
	for i, e := range leased {
		ds[i] = order.Delivery{MerchantID: e.MerchantID, Num: e.Num, Outcome: order.DeliveryDelivered, Status: 200}
	}
	recs, err := s.RecordDeliveries(ctx, ds, time.Hour)
	if err != nil || len(recs) != len(want) {
		t.Fatalf("recorded %+v %v", recs, err)
	}
	if again, err := s.LeaseDeliveries(ctx, merchants, 10, time.Hour); err != nil || len(again) != 0 {
		t.Fatalf("leased again after delivery: %+v %v", again, err)
	}
	// A resend of the refund's event brings back that event alone.
	if err := s.ResendEvent(ctx, order.DefaultMerchant, refundEv.Num); err != nil {
		t.Fatal(err)
	}
	again, err := s.LeaseDeliveries(ctx, merchants, 10, time.Hour)
	if err != nil || len(again) != 1 || again[0].Num != refundEv.Num || again[0].Type != "refund.succeeded" {
		t.Fatalf("after resend leased %+v %v", again, err)
	}
}

// TestEventsListedOnCitus: on Citus a merchant's events are listed in its
// worker's transaction ids, whatever the coordinator's are. A cursor that
// compared the coordinator's ids of the writing transactions with the
// worker's oldest running one would hide every event while the
// coordinator's counter is ahead; here it is put ahead on purpose. An
// audit finding, recorded by a statement the coordinator plans, is
// stamped with the worker's id too, and listed after the order's event.
func TestEventsListedOnCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgrestest.CitusPool(t)
	s := postgres.NewStore(pool)
	var coordinator, worker int64
	if err := pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint,
		(SELECT max(result::bigint) FROM run_command_on_workers('SELECT pg_current_xact_id()'))`).Scan(&coordinator, &worker); err != nil {
		t.Fatal(err)
	}
	// Each loop commits, and so uses a transaction id of the coordinator.
	if ahead := worker - coordinator + 5000; ahead > 0 {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`, ahead)); err != nil {
			t.Fatal(err)
		}
	}
	paid, att := chargingOrder(t, s, "ref-citus-paid")
	if _, ok, err := s.Settle(ctx, order.Settlement{MerchantID: order.DefaultMerchant, OrderID: paid.ID, AttemptID: att,
		Event: order.EventSucceed, To: order.StatePaid, Result: order.Result{Outcome: order.OutcomeSucceeded}, Actor: "test"}); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	var evs []order.Notification
	for deadline := time.Now().Add(5 * time.Second); len(evs) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if evs, err = s.ListEvents(ctx, order.DefaultMerchant, order.EventCursor{}, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(evs) != 1 || evs[0].Order.ID != paid.ID || evs[0].Type != "order.paid" {
		t.Fatalf("events listed: %+v, want the order's order.paid", evs)
	}
	recordFinding(t, pool, order.NewID(), "FOREIGN", "", "ch_foreign")
	var more []order.Notification
	for deadline := time.Now().Add(5 * time.Second); len(more) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if more, err = s.ListEvents(ctx, order.DefaultMerchant, evs[0].Cursor, 10); err != nil {
			t.Fatal(err)
		}
	}
	if len(more) != 1 || more[0].Type != order.EventAuditFinding || more[0].Cursor.TxID <= evs[0].Cursor.TxID {
		t.Fatalf("events listed after the order's: %+v, want the finding's, in a later transaction", more)
	}
}
