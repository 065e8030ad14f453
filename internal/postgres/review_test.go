package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
	"github.com/settlepay/settle/internal/postgres/postgrestest"
)

// The review queue's tests, part of the store's conformance suite.

// reviewQueue fills a store with one item of every kind of the review
// queue for merchant, and returns them by kind, with the ids of their
// orders.
func reviewQueue(t *testing.T, s *postgres.Store, merchant string) map[order.ReviewKind]string {
	t.Helper()
	ctx := context.Background()
	create := func(ref string, capture order.CaptureMode) order.Order {
		t.Helper()
		n := newOrder(merchant + "-" + ref)
		n.MerchantID, n.Capture = merchant, capture
		o, err := s.CreateOrder(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	claim := func(o order.Order, req string) (order.Order, string) {
		t.Helper()
		c, err := s.Claim(ctx, claimOf(o, merchant+"-"+req))
		if err != nil || !c.Claimed {
			t.Fatalf("claim %s: %+v, %v", req, c, err)
		}
		return c.Order, c.Attempt.ID
	}
	settle := func(o order.Order, a string, res order.Result, ev order.EventName, to order.State, lastError string) order.Order {
		t.Helper()
		got, ok, err := s.Settle(ctx, order.Settlement{MerchantID: o.MerchantID, OrderID: o.ID, AttemptID: a, Result: res,
			Event: ev, To: to, Actor: "test", LastError: lastError, Reason: lastError})
		if err != nil || !ok || got.State != to {
			t.Fatalf("settle to %s: %+v %v, %v", to, got, ok, err)
		}
		return got
	}
	out := map[order.ReviewKind]string{}

	// An order whose lookups ran out.
	o, a := claim(create("order", ""), "order")
	settle(o, a, order.Result{Outcome: order.OutcomeUnknown}, order.EventEscalate, order.StateNeedsReview,
		"outcome still unknown after 8 checks: lookup timed out")
	out[order.ReviewOrder] = o.ID

	// A refund whose lookups ran out.
	o, a = claim(create("refund", ""), "refund")
	o = settle(o, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"}, order.EventSucceed, order.StatePaid, "")
	r, err := s.ClaimRefund(ctx, refundClaimOf(o, merchant+"-refund", 0))
	if err != nil || !r.Claimed {
		t.Fatalf("claim refund: %+v, %v", r, err)
	}
	rst := order.RefundSettlementFor(o.MerchantID, r.Refund.OrderID, r.Refund.ID, order.Result{Outcome: order.OutcomeUnknown}, time.Minute)
	rst.Event, rst.To, rst.LastError, rst.Reason, rst.Actor = order.EventEscalate, order.RefundNeedsReview, "refund lookup failed",
		"refund lookup failed", "test"
	if _, _, ok, err := s.SettleRefund(ctx, rst); err != nil || !ok {
		t.Fatalf("escalate refund: %v, %v", ok, err)
	}
	out[order.ReviewRefund] = r.Refund.ID

	// A capture and a void whose lookups ran out.
	held := create("capture", order.CaptureManual)
	held, a = claim(held, "capture")
	held = settle(held, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch", Hold: &order.Hold{State: order.HoldOpen,
		AuthorizedMinor: 1250, CaptureBefore: time.Now().Add(time.Hour).Truncate(time.Microsecond)}},
		order.EventAuthorize, order.StateAuthorized, "")
	c, err := s.ClaimCapture(ctx, captureClaimOf(held, merchant+"-cap", 0, true))
	if err != nil || !c.Claimed {
		t.Fatalf("claim capture: %+v, %v", c, err)
	}
	cst := order.CaptureSettlement{MerchantID: merchant, CaptureID: c.Capture.ID, Result: order.Result{Outcome: order.OutcomeUnknown},
		Event: order.EventEscalate, To: order.CaptureNeedsReview, LastError: "capture lookup failed", Reason: "capture lookup failed",
		Actor: "test", Checked: true}
	if _, _, ok, err := s.SettleCapture(ctx, cst); err != nil || !ok {
		t.Fatalf("escalate capture: %v, %v", ok, err)
	}
	out[order.ReviewCapture] = c.Capture.ID
	held = create("void", order.CaptureManual)
	held, a = claim(held, "void")
	held = settle(held, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch", Hold: &order.Hold{State: order.HoldOpen,
		AuthorizedMinor: 1250, CaptureBefore: time.Now().Add(time.Hour).Truncate(time.Microsecond)}},
		order.EventAuthorize, order.StateAuthorized, "")
	v, err := s.ClaimVoid(ctx, voidClaimOf(held, merchant+"-void"))
	if err != nil || !v.Claimed {
		t.Fatalf("claim void: %+v, %v", v, err)
	}
	vst := order.VoidSettlement{MerchantID: merchant, VoidID: v.Void.ID, Result: order.Result{Outcome: order.OutcomeUnknown},
		Event: order.EventEscalate, To: order.VoidNeedsReview, LastError: "void lookup failed", Reason: "void lookup failed",
		Actor: "test", Checked: true}
	if _, _, ok, err := s.SettleVoid(ctx, vst); err != nil || !ok {
		t.Fatalf("escalate void: %v, %v", ok, err)
	}
	out[order.ReviewVoid] = v.Void.ID

	// A success reported for an attempt its order no longer holds.
	o, first := claim(create("double", ""), "double-1")
	o = settle(o, first, order.Result{Outcome: order.OutcomeDeclined, DeclineCode: "do_not_honor"}, order.EventFail,
		order.StatePending, "")
	claim(o, "double-2")
	rec := record(t, s, order.GatewayEvent{Gateway: "sim", ID: merchant + "-evt-double", Type: "charge.succeeded",
		ObjectID: "ch_double", AttemptID: first, Succeeded: true, Outcome: order.OutcomeSucceeded}, order.EventReview)
	out[order.ReviewPossibleDoubleCharge] = rec.AttemptID

	// A failure reported for the attempt that paid an order.
	o, a = claim(create("failed", ""), "failed")
	settle(o, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"}, order.EventSucceed, order.StatePaid, "")
	rec = record(t, s, order.GatewayEvent{Gateway: "sim", ID: merchant + "-evt-failed", Type: "CAPTURE_FAILED",
		ObjectID: "ch_failed", AttemptID: a, Outcome: order.OutcomeDeclined, DeclineCode: "Capture failed"},
		order.EventReviewCaptureFailed)
	out[order.ReviewCaptureFailed] = rec.AttemptID

	// A failure reported for a refund that succeeded.
	o, a = claim(create("refund-failed", ""), "refund-failed")
	o = settle(o, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"}, order.EventSucceed, order.StatePaid, "")
	rf, err := s.ClaimRefund(ctx, refundClaimOf(o, merchant+"-refund-failed", 0))
	if err != nil || !rf.Claimed {
		t.Fatalf("claim refund: %+v, %v", rf, err)
	}
	if _, _, ok, err := s.SettleRefund(ctx, order.RefundSettlementFor(o.MerchantID, rf.Refund.OrderID, rf.Refund.ID,
		order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "re"}, time.Minute)); err != nil || !ok {
		t.Fatalf("settle refund: %v, %v", ok, err)
	}
	rec = record(t, s, order.GatewayEvent{Gateway: "sim", ID: merchant + "-evt-refund-failed", Type: "REFUND_FAILED",
		ObjectID: "re", AttemptID: rf.Refund.ID, About: order.EventAboutRefund, Outcome: order.OutcomeDeclined},
		order.EventReviewRefundFailed)
	out[order.ReviewRefundFailed] = a

	// A dispute waiting on the merchant's evidence, due in two days.
	o, a = claim(create("dispute", ""), "dispute")
	settle(o, a, order.Result{Outcome: order.OutcomeSucceeded, ChargeID: "ch"}, order.EventSucceed, order.StatePaid, "")
	d := order.GatewayDispute{ID: merchant + "-dp", Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, Reason: "fraudulent", DueBy: time.Now().Add(48 * time.Hour)}
	ap, err := s.ApplyDispute(ctx, order.DisputeChange{Actor: order.ActorGateway, Dispute: d,
		Event: order.GatewayEvent{Gateway: "sim", ID: merchant + "-evt-dispute", Type: "dispute", AttemptID: a, Dispute: &d}})
	if err != nil || ap.Dispute == nil {
		t.Fatalf("apply dispute: %+v, %v", ap, err)
	}
	out[order.ReviewDispute] = ap.Dispute.ID
	return out
}

