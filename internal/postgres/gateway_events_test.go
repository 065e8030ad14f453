package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// The gateway events' tests, part of the store's conformance suite: what
// an event is matched to and triggers, and the lookups' read of what the
// events said (order.EventLog).

// paidOrder makes an AUTOMATIC order PAID by the attempt whose id it
// returns.
func paidOrder(t *testing.T, s *postgres.Store, ref string) (order.Order, string) {
	t.Helper()
	o, a := chargingOrder(t, s, ref)
	got, ok, err := s.Settle(context.Background(), order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID,
		AttemptID: a, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "psp_" + ref},
		Event: order.EventSucceed, To: order.StatePaid, Actor: "test"})
	if err != nil || !ok || got.State != order.StatePaid {
		t.Fatalf("settle: %+v %v, %v", got, ok, err)
	}
	return got, a
}

// record records ev and fails the test unless it comes to want.
func record(t *testing.T, s *postgres.Store, ev order.GatewayEvent, want order.GatewayEventResult) order.RecordedEvent {
	t.Helper()
	r, err := s.RecordGatewayEvent(context.Background(), ev)
	if err != nil || r.Result != want {
		t.Fatalf("record %s %s about %q: %+v, %v; want %s", ev.ID, ev.Type, ev.AttemptID, r, err, want)
	}
	return r
}

// due reports whether the row of table (orders, captures, voids, refunds)
// with id is due for the reconciler now.
func due(t *testing.T, pool *pgxpool.Pool, table, merchant, id string) bool {
	t.Helper()
	var d bool
	err := pool.QueryRow(context.Background(),
		"SELECT coalesce(reconcile_at <= now(), false) FROM "+table+" WHERE merchant_id = $1 AND id = $2",
		merchant, id).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reviewItems counts the review items of kind about attempt.
func reviewItems(t *testing.T, pool *pgxpool.Pool, kind, attemptID string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(),
		"SELECT count(*) FROM review_items WHERE kind = $1 AND attempt_id = $2", kind, attemptID).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sameEvents fails the test unless got are want, field by field (times by
// Equal: the database gives them back in its own zone).
func sameEvents(t *testing.T, what string, got, want []order.GatewayEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.OccurredAt.Equal(w.OccurredAt) {
			t.Errorf("%s: event %d occurred at %v, want %v", what, i, g.OccurredAt, w.OccurredAt)
		}
		g.OccurredAt, w.OccurredAt = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("%s: event %d is %+v, want %+v", what, i, g, w)
		}
	}
}

// testGatewayEventsReadBack: every field an adapter set comes back from
// GatewayEventsAbout, in the order the events were recorded, each once
// however often it was delivered, and only the gateway's and reference's;
// an event about nothing of ours is readable by its reference as given,
// and a reference with no events has none.
func testGatewayEventsReadBack(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	_, a := chargingOrder(t, s, "events-read")
	at := time.Date(2026, 3, 1, 12, 30, 0, 123000, time.UTC)
	evs := []order.GatewayEvent{
		{Gateway: "adyen", ID: "n1", Type: "AUTHORISATION", ObjectID: "PSP1", AttemptID: a, ChargeID: "PSP1",
			Succeeded: true, Outcome: order.OutcomeSucceeded, Amount: order.Money{Currency: "EUR", AmountMinor: 1250},
			OccurredAt: at},
		{Gateway: "adyen", ID: "n2", Type: "CAPTURE_FAILED", ObjectID: "PSP2", AttemptID: a, ChargeID: "PSP1",
			Outcome: order.OutcomeDeclined, DeclineCode: "Insufficient balance", OccurredAt: at.Add(time.Second)},
		// An event that says nothing beyond a hint keeps its zero fields.
		{Gateway: "adyen", ID: "n3", Type: "REPORT_AVAILABLE", ObjectID: "PSP3", AttemptID: a},
	}
	record(t, s, evs[0], order.EventWoken)
	record(t, s, evs[1], order.EventWoken)
	record(t, s, evs[0], order.EventDuplicate)
	record(t, s, evs[2], order.EventWoken)
	record(t, s, evs[1], order.EventDuplicate)
	// Another gateway's event with the same reference is not adyen's.
	record(t, s, order.GatewayEvent{Gateway: "refpsp", ID: "n1", Type: "charge.succeeded", ObjectID: "ch",
		AttemptID: a, Succeeded: true}, order.EventWoken)

	got, err := s.GatewayEventsAbout(ctx, "adyen", a)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "the attempt's events", got, evs)

	// References that name nothing of ours, a UUID or not, are kept as given.
	for _, ref := range []string{"order-4711", order.NewID()} {
		stray := order.GatewayEvent{Gateway: "adyen", ID: "stray-" + ref, Type: "TECHNICAL_CANCEL", ObjectID: "PSP9",
			AttemptID: ref, Succeeded: true, Outcome: order.OutcomeSucceeded, OccurredAt: at}
		record(t, s, stray, order.EventUnknownObject)
		got, err := s.GatewayEventsAbout(ctx, "adyen", ref)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, "an unmatched reference's events", got, []order.GatewayEvent{stray})
	}

	none, err := s.GatewayEventsAbout(ctx, "adyen", order.NewID())
	if err != nil || len(none) != 0 {
		t.Fatalf("a reference with no events: %+v, %v; want none", none, err)
	}
}

