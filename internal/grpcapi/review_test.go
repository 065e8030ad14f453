package grpcapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// reviewStack is a stack with merchant-a's checkout and ops keys,
// merchant-b's checkout key and the platform's ops key (every merchant).
func reviewStack(t *testing.T) *stack {
	t.Helper()
	keys, err := grpcapi.ParseKeys(fmt.Sprintf("%s merchant-a checkout a-checkout; %s merchant-a ops a-ops; %s merchant-b checkout b-checkout; %s * ops platform-ops",
		grpcapi.HashKey(keyA), grpcapi.HashKey(keyAop), grpcapi.HashKey(keyB), grpcapi.HashKey(keyPlatform)))
	if err != nil {
		t.Fatal(err)
	}
	return newStackWith(t, grpcapi.Options{Keys: keys}, insecure.NewCredentials())
}

// chargeWith creates and charges an order of key's merchant with token.
func (s *stack) chargeWith(t *testing.T, key, ref, token string) *settlev1.Order {
	t.Helper()
	resp, err := s.orders.CreateAndChargeOrder(with(key), &settlev1.CreateAndChargeOrderRequest{MerchantReference: ref,
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: token, RequestId: ref + "-charge"})
	if err != nil {
		t.Fatalf("charge %s: %v", ref, err)
	}
	return resp.GetOrder()
}

// raise records a gateway event about o's current attempt, as the
// webhook listener does, and wants it to raise a review item.
func (s *stack) raise(t *testing.T, o *settlev1.Order, id string, succeeded bool) {
	t.Helper()
	ev := order.GatewayEvent{Gateway: "sim", ID: id, Type: "charge.succeeded", ObjectID: "ch_" + id,
		AttemptID: o.GetCurrentAttemptId(), Succeeded: true, Outcome: order.OutcomeSucceeded}
	want := order.EventReview
	if !succeeded {
		ev.Type, ev.Succeeded, ev.Outcome, ev.DeclineCode, want = "CAPTURE_FAILED", false, order.OutcomeDeclined, "Capture failed",
			order.EventReviewCaptureFailed
	}
	r, err := postgres.NewStore(s.pool).RecordGatewayEvent(context.Background(), ev)
	if err != nil || r.Result != want {
		t.Fatalf("record %s: %+v, %v; want %s", id, r, err, want)
	}
}

// queue pages through the review queue as ctx's key sees it, page_size
// at a time.
func (s *stack) queue(t *testing.T, ctx context.Context, req *settlev1.ListReviewItemsRequest) []*settlev1.ReviewItem {
	t.Helper()
	var all []*settlev1.ReviewItem
	for range 50 {
		resp, err := s.ops.ListReviewItems(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, resp.GetItems()...)
		if resp.GetNextPageToken() == "" {
			return all
		}
		req.PageToken = resp.GetNextPageToken()
	}
	t.Fatal("the queue did not end")
	return nil
}