// listAll pages through the review queue f selects, page by page.
func listAll(t *testing.T, s *postgres.Store, f order.ReviewFilter) []order.ReviewItem {
	t.Helper()
	var all []order.ReviewItem
	for range 100 {
		page, err := s.ReviewItems(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < f.Limit {
			return all
		}
		last := page[len(page)-1]
		f.After = order.ReviewCursor{RaisedAt: last.RaisedAt, Kind: last.Kind, ID: last.ID}
	}
	t.Fatal("the queue did not end")
	return nil
}

// testReviewQueue: the review queue lists every kind in review, oldest
// first, each with its merchant, order, attempt or operation, gateway,
// when it was raised and what Settle recorded of the gateway's answer;
// filtered by kind and scoped by merchant; paged without loss or repeat;
// and a resolved review item leaves it, with its resolution kept, once.
func testReviewQueue(t *testing.T, db storeDB) {
	ctx := context.Background()
	pool := db.pool(t)
	s := postgres.NewStore(pool)
	a := reviewQueue(t, s, "merchant-a")
	b := reviewQueue(t, s, "merchant-b")
	// A finding of the gateway audit (its runs make them: internal/audit's
	// tests), here a charge made outside Settle.
	for m, q := range map[string]map[order.ReviewKind]string{"merchant-a": a, "merchant-b": b} {
		var id string
		if err := pool.QueryRow(ctx, `INSERT INTO audit_findings (merchant_id, run_id, last_run_id, gateway, class,
			gateway_record_id, record_key, gateway_record) VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'sim', 'FOREIGN',
			'ch_foreign', 'ch_foreign', '{"id": "ch_foreign"}') RETURNING id::text`, m).Scan(&id); err != nil {
			t.Fatal(err)
		}
		q[order.ReviewAuditFinding] = id
	}

	all := listAll(t, s, order.ReviewFilter{Scope: order.AnyMerchant, Limit: 100})
	if len(all) != 2*len(order.ReviewKinds) {
		t.Fatalf("%d items in the queue, want %d: %+v", len(all), 2*len(order.ReviewKinds), all)
	}
	if !slices.IsSortedFunc(all, func(x, y order.ReviewItem) int { return x.RaisedAt.Compare(y.RaisedAt) }) {
		t.Errorf("the queue is not oldest first: %+v", all)
	}
	byKind := map[string]order.ReviewItem{}
	for _, it := range all {
		byKind[it.MerchantID+"/"+string(it.Kind)] = it
	}
	for kind, id := range a {
		it, ok := byKind["merchant-a/"+string(kind)]
		if !ok {
			t.Errorf("no %s of merchant-a in the queue", kind)
			continue
		}
		if (it.OrderID == "" && kind != order.ReviewAuditFinding) || it.Gateway != "sim" || it.RaisedAt.IsZero() {
			t.Errorf("%s: %+v, want its order, gateway and time", kind, it)
		}
		switch kind {
		case order.ReviewOrder:
			if it.ID != id || it.AttemptID == "" || it.Outcome != order.OutcomeUnknown || it.LastError != "outcome still unknown after 8 checks: lookup timed out" {
				t.Errorf("order: %+v", it)
			}
		case order.ReviewRefund, order.ReviewCapture, order.ReviewVoid:
			if it.ID != id || it.OperationID != id || it.LastError != string(kind)+" lookup failed" {
				t.Errorf("%s: %+v, want %s", kind, it, id)
			}
		case order.ReviewPossibleDoubleCharge, order.ReviewCaptureFailed, order.ReviewRefundFailed:
			if it.AttemptID != id || it.EventID == "" || it.EventType == "" || it.Outcome == "" {
				t.Errorf("%s: %+v, want attempt %s and its event", kind, it, id)
			}
		case order.ReviewDispute:
			if it.ID != id || it.OperationID != id || it.AttemptID == "" || it.EventID != "merchant-a-dp" ||
				it.EventType != string(order.DisputeChargeback) || it.DeclineCode != "fraudulent" ||
				!it.RaisedAt.Equal(it.DueBy.Add(-order.DisputeDueWithin)) {
				t.Errorf("dispute: %+v, want %s with its gateway id, stage, reason and due time", it, id)
			}
		case order.ReviewAuditFinding:
			if it.ID != id || it.AuditClass != "FOREIGN" || it.GatewayRecordID != "ch_foreign" || it.GatewaySide == "" {
				t.Errorf("audit finding: %+v, want %s with its class and the gateway's record", it, id)
			}
		}
	}
	if it := byKind["merchant-a/"+string(order.ReviewCaptureFailed)]; it.Outcome != order.OutcomeDeclined || it.DeclineCode != "Capture failed" {
		t.Errorf("capture_failed: %+v, want the event's decline", it)
	}

	// A kind, a merchant, and pages of two.
	for _, k := range order.ReviewKinds {
		got := listAll(t, s, order.ReviewFilter{Scope: order.AnyMerchant, Kind: k, Limit: 100})
		if len(got) != 2 || got[0].Kind != k || got[1].Kind != k {
			t.Errorf("kind %s: %+v, want one of each merchant", k, got)
		}
	}
	own := listAll(t, s, order.ReviewFilter{Scope: order.ForMerchant("merchant-b"), Limit: 100})
	if len(own) != len(order.ReviewKinds) {
		t.Errorf("merchant-b's queue: %d items, want %d", len(own), len(order.ReviewKinds))
	}
	for _, it := range own {
		if it.MerchantID != "merchant-b" {
			t.Errorf("merchant-b's queue holds %+v", it)
		}
	}
	if got := listAll(t, s, order.ReviewFilter{Limit: 100}); len(got) != 0 {
		t.Errorf("the zero scope lists %d items, want none", len(got))
	}
	paged := listAll(t, s, order.ReviewFilter{Scope: order.AnyMerchant, Limit: 2})
	if len(paged) != len(all) {
		t.Fatalf("pages of two: %d items, want %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].Kind != all[i].Kind || paged[i].ID != all[i].ID {
			t.Errorf("pages of two, item %d: %s %s, want %s %s", i, paged[i].Kind, paged[i].ID, all[i].Kind, all[i].ID)
		}
	}

	// Resolution, once.
	item := byKind["merchant-b/"+string(order.ReviewPossibleDoubleCharge)]
	if item.AttemptID != b[order.ReviewPossibleDoubleCharge] {
		t.Fatalf("merchant-b's double charge: %+v", item)
	}
	res := order.ReviewResolution{MerchantID: "merchant-b", ID: item.ID, Decision: order.ReviewCharged, Actor: "operator:alice",
		Note: "refunded the second charge at the gateway", GatewayOutcome: order.OutcomeSucceeded}
	if ok, err := s.ResolveReviewItem(ctx, res); err != nil || !ok {
		t.Fatalf("resolve: %v, %v", ok, err)
	}
	res.Decision, res.Note = order.ReviewNotCharged, "changed my mind"
	if ok, err := s.ResolveReviewItem(ctx, res); err != nil || ok {
		t.Errorf("resolve again: %v, %v; want false, nil", ok, err)
	}
	got, err := s.ReviewItem(ctx, "merchant-b", item.ID)
	if err != nil || got.Decision != order.ReviewCharged || got.Actor != "operator:alice" || got.ResolvedAt.IsZero() ||
		got.Note != "refunded the second charge at the gateway" || got.GatewayOutcome != order.OutcomeSucceeded ||
		got.OrderID != item.OrderID || got.EventID != item.EventID {
		t.Errorf("resolved item: %+v, %v", got, err)
	}
	if _, err := s.ReviewItem(ctx, "merchant-a", item.ID); !errors.Is(err, order.ErrReviewItemNotFound) {
		t.Errorf("another merchant's item: %v, want ErrReviewItemNotFound", err)
	}
	for _, it := range listAll(t, s, order.ReviewFilter{Scope: order.AnyMerchant, Limit: 100}) {
		if it.ID == item.ID {
			t.Errorf("the resolved item is still in the queue: %+v", it)
		}
	}
}

// TestReviewQueueUsesIndexes: the review queue's reads, of one merchant's
// and of everyone's, make no sequential scan of the tables they read once
// those have grown to thousands of rows, however often they run (a
// prepared statement's plan turns generic after its fifth run).
func TestReviewQueueUsesIndexes(t *testing.T) {
	if postgrestest.Citus() {
		t.Skip("on Citus the reads run on the workers, whose counters this connection does not read")
	}
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	pool, err := postgres.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool)
	reviewQueue(t, s, "merchant-a")
	reviewQueue(t, s, "merchant-b")
	// Thousands of settled rows in every table the queue reads, over many
	// merchants.
	for _, q := range []string{
		`INSERT INTO orders (id, merchant_id, merchant_reference, amount_minor, currency, payment_method, gateway, state)
		 SELECT gen_random_uuid(), 'm-' || (i % 100), 'grown-' || i, 1250, 'GBP', 'tok', 'sim', 'PAID' FROM generate_series(1, 5000) i`,
		`INSERT INTO charge_attempts (id, order_id, merchant_id, request_id, payment_method, amount_minor, currency, outcome)
		 SELECT gen_random_uuid(), id, merchant_id, 'grown-' || id, 'tok', 1250, 'GBP', 'succeeded' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`INSERT INTO refunds (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, actor, state)
		 SELECT merchant_id, gen_random_uuid(), id, 'grown-' || id, 100, 100, 'GBP', 'test', 'SUCCEEDED' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`INSERT INTO captures (merchant_id, id, order_id, request_id, requested_minor, amount_minor, currency, final, actor, state)
		 SELECT merchant_id, gen_random_uuid(), id, 'grown-' || id, 100, 100, 'GBP', true, 'test', 'SUCCEEDED' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`INSERT INTO voids (merchant_id, id, order_id, request_id, actor, state)
		 SELECT merchant_id, gen_random_uuid(), id, 'grown-' || id, 'test', 'FAILED' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`INSERT INTO gateway_events (merchant_id, gateway, event_id, event_type, object_id, result)
		 SELECT merchant_id, 'sim', 'grown-' || id, 'charge.succeeded', 'ch', 'review' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id, resolved_at, decision)
		 SELECT merchant_id, 'possible_double_charge', id, gen_random_uuid(), 'sim', 'grown-' || id, now(), 'charged' FROM orders WHERE merchant_reference LIKE 'grown-%'`,
		`ANALYZE`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := seqScans(t, url)
	for i := range 12 {
		for _, f := range []order.ReviewFilter{
			{Scope: order.ForMerchant("merchant-a"), Limit: 2},
			{Scope: order.ForMerchant(fmt.Sprintf("m-%d", i)), Limit: 50},
			{Scope: order.AnyMerchant, Limit: 5},
			{Scope: order.AnyMerchant, Kind: order.ReviewRefund, Limit: 5},
		} {
			if got := listAll(t, s, f); len(got) > len(order.ReviewKinds) && !f.Scope.IsAnyMerchant() {
				t.Fatalf("%+v: %d items", f, len(got))
			}
		}
	}
	// The counters are flushed when a backend ends.
	pool.Close()
	for table, n := range seqScans(t, url) {
		if d := n.scans - before[table].scans; d > 0 {
			t.Errorf("%d sequential scans of %s (%d rows read) by the review queue's reads", d, table, n.rows-before[table].rows)
		}
	}
}
