package grpcapi_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	settlev1 "github.com/settlepay/settle/gen/settle/v1"
	"github.com/settlepay/settle/internal/gateway/refpsp"
	"github.com/settlepay/settle/internal/gateway/sim"
	"github.com/settlepay/settle/internal/grpcapi"
	"github.com/settlepay/settle/internal/order"
	"github.com/settlepay/settle/internal/postgres"
)

// acceptingGateway is a refpsp gateway on a simulator of its own that can
// also read and accept its disputes (order.DisputeGateway).
type acceptingGateway struct {
	*refpsp.Client
	mu       sync.Mutex
	disputes map[string]order.GatewayDispute
}

func (g *acceptingGateway) GetDispute(_ context.Context, id string) (order.GatewayDispute, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.disputes[id], nil
}

func (g *acceptingGateway) AcceptDispute(_ context.Context, id string) (order.GatewayDispute, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.disputes[id]
	d.Status = order.DisputeLost
	g.disputes[id] = d
	return d, nil
}

// wordGateway is a gateway whose dispute events are its word, as Adyen's
// notifications are: it charges, looks up and refunds, but cannot read or
// accept a dispute (it is no order.DisputeGateway).
type wordGateway struct {
	order.Gateway
	order.Refunder
}

// simClient is a refpsp adapter on a simulator of its own.
func simClient(t *testing.T) *refpsp.Client {
	t.Helper()
	hs := httptest.NewServer(sim.New(sim.Options{ClientTimeout: 2 * gatewayTimeout}))
	t.Cleanup(hs.Close)
	client, err := refpsp.New(refpsp.Config{BaseURL: hs.URL, APIKey: "sk_sim_test", Timeout: gatewayTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func openDispute(dp string) order.GatewayDispute {
	return order.GatewayDispute{ID: dp, Status: order.DisputeNeedsResponse, Stage: order.DisputeChargeback,
		Amount: order.Money{Currency: "GBP", AmountMinor: 1250}, Reason: "fraudulent",
		DueBy: time.Now().Add(48 * time.Hour), Withdrawn: 1250}
}

// TestDisputeOpsCalls: the Order message carries its disputed and charged
// back amounts, a refund during a dispute is FAILED_PRECONDITION naming
// it, and OpsService lists, reads and accepts disputes over real gRPC.
func TestDisputeOpsCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := simClient(t)
	accepting := &acceptingGateway{Client: client, disputes: map[string]order.GatewayDispute{}}
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(),
		map[string]order.Gateway{"accepting": accepting, "word": wordGateway{client, client}})
	store := postgres.NewStore(s.pool)

	// A dispute of an order on a gateway that cannot accept one.
	wo, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "api-dispute",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Gateway: "word"})
	if err != nil {
		t.Fatal(err)
	}
	o := wo.GetOrder()
	att := s.charge(t, o.GetId(), "api-dispute-charge").GetAttempt().GetId()
	d := openDispute("dp_api")
	a, err := store.ApplyDispute(ctx, order.DisputeChange{Actor: order.ActorGateway, Dispute: d,
		Event: order.GatewayEvent{Gateway: "word", ID: "evt_api", Type: "dispute", AttemptID: att, Dispute: &d}})
	if err != nil || a.Dispute == nil {
		t.Fatalf("apply: %+v %v", a, err)
	}
	id := a.Dispute.ID

	got, err := s.orders.GetOrder(ctx, &settlev1.GetOrderRequest{Key: &settlev1.GetOrderRequest_Id{Id: o.GetId()}})
	if err != nil || got.GetOrder().GetState() != settlev1.OrderState_ORDER_STATE_PAID ||
		got.GetOrder().GetDisputed().GetAmountMinor() != 1250 || got.GetOrder().GetChargedBack().GetAmountMinor() != 1250 {
		t.Fatalf("GetOrder: %v %v", got, err)
	}
	_, err = s.orders.RefundOrder(ctx, &settlev1.RefundOrderRequest{OrderId: o.GetId(), RequestId: "api-dispute-refund", AmountMinor: 100})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), id) {
		t.Fatalf("refund during a dispute: %v, want FAILED_PRECONDITION naming %s", err, id)
	}

	list, err := s.ops.ListDisputes(ctx, &settlev1.ListDisputesRequest{Status: settlev1.DisputeStatus_DISPUTE_STATUS_NEEDS_RESPONSE,
		DueBefore: timestamppb.New(time.Now().Add(72 * time.Hour))})
	if err != nil || len(list.GetDisputes()) != 1 || list.GetDisputes()[0].GetId() != id ||
		list.GetDisputes()[0].GetWithdrawn().GetAmountMinor() != 1250 || list.GetDisputes()[0].GetDueTime() == nil {
		t.Fatalf("ListDisputes: %v %v", list, err)
	}
	list, err = s.ops.ListDisputes(ctx, &settlev1.ListDisputesRequest{DueBefore: timestamppb.New(time.Now())})
	if err != nil || len(list.GetDisputes()) != 0 {
		t.Fatalf("ListDisputes due before now: %v %v", list, err)
	}
	one, err := s.ops.GetDispute(ctx, &settlev1.GetDisputeRequest{DisputeId: id})
	if err != nil || one.GetDispute().GetOrderId() != o.GetId() || len(one.GetEvents()) != 1 ||
		one.GetEvents()[0].GetEvent() != "opened" || one.GetEvents()[0].GetGatewayEventId() != "evt_api" {
		t.Fatalf("GetDispute: %v %v", one, err)
	}
	_, err = s.ops.GetDispute(ctx, &settlev1.GetDisputeRequest{DisputeId: order.NewID()})
	wantCode(t, err, codes.NotFound)
	_, err = s.ops.AcceptDispute(ctx, &settlev1.AcceptDisputeRequest{DisputeId: id})
	wantCode(t, err, codes.FailedPrecondition)

	// A dispute at a gateway that can accept it.
	ao, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: "api-dispute-accept",
		Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Gateway: "accepting"})
	if err != nil {
		t.Fatal(err)
	}
	aatt := s.charge(t, ao.GetOrder().GetId(), "api-dispute-accept-charge").GetAttempt().GetId()
	ad := openDispute("dp_accept")
	accepting.disputes[ad.ID] = ad
	aa, err := store.ApplyDispute(ctx, order.DisputeChange{Actor: order.ActorGateway, Dispute: ad,
		Event: order.GatewayEvent{Gateway: "accepting", ID: "evt_accept", AttemptID: aatt, Dispute: &ad}})
	if err != nil || aa.Dispute == nil {
		t.Fatalf("apply: %+v %v", aa, err)
	}
	acc, err := s.ops.AcceptDispute(ctx, &settlev1.AcceptDisputeRequest{DisputeId: aa.Dispute.ID})
	if err != nil || acc.GetDispute().GetStatus() != settlev1.DisputeStatus_DISPUTE_STATUS_LOST {
		t.Fatalf("AcceptDispute: %v %v", acc, err)
	}
	hist, err := s.ops.GetDispute(ctx, &settlev1.GetDisputeRequest{DisputeId: aa.Dispute.ID})
	if err != nil || len(hist.GetEvents()) != 2 || hist.GetEvents()[1].GetEvent() != "accept" ||
		!strings.HasPrefix(hist.GetEvents()[1].GetActor(), "ops:") {
		t.Fatalf("history after accept: %v %v", hist, err)
	}
}