// TestReviewQueueListsEveryKindWithinScope: ListReviewItems shows an order
// in NEEDS_REVIEW, a possible double charge and a failed capture, oldest
// first, each with its merchant, order, attempt, gateway, time, reason and
// the gateway's recorded answer; filtered by kind; paged with a token that
// is refused for other filters; and an ops key of one merchant sees its
// own alone, even when it names another merchant.
func TestReviewQueueListsEveryKindWithinScope(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	ctx := context.Background()
	declined := s.chargeWith(t, keyA, "review-declined", "tok_decline")
	s.raise(t, declined, "evt-double-a", true)
	paid := s.chargeWith(t, keyA, "review-paid", "tok_ok")
	s.raise(t, paid, "evt-failed-a", false)
	stuck := s.chargeWith(t, keyA, "review-stuck", "tok_timeout")
	if _, err := s.pool.Exec(ctx, `UPDATE orders SET state = 'NEEDS_REVIEW', last_error = 'outcome still unknown after 2 checks: timeout',
		updated_at = now() WHERE id = $1`, stuck.GetId()); err != nil {
		t.Fatal(err)
	}
	other := s.chargeWith(t, keyB, "review-b", "tok_decline")
	s.raise(t, other, "evt-double-b", true)
	aop, platform := with(keyAop), with(keyPlatform)

	all := s.queue(t, platform, &settlev1.ListReviewItemsRequest{})
	if len(all) != 4 {
		t.Fatalf("the platform's queue: %d items, want 4: %v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if all[i].GetRaiseTime().AsTime().Before(all[i-1].GetRaiseTime().AsTime()) {
			t.Errorf("the queue is not oldest first: %v", all)
		}
	}
	byOrder := map[string]*settlev1.ReviewItem{}
	for _, it := range all {
		byOrder[it.GetOrderId()] = it
	}
	if it := byOrder[declined.GetId()]; it.GetKind() != settlev1.ReviewItemKind_REVIEW_ITEM_KIND_POSSIBLE_DOUBLE_CHARGE ||
		it.GetMerchantId() != "merchant-a" || it.GetAttemptId() != declined.GetCurrentAttemptId() || it.GetGateway() != "sim" ||
		it.GetEventId() != "evt-double-a" || it.GetGatewayOutcome() != "succeeded" || !strings.Contains(it.GetReason(), "evt-double-a") {
		t.Errorf("the possible double charge: %v", it)
	}
	if it := byOrder[paid.GetId()]; it.GetKind() != settlev1.ReviewItemKind_REVIEW_ITEM_KIND_CAPTURE_FAILED ||
		it.GetGatewayOutcome() != "declined" || it.GetDeclineCode() != "Capture failed" || it.GetEventType() != "CAPTURE_FAILED" {
		t.Errorf("the failed capture: %v", it)
	}
	if it := byOrder[stuck.GetId()]; it.GetKind() != settlev1.ReviewItemKind_REVIEW_ITEM_KIND_ORDER || it.GetId() != stuck.GetId() ||
		it.GetAttemptId() != stuck.GetCurrentAttemptId() || it.GetLastError() == "" || !strings.Contains(it.GetReason(), "timeout") {
		t.Errorf("the order in review: %v", it)
	}

	// Scope.
	own := s.queue(t, aop, &settlev1.ListReviewItemsRequest{})
	if len(own) != 3 {
		t.Errorf("merchant-a's ops key sees %d items, want its 3", len(own))
	}
	for _, it := range own {
		if it.GetMerchantId() != "merchant-a" {
			t.Errorf("merchant-a's ops key sees %v", it)
		}
	}
	if got := s.queue(t, aop, &settlev1.ListReviewItemsRequest{MerchantId: "merchant-b"}); len(got) != 0 {
		t.Errorf("merchant-a's ops key naming merchant-b sees %v, want nothing", got)
	}
	if got := s.queue(t, platform, &settlev1.ListReviewItemsRequest{MerchantId: "merchant-b"}); len(got) != 1 || got[0].GetOrderId() != other.GetId() {
		t.Errorf("the platform's key naming merchant-b sees %v, want merchant-b's item", got)
	}
	_, err := s.ops.ListReviewItems(with(keyA), &settlev1.ListReviewItemsRequest{})
	wantCode(t, err, codes.PermissionDenied)

	// Kinds and pages.
	doubles := s.queue(t, platform, &settlev1.ListReviewItemsRequest{Kind: settlev1.ReviewItemKind_REVIEW_ITEM_KIND_POSSIBLE_DOUBLE_CHARGE})
	if len(doubles) != 2 {
		t.Errorf("possible double charges: %v, want 2", doubles)
	}
	paged := s.queue(t, platform, &settlev1.ListReviewItemsRequest{PageSize: 1})
	if len(paged) != len(all) {
		t.Fatalf("pages of one: %d items, want %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].GetId() != all[i].GetId() {
			t.Errorf("pages of one, item %d: %s, want %s", i, paged[i].GetId(), all[i].GetId())
		}
	}
	first, err := s.ops.ListReviewItems(platform, &settlev1.ListReviewItemsRequest{PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	for name, req := range map[string]*settlev1.ListReviewItemsRequest{
		"a token with another kind": {PageToken: first.GetNextPageToken(), Kind: settlev1.ReviewItemKind_REVIEW_ITEM_KIND_ORDER},
		"a token with a merchant":   {PageToken: first.GetNextPageToken(), MerchantId: "merchant-a"},
		"a token of nothing":        {PageToken: "not-a-token"},
		"a page too large":          {PageSize: 501},
		"an unknown kind":           {Kind: settlev1.ReviewItemKind(99)},
	} {
		_, err := s.ops.ListReviewItems(platform, req)
		if err == nil {
			t.Errorf("%s: no error, want InvalidArgument", name)
			continue
		}
		wantCode(t, err, codes.InvalidArgument)
	}
}

// TestResolveReviewItemAsksTheGatewayFirst: a review item is resolved
// NOT_CHARGED only when the gateway, asked about its attempt, proves no
// charge; CHARGED stands whatever the gateway says. The resolution keeps
// the operator, the note, the time and the gateway's answer, and leaves
// the queue; the same decision again is answered alike, another is
// FAILED_PRECONDITION. Another merchant's item is NOT_FOUND to a scoped
// ops key, and the note never reaches the logs.
func TestResolveReviewItemAsksTheGatewayFirst(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	ctx := context.Background()
	declined := s.chargeWith(t, keyA, "resolve-declined", "tok_decline")
	s.raise(t, declined, "evt-double", true)
	paid := s.chargeWith(t, keyA, "resolve-paid", "tok_ok")
	s.raise(t, paid, "evt-failed", false)
	unsure := s.chargeWith(t, keyA, "resolve-unsure", "tok_lookup_fails")
	if _, err := s.pool.Exec(ctx, `INSERT INTO review_items (merchant_id, kind, order_id, attempt_id, gateway, event_id)
		VALUES ('merchant-a', 'possible_double_charge', $1, $2, 'sim', 'evt-unsure')`, unsure.GetId(), unsure.GetCurrentAttemptId()); err != nil {
		t.Fatal(err)
	}
	other := s.chargeWith(t, keyB, "resolve-b", "tok_decline")
	s.raise(t, other, "evt-b", true)
	aop, platform := with(keyAop), with(keyPlatform)
	items := map[string]string{}
	for _, it := range s.queue(t, platform, &settlev1.ListReviewItemsRequest{}) {
		items[it.GetOrderId()] = it.GetId()
	}
	const note = "checked the gateway dashboard, ticket OPS-1234"
	resolve := func(ctx context.Context, o *settlev1.Order, d settlev1.ReviewDecision, note string) (*settlev1.ReviewItem, error) {
		resp, err := s.ops.ResolveReviewItem(ctx, &settlev1.ResolveReviewItemRequest{OrderId: o.GetId(), ReviewItemId: items[o.GetId()],
			Decision: d, Note: note})
		return resp.GetItem(), err
	}
	notCharged, charged := settlev1.ReviewDecision_REVIEW_DECISION_NOT_CHARGED, settlev1.ReviewDecision_REVIEW_DECISION_CHARGED

	// The gateway declined the attempt: not charged.
	it, err := resolve(aop, declined, notCharged, note)
	if err != nil || it.GetDecision() != notCharged || it.GetActor() != "ops:a-ops" || it.GetNote() != note ||
		it.GetResolveTime() == nil || it.GetResolvedGatewayOutcome() != "declined" {
		t.Fatalf("resolve the declined attempt: %v, %v", it, err)
	}
	again, err := resolve(aop, declined, notCharged, "again")
	if err != nil || again.GetNote() != note || !again.GetResolveTime().AsTime().Equal(it.GetResolveTime().AsTime()) {
		t.Errorf("the same decision again: %v, %v; want the first resolution", again, err)
	}
	_, err = resolve(aop, declined, charged, "changed my mind")
	wantCode(t, err, codes.FailedPrecondition)

	// The gateway reports the charge: not charged is refused, charged
	// stands.
	_, err = resolve(aop, paid, notCharged, note)
	wantCode(t, err, codes.FailedPrecondition)
	if it, err := resolve(aop, paid, charged, note); err != nil || it.GetDecision() != charged || it.GetResolvedGatewayOutcome() != "succeeded" {
		t.Errorf("resolve the paid attempt charged: %v, %v", it, err)
	}

	// The gateway cannot say: not charged waits, charged stands.
	_, err = resolve(aop, unsure, notCharged, note)
	wantCode(t, err, codes.Unavailable)
	if it, err := resolve(aop, unsure, charged, note); err != nil || it.GetDecision() != charged || it.GetResolvedGatewayOutcome() != "" {
		t.Errorf("resolve the unsure attempt charged: %v, %v", it, err)
	}

	// Scope, and bad requests.
	_, err = resolve(aop, other, charged, note)
	wantCode(t, err, codes.NotFound)
	_, err = s.ops.ResolveReviewItem(aop, &settlev1.ResolveReviewItemRequest{OrderId: declined.GetId(), ReviewItemId: order.NewID(),
		Decision: charged, Note: note})
	wantCode(t, err, codes.NotFound)
	for name, d := range map[string]struct {
		decision settlev1.ReviewDecision
		note     string
	}{
		"no decision":             {settlev1.ReviewDecision_REVIEW_DECISION_UNSPECIFIED, note},
		"no note":                 {charged, ""},
		"a card number in a note": {charged, "card 4242 4242 4242 4242"},
	} {
		_, err := resolve(platform, other, d.decision, d.note)
		if err == nil {
			t.Errorf("%s: no error, want InvalidArgument", name)
			continue
		}
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err = s.ops.ResolveReviewItem(with(keyA), &settlev1.ResolveReviewItemRequest{OrderId: other.GetId(),
		ReviewItemId: items[other.GetId()], Decision: charged, Note: note})
	wantCode(t, err, codes.PermissionDenied)
	if it, err := resolve(platform, other, charged, note); err != nil || it.GetActor() != "ops:platform-ops" {
		t.Errorf("the platform resolves merchant-b's item: %v, %v", it, err)
	}

	if left := s.queue(t, platform, &settlev1.ListReviewItemsRequest{}); len(left) != 0 {
		t.Errorf("resolved items still in the queue: %v", left)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, "review item resolved") || !strings.Contains(logs, "gateway lookup") {
		t.Errorf("the logs have no resolution and lookup lines:\n%.3000s", logs)
	}
	if strings.Contains(logs, "OPS-1234") {
		t.Errorf("a note reached the logs")
	}
}

// TestResolveReviewItemConcurrently: operators resolving one review item
// at once, with both decisions, record one: every call of the recorded
// decision answers it, every call of the other is FAILED_PRECONDITION.
func TestResolveReviewItemConcurrently(t *testing.T) {
	t.Parallel()
	s := reviewStack(t)
	paid := s.chargeWith(t, keyA, "resolve-race", "tok_ok")
	s.raise(t, paid, "evt-race", false)
	items := s.queue(t, with(keyAop), &settlev1.ListReviewItemsRequest{})
	if len(items) != 1 {
		t.Fatalf("queue: %v", items)
	}
	// The gateway reports the charge, so NOT_CHARGED is refused whoever
	// wins; the calls of CHARGED race each other and the refusals.
	const calls = 8
	type answer struct {
		item *settlev1.ReviewItem
		err  error
	}
	answers := make(chan answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		d := settlev1.ReviewDecision_REVIEW_DECISION_CHARGED
		if i%2 == 1 {
			d = settlev1.ReviewDecision_REVIEW_DECISION_NOT_CHARGED
		}
		wg.Go(func() {
			resp, err := s.ops.ResolveReviewItem(with(keyAop), &settlev1.ResolveReviewItemRequest{OrderId: paid.GetId(),
				ReviewItemId: items[0].GetId(), Decision: d, Note: fmt.Sprintf("operator %d", i)})
			answers <- answer{resp.GetItem(), err}
		})
	}
	wg.Wait()
	close(answers)
	var first *settlev1.ReviewItem
	ok := 0
	for a := range answers {
		if a.err != nil {
			wantCode(t, a.err, codes.FailedPrecondition)
			continue
		}
		ok++
		if first == nil {
			first = a.item
		} else if a.item.GetNote() != first.GetNote() || !a.item.GetResolveTime().AsTime().Equal(first.GetResolveTime().AsTime()) {
			t.Errorf("two resolutions: %v and %v", first, a.item)
		}
	}
	if ok != calls/2 || first.GetDecision() != settlev1.ReviewDecision_REVIEW_DECISION_CHARGED {
		t.Errorf("%d calls answered the resolution %v, want the %d of CHARGED", ok, first, calls/2)
	}
	if n := s.count(t, "SELECT count(*) FROM review_items WHERE resolved_at IS NOT NULL AND decision = 'charged'"); n != 1 {
		t.Errorf("%d resolved items, want 1", n)
	}
}
