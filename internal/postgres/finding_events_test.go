package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// recordFinding records a finding of run as the audit's statements do
// (audit_match_charges.sql and the others): inserted once, only its last
// run moved when it is found again. orderID "" is a finding with no
// order.
func recordFinding(t *testing.T, pool *pgxpool.Pool, run, class, orderID, key string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class, order_id, gateway_record_id,
			record_key, settle, gateway_record)
		VALUES ($1, $2::uuid, $2::uuid, 'sim', $3, nullif($4, '')::uuid, $5, $5,
			CASE WHEN $4 <> '' THEN jsonb_build_object('order_id', $4) END, jsonb_build_object('id', $5::text))
		ON CONFLICT (merchant_id, gateway, class, record_key) DO UPDATE SET last_run_id = EXCLUDED.last_run_id
			WHERE audit_findings.last_run_id <> EXCLUDED.last_run_id`,
		order.DefaultMerchant, run, class, orderID, key)
	if err != nil {
		t.Fatal(err)
	}
}

// testAuditFindingEvents: an audit finding is an audit.finding event,
// once however many runs find it, with an order or none; the feed lists
// it after the order's events in (transaction, number) order, and it is
// leased, recorded, resent and counted in the backlog as orders' events
// are.
func testAuditFindingEvents(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	o, err := s.CreateOrder(ctx, newOrder("ref-finding"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, order.ForMerchant(order.DefaultMerchant), o.ID, func(o order.Order) (order.Move, error) {
		return order.Move{Event: order.EventCancel, To: order.StateCanceled, Actor: "test"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	run1, run2 := order.NewID(), order.NewID()
	recordFinding(t, pool, run1, "FOREIGN", "", "ch_foreign")
	recordFinding(t, pool, run1, "AMOUNT_MISMATCH", o.ID, "ch_mismatch")
	// An overlapping run finds both again.
	recordFinding(t, pool, run2, "FOREIGN", "", "ch_foreign")
	recordFinding(t, pool, run2, "AMOUNT_MISMATCH", o.ID, "ch_mismatch")

	evs := listEvents(t, s, order.EventCursor{}, 10, 3)
	if len(evs) != 3 || evs[0].Type != "order.canceled" {
		t.Fatalf("listed %+v, want the order's event and one per finding", evs)
	}
	listed := map[int64]order.Notification{}
	for i, e := range evs {
		listed[e.Num] = e
		if i > 0 && (e.Cursor.TxID < evs[i-1].Cursor.TxID || e.Cursor.TxID == evs[i-1].Cursor.TxID && e.Num <= evs[i-1].Num) {
			t.Fatalf("event %s listed after %s: %+v", e.ID(), evs[i-1].ID(), evs)
		}
		if i == 0 {
			continue
		}
		var p struct {
			Type    string `json:"type"`
			Finding struct {
				RunID   string          `json:"run_id"`
				Class   string          `json:"class"`
				OrderID string          `json:"order_id"`
				Settle  json.RawMessage `json:"settle"`
			} `json:"finding"`
		}
		if err := json.Unmarshal(e.Payload(), &p); err != nil {
			t.Fatal(err)
		}
		f := e.Finding
		if e.Type != order.EventAuditFinding || f == nil || e.Sequence != 0 || p.Type != e.Type || p.Finding.RunID != run1 ||
			p.Finding.Class != f.Class || p.Finding.OrderID != e.Order.ID || (f.Class == "FOREIGN") != (e.Order.ID == "") ||
			(f.Class == "FOREIGN") != (string(p.Finding.Settle) == "null") {
			t.Errorf("finding event %+v: %s", e, e.Payload())
		}
	}
	if more := listEvents(t, s, evs[2].Cursor, 10, 0); len(more) != 0 {
		t.Fatalf("listed after the last: %+v", more)
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
	leased := lease()
	if len(leased) != 3 {
		t.Fatalf("leased %+v, want the three events", leased)
	}
	var foreign int64
	for _, e := range leased {
		if string(e.Payload()) != string(listed[e.Num].Payload()) {
			t.Errorf("event %s leased as %s, listed as %s", e.ID(), e.Payload(), listed[e.Num].Payload())
		}
		if e.Finding != nil && e.Finding.Class == "FOREIGN" {
			foreign = e.Num
		}
	}
	if bl, err := s.DeliveryBacklog(ctx, merchants); err != nil || bl[0].Pending != 3 {
		t.Fatalf("backlog %+v %v", bl, err)
	}
	ds := make([]order.Delivery, len(leased))
	for i, e := range leased {
		ds[i] = order.Delivery{MerchantID: e.MerchantID, Num: e.Num, Outcome: order.DeliveryDelivered, Status: 200}
		if e.Num == foreign {
			ds[i].Outcome, ds[i].Status, ds[i].Attempt, ds[i].Error = order.DeliveryRetry, 500, 1, "endpoint answered 500"
		}
	}
	recs, err := s.RecordDeliveries(ctx, ds, time.Hour)
	if err != nil || len(recs) != 3 {
		t.Fatalf("record: %+v %v", recs, err)
	}
	if again := lease(); len(again) != 1 || again[0].Num != foreign || again[0].Attempts != 2 || again[0].Finding == nil {
		t.Fatalf("after a retry leased %+v, want the foreign charge's event again", again)
	}
	if _, err := s.RecordDeliveries(ctx, []order.Delivery{{MerchantID: order.DefaultMerchant, Num: foreign,
		Outcome: order.DeliveryDelivered, Status: 200}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if bl, err := s.DeliveryBacklog(ctx, merchants); err != nil || bl[0].Pending != 0 {
		t.Fatalf("backlog after delivery %+v %v", bl, err)
	}
	if err := s.ResendEvent(ctx, "other", foreign); !errors.Is(err, order.ErrEventNotFound) {
		t.Fatalf("resend of another merchant's event: %v", err)
	}
	if err := s.ResendEvent(ctx, order.DefaultMerchant, foreign); err != nil {
		t.Fatal(err)
	}
	if again := lease(); len(again) != 1 || again[0].Num != foreign || again[0].Attempts != 1 {
		t.Fatalf("after resend leased %+v", again)
	}
}