// TestDisputesNearDueInReviewQueue: a dispute waiting on the merchant's
// evidence enters the review queue when it is due within 72 hours (raised
// 72 hours before it is due), a later one does not, and one the gateway
// reports answered leaves it; the operator finds the order by the
// dispute's gateway id.
func TestDisputesNearDueInReviewQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := simClient(t)
	s := newStackWith(t, grpcapi.Options{}, insecure.NewCredentials(), map[string]order.Gateway{"word": wordGateway{client, client}})
	store := postgres.NewStore(s.pool)
	dispute := func(ref string, due time.Duration, status order.DisputeStatus) string {
		t.Helper()
		o, err := s.orders.CreateOrder(ctx, &settlev1.CreateOrderRequest{MerchantReference: ref,
			Amount: &settlev1.Money{Currency: "GBP", AmountMinor: 1250}, PaymentMethod: "tok_ok", Gateway: "word"})
		if err != nil {
			t.Fatal(err)
		}
		att := s.charge(t, o.GetOrder().GetId(), ref+"-charge").GetAttempt().GetId()
		d := openDispute("dp_" + ref)
		d.DueBy, d.Status = time.Now().Add(due), status
		a, err := store.ApplyDispute(ctx, order.DisputeChange{Actor: order.ActorGateway, Dispute: d,
			Event: order.GatewayEvent{Gateway: "word", ID: "evt_" + ref, Type: "dispute", AttemptID: att, Dispute: &d}})
		if err != nil || a.Dispute == nil {
			t.Fatalf("apply %s: %+v %v", ref, a, err)
		}
		return a.Dispute.ID
	}
	near := dispute("due-near", 48*time.Hour, order.DisputeNeedsResponse)
	overdue := dispute("due-overdue", -time.Hour, order.DisputeNeedsResponse)
	dispute("due-later", 10*24*time.Hour, order.DisputeNeedsResponse)
	dispute("due-answered", time.Hour, order.DisputeUnderReview)

	q, err := s.ops.ListReviewItems(ctx, &settlev1.ListReviewItemsRequest{Kind: settlev1.ReviewItemKind_REVIEW_ITEM_KIND_DISPUTE})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range q.GetItems() {
		got = append(got, it.GetDisputeId())
		want := time.Now().Add(48 * time.Hour)
		if it.GetDisputeId() == overdue {
			want = time.Now().Add(-time.Hour)
		}
		if d := it.GetDueTime().AsTime().Sub(want); d > time.Minute || d < -time.Minute ||
			it.GetRaiseTime().AsTime() != it.GetDueTime().AsTime().Add(-order.DisputeDueWithin) ||
			!strings.Contains(it.GetReason(), "fraudulent") || it.GetId() != it.GetDisputeId() {
			t.Errorf("item %v", it)
		}
	}
	if len(got) != 2 || got[0] != overdue || got[1] != near {
		t.Fatalf("disputes in the queue: %v, want %s (overdue) then %s (due in 48 h)", got, overdue, near)
	}
	// Every kind at once keeps them, among the rest, by raise time.
	all, err := s.ops.ListReviewItems(ctx, &settlev1.ListReviewItemsRequest{PageSize: 1})
	if err != nil || len(all.GetItems()) != 1 || all.GetItems()[0].GetDisputeId() != overdue {
		t.Fatalf("first of the whole queue: %v %v", all, err)
	}
	next, err := s.ops.ListReviewItems(ctx, &settlev1.ListReviewItemsRequest{PageSize: 1, PageToken: all.GetNextPageToken()})
	if err != nil || len(next.GetItems()) != 1 || next.GetItems()[0].GetDisputeId() != near {
		t.Fatalf("second page: %v %v", next, err)
	}
	found, err := s.ops.FindOrders(ctx, &settlev1.FindOrdersRequest{Query: "dp_due-near"})
	if err != nil || len(found.GetOrders()) != 1 || found.GetOrders()[0].GetMerchantReference() != "due-near" {
		t.Fatalf("FindOrders by the dispute's gateway id: %v %v", found, err)
	}
}