// testGatewayEventsWakeOperations: an event about a capture, a void or a
// refund in flight makes it due for the reconciler now, as an event about
// an attempt makes its order due; once the operation has settled, its
// event changes nothing.
func testGatewayEventsWakeOperations(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)

	paid, _ := paidOrder(t, s, "wake-refund")
	rc, err := s.ClaimRefund(ctx, refundClaimOf(paid, "refund", 500))
	if err != nil || !rc.Claimed {
		t.Fatalf("claim refund: %+v, %v", rc, err)
	}
	held := authorizedOrder(t, s, "wake-capture", later)
	cc, err := s.ClaimCapture(ctx, captureClaimOf(held, "capture", 400, false))
	if err != nil || !cc.Claimed {
		t.Fatalf("claim capture: %+v, %v", cc, err)
	}
	toVoid := authorizedOrder(t, s, "wake-void", later)
	vc, err := s.ClaimVoid(ctx, voidClaimOf(toVoid, "void"))
	if err != nil || !vc.Claimed {
		t.Fatalf("claim void: %+v, %v", vc, err)
	}

	for _, tc := range []struct {
		table, id, orderID string
		about              order.EventAbout
	}{
		{"refunds", rc.Refund.ID, paid.ID, order.EventAboutRefund},
		{"captures", cc.Capture.ID, held.ID, order.EventAboutCapture},
		{"voids", vc.Void.ID, toVoid.ID, order.EventAboutVoid},
	} {
		if due(t, pool, tc.table, order.DefaultMerchant, tc.id) {
			t.Fatalf("%s %s is due before any event (its lease is 15s)", tc.table, tc.id)
		}
		r := record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "wake-" + tc.id, Type: "MODIFICATION",
			ObjectID: "PSP", AttemptID: tc.id, About: tc.about, Outcome: order.OutcomeSucceeded}, order.EventWoken)
		if r.OrderID != tc.orderID || r.AttemptID != tc.id {
			t.Errorf("%s event matched to order %q, %q; want %q, %q", tc.table, r.OrderID, r.AttemptID, tc.orderID, tc.id)
		}
		if !due(t, pool, tc.table, order.DefaultMerchant, tc.id) {
			t.Errorf("%s %s is not due after its event", tc.table, tc.id)
		}
	}

	// A settled refund's event is ignored, and nothing is raised.
	if _, _, ok, err := s.SettleRefund(ctx, order.RefundSettlementFor(paid.MerchantID, rc.Refund.OrderID, rc.Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re"}, time.Minute)); err != nil || !ok {
		t.Fatalf("settle refund: %v, %v", ok, err)
	}
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "late-refund", Type: "REFUND", ObjectID: "PSP",
		AttemptID: rc.Refund.ID, About: order.EventAboutRefund, Succeeded: true, Outcome: order.OutcomeSucceeded},
		order.EventIgnored)
}

// testGatewayEventsCaptureFailed: a decline reported for the operation
// that took the order's money (the attempt that paid an AUTOMATIC order,
// or a succeeded capture of a MANUAL one) moves nothing and raises one
// capture_failed review item for the attempt, however often it is
// reported. A decline of an attempt in flight only wakes its order, unless
// it is of a capture the gateway had accepted (GatewayEvent.FailedLater),
// which raises the item too; a success reported for the attempt an order
// holds authorized is no possible double charge.
func testGatewayEventsCaptureFailed(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)

	paid, a := paidOrder(t, s, "capture-failed")
	failed := order.GatewayEvent{Gateway: "adyen", ID: "cf-1", Type: "CAPTURE_FAILED", ObjectID: "PSPC",
		AttemptID: a, Outcome: order.OutcomeDeclined, DeclineCode: "Capture failed"}
	r := record(t, s, failed, order.EventReviewCaptureFailed)
	if r.OrderID != paid.ID || r.AttemptID != a {
		t.Errorf("matched to %q, %q; want %q, %q", r.OrderID, r.AttemptID, paid.ID, a)
	}
	failed.ID = "cf-2"
	record(t, s, failed, order.EventReviewCaptureFailed)
	if n := reviewItems(t, pool, "capture_failed", a); n != 1 {
		t.Errorf("%d capture_failed items for the attempt, want 1", n)
	}
	if n := reviewItems(t, pool, "possible_double_charge", a); n != 0 {
		t.Errorf("%d possible double charges for the attempt, want 0", n)
	}
	if got, err := s.Order(ctx, order.ForMerchant(paid.MerchantID), paid.ID); err != nil || got.State != order.StatePaid {
		t.Errorf("order after the failure: %+v, %v; want PAID, untouched", got, err)
	}

	// An attempt still in flight: a decline is a hint for its lookup.
	_, inFlight := chargingOrder(t, s, "capture-failed-charging")
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "cf-3", Type: "AUTHORISATION", ObjectID: "PSPD",
		AttemptID: inFlight, Outcome: order.OutcomeDeclined, DeclineCode: "Refused"}, order.EventWoken)
	if n := reviewItems(t, pool, "capture_failed", inFlight); n != 0 {
		t.Errorf("%d capture_failed items for an attempt in flight, want 0", n)
	}

	// A capture the gateway accepted and then failed, reported before the
	// call in flight settles its order PAID on the accepted capture
	// (Adyen's CAPTURE_FAILED of an automatic order): the item is raised
	// at once, the order is woken, and the settle that follows still
	// leaves it for a person.
	early, earlyAtt := chargingOrder(t, s, "capture-failed-early")
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "cf-early", Type: "CAPTURE_FAILED", ObjectID: "PSPE",
		AttemptID: earlyAtt, Outcome: order.OutcomeDeclined, DeclineCode: "Capture failed", FailedLater: true},
		order.EventReviewCaptureFailed)
	if !due(t, pool, "orders", early.MerchantID, early.ID) {
		t.Error("order in flight not woken by the failure of its capture")
	}
	if got, ok, err := s.Settle(ctx, order.Settlement{MerchantID: early.MerchantID, OrderID: early.ID,
		AttemptID: earlyAtt, Result: order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "PSPE"},
		Event: order.EventSucceed, To: order.StatePaid, Actor: "test"}); err != nil || !ok || got.State != order.StatePaid {
		t.Fatalf("the call's settle: %+v %v, %v", got, ok, err)
	}
	if n := reviewItems(t, pool, "capture_failed", earlyAtt); n != 1 {
		t.Errorf("%d capture_failed items for the attempt whose capture failed before its settle, want 1", n)
	}

	// A MANUAL order: its authorization's own success is held, not a
	// second charge; a failure of its succeeded capture is raised.
	held := authorizedOrder(t, s, "capture-failed-manual", time.Now().Add(time.Hour).Truncate(time.Microsecond))
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "cf-4", Type: "AUTHORISATION", ObjectID: "PSPM",
		AttemptID: held.CurrentAttempt, Succeeded: true, Outcome: order.OutcomeSucceeded}, order.EventIgnored)
	c, err := s.ClaimCapture(ctx, captureClaimOf(held, "cap", 0, true))
	if err != nil || !c.Claimed {
		t.Fatalf("claim capture: %+v, %v", c, err)
	}
	if _, _, ok, err := s.SettleCapture(ctx, order.CaptureSettlementFor(held.MerchantID, c.Capture.ID,
		order.Result{Outcome: order.OutcomeSucceeded}, time.Minute)); err != nil || !ok {
		t.Fatalf("settle capture: %v, %v", ok, err)
	}
	record(t, s, order.GatewayEvent{Gateway: "adyen", ID: "cf-5", Type: "CAPTURE_FAILED", ObjectID: "PSPM",
		AttemptID: c.Capture.ID, About: order.EventAboutCapture, Outcome: order.OutcomeDeclined},
		order.EventReviewCaptureFailed)
	if n := reviewItems(t, pool, "capture_failed", held.CurrentAttempt); n != 1 {
		t.Errorf("%d capture_failed items for the captured authorization, want 1", n)
	}
	if n := reviewItems(t, pool, "possible_double_charge", held.CurrentAttempt); n != 0 {
		t.Errorf("%d possible double charges for the authorization, want 0", n)
	}
}

// testGatewayEventsLapseWakesHold: an event that reports the hold of an
// AUTHORIZED order ended with no money moved (Adyen's EXPIRE, sent when
// the authorisation lapsed, which may be long before the capture_before
// Settle assumed) makes the hold due for the reconcilers' lookup now; the
// order stays AUTHORIZED until that lookup says it lapsed.
func testGatewayEventsLapseWakesHold(t *testing.T, db storeDB) {
	ctx := context.Background()
	s := postgres.NewStore(db.pool(t))
	held := authorizedOrder(t, s, "lapse-wakes-hold", time.Now().Add(time.Hour).Truncate(time.Microsecond))
	if due, err := s.ClaimDueHolds(ctx, 10, time.Minute); err != nil || len(due) != 0 {
		t.Fatalf("holds due before the event: %+v, %v; want none", due, err)
	}
	expire := order.GatewayEvent{Gateway: "adyen", ID: "EXPIRE:PSPX:true", Type: "EXPIRE", ObjectID: "PSPX",
		AttemptID: held.CurrentAttempt, Outcome: order.OutcomeSucceeded}
	r := record(t, s, expire, order.EventWoken)
	if r.OrderID != held.ID {
		t.Errorf("matched to order %q, want %q", r.OrderID, held.ID)
	}
	record(t, s, expire, order.EventDuplicate)
	due, err := s.ClaimDueHolds(ctx, 10, time.Minute)
	if err != nil || len(due) != 1 || due[0].Order.ID != held.ID || due[0].Attempt.ID != held.CurrentAttempt {
		t.Fatalf("holds due after the EXPIRE: %+v, %v; want the order", due, err)
	}
	if got, err := s.Order(ctx, order.ForMerchant(held.MerchantID), held.ID); err != nil || got.State != order.StateAuthorized {
		t.Errorf("order after the EXPIRE: %+v, %v; want AUTHORIZED, for the lookup to move", got, err)
	}
}

// testGatewayEventsRefundFailed: a decline reported for a refund that
// succeeded (Adyen's REFUND_FAILED after its REFUND) moves nothing and
// raises one refund_failed review item for the order's attempt; a
// decline of a refund in flight only wakes it.
func testGatewayEventsRefundFailed(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	paid, a := paidOrder(t, s, "refund-failed")
	rc, err := s.ClaimRefund(ctx, refundClaimOf(paid, "refund", 500))
	if err != nil || !rc.Claimed {
		t.Fatalf("claim refund: %+v, %v", rc, err)
	}
	failed := order.GatewayEvent{Gateway: "adyen", ID: "rf-1", Type: "REFUND_FAILED", ObjectID: "PSPR",
		AttemptID: rc.Refund.ID, About: order.EventAboutRefund, Outcome: order.OutcomeDeclined}
	record(t, s, failed, order.EventWoken)
	if n := reviewItems(t, pool, "refund_failed", a); n != 0 {
		t.Errorf("%d refund_failed items for a refund in flight, want 0", n)
	}
	if _, _, ok, err := s.SettleRefund(ctx, order.RefundSettlementFor(paid.MerchantID, rc.Refund.OrderID, rc.Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "PSPR"}, time.Minute)); err != nil || !ok {
		t.Fatalf("settle refund: %v, %v", ok, err)
	}
	for _, id := range []string{"rf-2", "rf-3"} {
		failed.ID = id
		record(t, s, failed, order.EventReviewRefundFailed)
	}
	if n := reviewItems(t, pool, "refund_failed", a); n != 1 {
		t.Errorf("%d refund_failed items for the order's attempt, want 1", n)
	}
	got, err := s.Order(ctx, order.ForMerchant(paid.MerchantID), paid.ID)
	if err != nil || got.State != order.StatePartiallyRefunded {
		t.Errorf("order after the failure: %+v, %v; want PARTIALLY_REFUNDED, untouched", got, err)
	}
}
